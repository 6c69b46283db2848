package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// printPdeathsig is the test binary run as a Slurm command (pdeathsigEnv):
// it prints the parent-death signal it was started with (0: none).
func printPdeathsig() int {
	var sig int32
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0); e != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_GET_PDEATHSIG):", e)
		return 1
	}
	fmt.Println(sig)
	return 0
}

// TestSlurmOnlySbatchDiesWithTheNode: sbatch is started with the
// parent-death signal (a crashed node's sbatch must not queue its job
// later), and the other Slurm commands without it, so that only sbatch
// pins a thread of the node while it runs. The commands are the test
// binary under their names, printing the signal they were given (Slurm's
// own commands cannot tell).
func TestSlurmOnlySbatchDiesWithTheNode(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	names := []string{"sbatch", "squeue", "sinfo", "scontrol", "scancel"}
	for _, name := range names {
		if err := os.Symlink(exe, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	s, err := NewSlurm(SlurmConfig{DataDir: t.TempDir(), Env: []string{pdeathsigEnv + "=1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range names {
		var out string
		if name == "sbatch" {
			out, err = s.sbatch(ctx, nil, "--parsable")
		} else {
			out, err = s.command(ctx, nil, nil, name)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := "0"
		if name == "sbatch" {
			want = fmt.Sprint(int(syscall.SIGKILL))
		}
		if got := strings.TrimSpace(out); got != want {
			t.Errorf("%s ran with parent-death signal %s, want %s", name, got, want)
		}
	}
}
