package executor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newProcess returns a Process executor on dir that runs this test binary
// as its supervisor, with a fast poll and the given kill grace.
func newProcess(t *testing.T, dir string, grace time.Duration) *Process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProcess(ProcessConfig{
		DataDir:           dir,
		SupervisorCommand: []string{self},
		// A race-enabled binary sleeps a second at exit unless told not to.
		SupervisorEnv: []string{supervisorEnv + "=1", "GORACE=" + os.Getenv("GORACE") + " atexit_sleep_ms=0"},
		KillGrace:     grace,
		PollInterval:  10 * time.Millisecond,
		StartTimeout:  5 * time.Second,
		// These jobs name no user: run as root when the tests do.
		Accounts: Accounts{AllowRoot: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs e.Run until the test ends.
func run(t *testing.T, e Executor) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := e.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitExit waits for the next Exit, failing after a generous bound.
func waitExit(t *testing.T, e Executor) Exit {
	t.Helper()
	select {
	case x := <-e.Exits():
		return x
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported")
		return Exit{}
	}
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestProcessExitCodeAndOutput(t *testing.T) {
	dir := t.TempDir()
	p := newProcess(t, dir, time.Second)
	run(t, p)
	start := time.Now()
	if err := p.Start(context.Background(), Spec{JobID: "j1", Argv: sh("echo hi; echo oops >&2; exit 3")}); err != nil {
		t.Fatal(err)
	}
	// Start returns when the job runs, not when it ends nor at the start
	// timeout (5s here).
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Start took %v", d)
	}
	x := waitExit(t, p)
	if x.JobID != "j1" || x.ExitCode != 3 || x.Killed || x.Signaled || x.Lost || x.At.IsZero() {
		t.Fatalf("exit = %+v, want code 3", x)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "jobs", "j1", "stdout"))
	if string(out) != "hi\n" {
		t.Errorf("stdout = %q", out)
	}
	errOut, _ := os.ReadFile(filepath.Join(dir, "jobs", "j1", "stderr"))
	if string(errOut) != "oops\n" {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestProcessEnvAndWorkdir(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	p := newProcess(t, dir, time.Second)
	run(t, p)
	t.Setenv("FEDSCHED_SECRET_OF_THE_NODE", "leak")
	err := p.Start(context.Background(), Spec{
		JobID:   "env",
		Argv:    sh(`echo "$GREETING $FEDSCHED_JOB_ID [$FEDSCHED_SECRET_OF_THE_NODE]"; pwd`),
		Env:     map[string]string{"GREETING": "hello"},
		Workdir: work,
	})
	if err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, p); x.ExitCode != 0 {
		t.Fatalf("exit = %+v", x)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "jobs", "env", "stdout"))
	want := "hello env []\n" + work + "\n"
	if string(out) != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
}

func TestProcessKilledAtDeadline(t *testing.T) {
	p := newProcess(t, t.TempDir(), 5*time.Second)
	run(t, p)
	start := time.Now()
	if err := p.Start(context.Background(), Spec{JobID: "sleeper", Argv: []string{"sleep", "100"}, Deadline: start.Add(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	x := waitExit(t, p)
	if !x.Killed || x.Cause != CauseDeadline || !x.Signaled || x.Signal != int(syscall.SIGTERM) || x.ExitCode != 143 {
		t.Fatalf("exit = %+v, want killed at deadline by SIGTERM", x)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 4*time.Second {
		t.Errorf("ended after %v, deadline was 300ms", d)
	}
}

// TestProcessLimitCountsFromTheStart: a job whose Deadline passes while
// its supervisor is still starting it (a busy host) still runs for Limit
// from its own start: here its deadline is past before it runs, and it
// ends by itself.
func TestProcessLimitCountsFromTheStart(t *testing.T) {
	p := newProcess(t, t.TempDir(), 5*time.Second)
	run(t, p)
	err := p.Start(context.Background(), Spec{JobID: "late", Argv: []string{"sleep", "1"}, Deadline: time.Now().Add(-time.Second), Limit: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, p); x.Killed || x.ExitCode != 0 {
		t.Fatalf("exit = %+v, want the job's own end: its limit of 30 s counts from its start", x)
	}
}

func TestProcessIgnoringTermGetsKill(t *testing.T) {
	p := newProcess(t, t.TempDir(), 300*time.Millisecond)
	run(t, p)
	start := time.Now()
	err := p.Start(context.Background(), Spec{JobID: "stubborn", Argv: sh("trap '' TERM; sleep 100"), Deadline: start.Add(200 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	x := waitExit(t, p)
	if !x.Killed || x.Cause != CauseDeadline || !x.Signaled || x.Signal != int(syscall.SIGKILL) {
		t.Fatalf("exit = %+v, want killed by SIGKILL", x)
	}
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Errorf("ended after %v: before deadline + grace (500ms)", d)
	}
}

func TestProcessKill(t *testing.T) {
	p := newProcess(t, t.TempDir(), time.Second)
	run(t, p)
	if err := p.Start(context.Background(), Spec{JobID: "k", Argv: []string{"sleep", "100"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill("k"); err != nil {
		t.Fatal(err)
	}
	x := waitExit(t, p)
	if !x.Killed || x.Cause != CauseRequest || x.Signal != int(syscall.SIGTERM) {
		t.Fatalf("exit = %+v, want killed on request", x)
	}
	if err := p.Kill("k"); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("Kill after the exit = %v, want ErrUnknownJob", err)
	}
}

func TestProcessStartErrors(t *testing.T) {
	dir := t.TempDir()
	p := newProcess(t, dir, time.Second)
	run(t, p)
	ctx := context.Background()
	for _, id := range []string{"", "../up", ".hidden", "a/b", strings.Repeat("x", 201)} {
		if err := p.Start(ctx, Spec{JobID: id, Argv: []string{"true"}}); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Start(id %q) = %v, want ErrInvalidSpec", id, err)
		}
	}
	if err := p.Start(ctx, Spec{JobID: "noargv"}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Start without a command = %v, want ErrInvalidSpec", err)
	}
	err := p.Start(ctx, Spec{JobID: "missing", Argv: []string{"no-such-program-fedsched"}})
	if !errors.Is(err, ErrStartFailed) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Start of a missing program = %v, want ErrStartFailed", err)
	}
	err = p.Start(ctx, Spec{JobID: "badwd", Argv: []string{"true"}, Workdir: filepath.Join(dir, "nope")})
	if !errors.Is(err, ErrStartFailed) {
		t.Errorf("Start in a missing workdir = %v, want ErrStartFailed", err)
	}
	// A job id is never run twice, even by a new executor on the same data.
	if err := p.Start(ctx, Spec{JobID: "once", Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	waitExit(t, p)
	if err := p.Start(ctx, Spec{JobID: "once", Argv: []string{"true"}}); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
	}
	if err := newProcess(t, dir, time.Second).Start(ctx, Spec{JobID: "missing", Argv: []string{"true"}}); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("Start of a failed job by a new executor = %v, want ErrAlreadyStarted", err)
	}
	select {
	case x := <-p.Exits():
		t.Errorf("unexpected exit %+v", x)
	default:
	}
}

func TestProcessReattach(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	// The first executor (the node before its restart) starts two jobs and
	// is dropped without ever running.
	first := newProcess(t, dir, time.Second)
	if err := first.Start(ctx, Spec{JobID: "finishes", Argv: sh("sleep 0.3; echo done; exit 7")}); err != nil {
		t.Fatal(err)
	}
	if err := first.Start(ctx, Spec{JobID: "runs-on", Argv: []string{"sleep", "100"}}); err != nil {
		t.Fatal(err)
	}

	second := newProcess(t, dir, time.Second)
	for _, id := range []string{"finishes", "runs-on"} {
		if err := second.Reattach(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := second.Reattach("never-started"); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("Reattach of an unknown job = %v, want ErrUnknownJob", err)
	}
	run(t, second)
	x := waitExit(t, second)
	if x.JobID != "finishes" || x.ExitCode != 7 || x.Killed || x.Lost {
		t.Fatalf("exit = %+v, want finishes with 7", x)
	}
	// Kill works on a re-attached job.
	if err := second.Kill("runs-on"); err != nil {
		t.Fatal(err)
	}
	x = waitExit(t, second)
	if x.JobID != "runs-on" || !x.Killed || x.Cause != CauseRequest {
		t.Fatalf("exit = %+v, want runs-on killed on request", x)
	}
	// A job that ended while no node watched is reported at once.
	third := newProcess(t, dir, time.Second)
	if err := third.Reattach("finishes"); err != nil {
		t.Fatal(err)
	}
	run(t, third)
	if x := waitExit(t, third); x.ExitCode != 7 {
		t.Fatalf("exit = %+v", x)
	}
}

func TestProcessReattachLost(t *testing.T) {
	dir := t.TempDir()
	jobDir := filepath.Join(dir, "jobs", "ghost")
	if err := os.MkdirAll(jobDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(jobDir, specFile), jobSpecFile{JobID: "ghost", Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	// The recorded supervisor pid is alive (it is this test) but started at
	// another time: the pid was reused, the supervisor is gone. Where /proc
	// is missing, use a pid that cannot exist.
	state := supervisorState{PID: os.Getpid(), PIDStart: 1}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		state = supervisorState{PID: 1 << 30}
	}
	if err := writeJSON(filepath.Join(jobDir, supervisorFile), state); err != nil {
		t.Fatal(err)
	}
	p := newProcess(t, dir, time.Second)
	if err := p.Reattach("ghost"); err != nil {
		t.Fatal(err)
	}
	run(t, p)
	if x := waitExit(t, p); !x.Lost || x.JobID != "ghost" {
		t.Fatalf("exit = %+v, want lost", x)
	}
}

func TestRunSupervisorUsage(t *testing.T) {
	if got := RunSupervisor(nil); got != 2 {
		t.Errorf("RunSupervisor(nil) = %d, want 2", got)
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4"}, []string{"A=5"})
	want := []string{"A=5", "B=3", "C=4"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("mergeEnv = %v, want %v", got, want)
	}
}

// TestProcessKillOfEndedJobSparesItsOldGroup: a job whose supervisor
// recorded its end and exited is killed (a cancel that crossed the end):
// the kill must not signal the job's old process group, whose number may
// belong to another process by now. Here it does: a sleeper of this test.
func TestProcessKillOfEndedJobSparesItsOldGroup(t *testing.T) {
	p := newProcess(t, t.TempDir(), time.Second)
	other := exec.Command("sleep", "100")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }() //nolint:errcheck // cleanup
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir := p.JobDir("ended")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, supervisorFile), supervisorState{PID: gone.Process.Pid, PGID: other.Process.Pid, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, exitFile), exitState{At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := p.Reattach("ended"); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill("ended"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process group the ended job once had was signalled: %v", err)
	}
	var ws syscall.WaitStatus
	if pid, _ := syscall.Wait4(other.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 {
		t.Fatalf("the process group the ended job once had was killed: %v", ws)
	}
}
