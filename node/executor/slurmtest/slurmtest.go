// Package slurmtest is what the Slurm tests of every package share: they
// run against a real local Slurm (scripts/slurm-up.sh, which .ci/run
// starts) and skip, saying why, where there is none.
package slurmtest

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Require skips t unless SLURM_CONF is set and the Slurm commands are on
// PATH, and fails it if SLURM_CONF is set but slurmctld does not answer
// (a Slurm that was meant to be there and is not).
func Require(t testing.TB) {
	t.Helper()
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		t.Skip("SKIP Slurm tests: SLURM_CONF is not set; as root run `export SLURM_CONF=$(scripts/slurm-up.sh | tail -1)` (installs and starts a local Slurm)")
	}
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("SKIP Slurm tests: sbatch is not on PATH; run scripts/slurm-up.sh as root")
	}
	if out, err := exec.Command("scontrol", "ping").CombinedOutput(); err != nil || !strings.Contains(string(out), "UP") {
		t.Fatalf("SLURM_CONF=%s is set but slurmctld does not answer (run scripts/slurm-up.sh): %v %s", conf, err, out)
	}
}

// Points of a submission at which PausingSbatch pauses.
const (
	// BeforeSubmit: sbatch has started and not yet talked to slurmctld.
	BeforeSubmit = "before-submit"
	// AfterSubmit: slurmctld has queued the job and sbatch has not yet
	// answered (its output, the job's id, is held back).
	AfterSubmit = "after-submit"
)

// PausingSbatch writes, in a new directory it returns (put it first on
// the PATH of the process that runs sbatch), an sbatch that runs the real
// one (found on PATH now) and pauses at point: the first sbatch of a job
// directory to get there creates test-paused in it ("<point> <pid>") and
// waits until test-resume exists (at most 2 minutes); a later one goes on
// at once. The job directory is sbatch's --chdir (the Slurm executor's,
// for a job without a working directory of its own). Pause files are
// those of supervisortest: its WaitPaused, PausedPID and Resume work on
// them.
func PausingSbatch(t testing.TB, point string) string {
	t.Helper()
	real, err := exec.LookPath("sbatch")
	if err != nil {
		t.Fatalf("sbatch: %v", err)
	}
	if point != BeforeSubmit && point != AfterSubmit {
		t.Fatalf("PausingSbatch: no point %q", point)
	}
	script := `#!/bin/sh
# sbatch paused at ` + point + ` (slurmtest.PausingSbatch)
real='` + real + `'
point='` + point + `'
dir=
for a; do case $a in --chdir=*) dir=${a#--chdir=} ;; esac; done
pause() {
	[ -n "$dir" ] || return 0
	( set -C; echo "$point $$" >"$dir/test-paused" ) 2>/dev/null || return 0
	i=0
	while [ ! -e "$dir/test-resume" ] && [ $i -lt 24000 ]; do sleep 0.005; i=$((i + 1)); done
}
if [ "$point" = before-submit ]; then
	pause
	exec "$real" "$@"
fi
out=$("$real" "$@")
rc=$?
pause
printf '%s\n' "$out"
exit $rc
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sbatch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ProcessGone waits until process pid has ended (or is a zombie: its
// parent died and nothing reaps it), and reports whether it did.
func ProcessGone(pid int, within time.Duration) bool {
	if pid <= 0 {
		return true
	}
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if _, rest, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(rest, "Z") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
