package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/executor/supervisortest"
)

// TestProcessStartCutAtEachStep: the node is stopped (Start's ctx ends)
// while the supervisor is at each step of its start, and a new node (a new
// executor on the same data directory) takes over as the node does
// (node.adoptStarted, node.start): Started, then Reattach, or Start again.
// The job runs exactly once and its end is recorded, never lost. Before
// the fix the executor SIGKILLed the supervisor: from the claim on, the job
// was then lost (and, once its process had started, left running).
func TestProcessStartCutAtEachStep(t *testing.T) {
	for _, tc := range []struct {
		step SupervisorStep
		// claimed: the directory says the job was taken.
		claimed bool
		// resumeFirst: the cut supervisor goes on before the new node
		// looks (else only after the new node's Start or Reattach).
		resumeFirst bool
		// kill: the new node kills the re-attached job while its
		// supervisor is still paused.
		kill bool
	}{
		{step: StepBeforeClaim},
		{step: StepBeforeClaim, resumeFirst: true, claimed: true},
		{step: StepClaimed, claimed: true},
		{step: StepClaimed, claimed: true, kill: true},
		{step: StepJobStarted, claimed: true},
		{step: StepJobStarted, claimed: true, kill: true},
		{step: StepRecorded, claimed: true},
	} {
		name := string(tc.step)
		if tc.resumeFirst {
			name += "/resumed-before-restart"
		}
		if tc.kill {
			name += "/killed-after-restart"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker")
			first := newProcess(t, dir, time.Second)
			first.cfg.SupervisorEnv = append(first.cfg.SupervisorEnv, supervisortest.PauseEnv+"="+string(tc.step))
			jobDir := first.JobDir("j")

			ctx, stop := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			argv := markerJob(marker)
			if tc.kill {
				argv = sh("echo ran >> " + marker + "; exec sleep 60") // still running when killed
			}
			go func() { errc <- first.Start(ctx, Spec{JobID: "j", Argv: argv}) }()
			if err := supervisortest.WaitPaused(jobDir, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			stop()
			err := <-errc
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStartFailed) {
				t.Fatalf("cut Start = %v, want context.Canceled and not ErrStartFailed", err)
			}
			if tc.resumeFirst {
				if err := supervisortest.Resume(jobDir); err != nil {
					t.Fatal(err)
				}
				waitClaimed(t, jobDir)
			}

			// The new node.
			second := newProcess(t, dir, time.Second)
			rec, err := second.Started("j")
			if err != nil {
				t.Fatal(err)
			}
			if rec.Started != tc.claimed {
				t.Fatalf("Started = %v after a cut at %s, want %v", rec.Started, tc.step, tc.claimed)
			}
			if rec.Started {
				// A supervisor that takes longer than a start's time to
				// record the job is not lost while it lives.
				second.cfg.StartTimeout = time.Nanosecond
				if err := second.Reattach("j"); err != nil {
					t.Fatal(err)
				}
			} else {
				// Not taken: the node starts it again. Its supervisor
				// claims it; the cut one, resumed later, leaves it.
				if err := second.Start(context.Background(), Spec{JobID: "j", Argv: argv}); err != nil {
					t.Fatalf("Start after a cut before the claim: %v", err)
				}
			}
			if rec.Started && !tc.resumeFirst {
				time.Sleep(5 * time.Millisecond) // past the (nanosecond) start timeout
				second.poll(context.Background())
				select {
				case x := <-second.Exits():
					t.Fatalf("exit %+v reported while the job's supervisor is paused at %s", x, tc.step)
				default:
				}
			}
			if tc.kill {
				if err := second.Kill("j"); err != nil {
					t.Fatal(err)
				}
			}
			if err := supervisortest.Resume(jobDir); err != nil {
				t.Fatal(err)
			}
			run(t, second)
			x := waitExit(t, second)
			runs := countRuns(t, marker)
			switch {
			case x.Lost:
				t.Fatalf("job lost: %+v", x)
			case tc.kill && (!x.Killed || x.Cause != CauseRequest):
				t.Fatalf("exit = %+v, want killed on request", x)
			case !tc.kill && (x.ExitCode != 0 || x.Killed):
				t.Fatalf("exit = %+v, want 0", x)
			case !tc.kill && runs != 1:
				t.Fatalf("job ran %d times, want 1", runs)
			case runs > 1:
				t.Fatalf("job ran %d times", runs)
			}
		})
	}
}

// waitClaimed waits until a supervisor has claimed the job of dir.
func waitClaimed(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !claimed(dir); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no supervisor claimed %s", dir)
		}
	}
}

// TestProcessStartTimeoutLeavesNoJob: a supervisor that does not report
// within the start timeout (paused at each step of its start; on a slow
// machine the timeout may come before the step) is told to end. The job
// failed to start, so it must not run on: once the supervisor goes on, it
// leaves the job unclaimed, or does not start it, or ends it, and records
// that. Before, it was SIGKILLed: a job it had started, and not yet
// recorded, ran on unwatched, and a claim stayed without an exit record.
func TestProcessStartTimeoutLeavesNoJob(t *testing.T) {
	for _, step := range []SupervisorStep{StepBeforeClaim, StepClaimed, StepJobStarted, StepRecorded} {
		t.Run(string(step), func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker")
			p := newProcess(t, dir, time.Second)
			p.cfg.StartTimeout = time.Second // the paused supervisor never reports in time
			p.cfg.SupervisorEnv = append(p.cfg.SupervisorEnv, supervisortest.PauseEnv+"="+string(step))
			jobDir := p.JobDir("j")
			err := p.Start(context.Background(), Spec{JobID: "j", Argv: sh("echo ran >> " + marker + "; exec sleep 60")})
			if !errors.Is(err, ErrStartFailed) {
				t.Fatalf("Start = %v, want ErrStartFailed", err)
			}
			// Run does not run: the supervisor stays to be reaped (a zombie
			// is not alive); none queued, it was reaped already.
			pid := 0
			p.mu.Lock()
			if n := len(p.reapQ); n > 0 {
				pid = p.reapQ[n-1]
			}
			p.mu.Unlock()
			if err := supervisortest.Resume(jobDir); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); alive(pid, 0); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the supervisor did not end")
				}
			}
			var sup supervisorState
			haveSup := readJSON(filepath.Join(jobDir, supervisorFile), &sup) == nil
			var ex exitState
			exErr := readJSON(filepath.Join(jobDir, exitFile), &ex)
			// (A signal reaches a Go program's channel a moment after it
			// was sent: the supervisor may get past the next step first.)
			switch claimed := claimed(jobDir); {
			case !claimed && countRuns(t, marker) != 0:
				t.Fatal("the job ran, unclaimed")
			case claimed && exErr != nil:
				t.Fatalf("claimed, and no exit record: %v", exErr)
			case claimed && (!ex.Killed || ex.Cause != CauseRequest):
				t.Fatalf("exit record %+v, want killed on request", ex)
			case haveSup && sup.PGID > 0 && syscall.Kill(-sup.PGID, 0) == nil:
				t.Fatalf("the job's process group %d runs on", sup.PGID)
			}
			// A job whose start failed is not followed: no Exit.
			select {
			case x := <-p.Exits():
				t.Fatalf("exit %+v for a job that failed to start", x)
			default:
			}
		})
	}
}

// TestProcessJobDiesWithItsSupervisor: a supervisor killed with SIGKILL
// after it started the job and before it recorded the job's process group
// (supervisor.json) takes the job's process with it: nothing could find
// that process to stop it. Before, it ran on unrecorded.
func TestProcessJobDiesWithItsSupervisor(t *testing.T) {
	if runtime.GOOS != "linux" {
		// pdeath_other.go: the signal is Linux's (PR_SET_PDEATHSIG).
		t.Skip("no parent-death signal without Linux")
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	p := newProcess(t, dir, time.Second)
	p.cfg.SupervisorEnv = append(p.cfg.SupervisorEnv, supervisortest.PauseEnv+"="+string(StepJobStarted))
	jobDir := p.JobDir("j")
	errc := make(chan error, 1)
	go func() {
		errc <- p.Start(context.Background(), Spec{JobID: "j", Argv: sh("echo $$ >> " + marker + "; exec sleep 60")})
	}()
	if err := supervisortest.WaitPaused(jobDir, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { supervisortest.Resume(jobDir) }) //nolint:errcheck // a failed test's leftover
	var jobPID int
	for deadline := time.Now().Add(10 * time.Second); jobPID == 0; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(marker)
		if f := strings.Fields(string(b)); len(f) > 0 {
			jobPID, _ = strconv.Atoi(f[0])
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not start")
		}
	}
	supPID := supervisortest.PausedPID(jobDir)
	if supPID == 0 {
		t.Fatal("no pid of the paused supervisor")
	}
	if err := syscall.Kill(supPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrStartFailed) {
		t.Fatalf("Start = %v, want ErrStartFailed (the supervisor died)", err)
	}
	for deadline := time.Now().Add(10 * time.Second); alive(jobPID, 0); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(jobPID, syscall.SIGKILL)
			t.Fatalf("the job's process %d runs on after its supervisor died", jobPID)
		}
	}
}
