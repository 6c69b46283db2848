package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/executor/supervisortest"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestStopDuringStartProcess: `fedsched node` (process executor) is stopped
// with SIGTERM, or killed with SIGKILL, while the supervisor of the job it
// is starting is paused at each step of its start (before its claim, after
// it, after the job's process started, after supervisor.json). The node is
// restarted without pauses and the supervisor let go on. Every job then
// runs exactly once and COMPLETES: none is FAILED (lost on restart, or
// failed to start), none runs twice, no supervisor is left without an exit
// record. Before the fix, SIGTERM from the claim on lost the job: the
// stopping node SIGKILLed the supervisor and the next one found it gone.
func TestStopDuringStartProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real nodes and supervisors")
	}
	for _, step := range []executor.SupervisorStep{executor.StepBeforeClaim, executor.StepClaimed, executor.StepJobStarted, executor.StepRecorded} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			t.Run(fmt.Sprintf("%s/%s", step, strings.ToLower(sig.String()[:4])), func(t *testing.T) {
				stopDuringStart(t, step, sig)
			})
		}
	}
}

func stopDuringStart(t *testing.T, step executor.SupervisorStep, sig syscall.Signal) {
	r := newCutRun(t, "process", nil, []string{supervisortest.PauseEnv + "=" + string(step)})

	n := r.startNode()
	addr := n.waitReady()
	if addr == "" {
		t.Fatal("the node did not become ready")
	}
	c := dial(t, addr)
	r.submit(context.Background(), c, r.rng, "cut")
	c.conn.Close()
	id := r.led.submits["cut"]
	if id == "" {
		t.Fatal("the submission was not acknowledged")
	}
	// The node starts the job at once; its supervisor pauses at step.
	jobDir := waitPausedJob(t, r.dir, id)
	t.Cleanup(func() { supervisortest.Resume(jobDir) }) //nolint:errcheck // a failed test's leftover
	n.cmd.Process.Signal(sig)                           //nolint:errcheck // checked by its exit
	<-n.exited
	if sig == syscall.SIGTERM {
		if code := n.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("the node stopped with status %d, want 0", code)
		}
		// The stop cut the start short (and nothing else failed it).
		b, err := os.ReadFile(r.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "job start cut short: the node is stopping") {
			t.Fatal("the node did not log the start it cut short")
		}
	}

	r.completesOnce(jobDir, id)
}

// newCutRun is a crashRun of one job whose start is cut: a node with the
// given executor, extra flags and environment, killed when the test ends,
// its log shown when the test fails.
func newCutRun(t *testing.T, executor string, extra, env []string) *crashRun {
	dir := t.TempDir()
	r := &crashRun{t: t, executor: executor, dir: filepath.Join(dir, "data"), markers: filepath.Join(dir, "markers"),
		logPath: filepath.Join(dir, "node.log"), rng: rand.New(rand.NewPCG(1, 2)),
		led:   ledger{submits: map[string]string{}, reserves: map[string]bool{}, cancels: map[string]bool{}},
		seen:  map[string]*fedschedv1.Job{},
		extra: extra, env: env}
	if err := os.MkdirAll(r.markers, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.current != nil {
			r.current.kill()
		}
		if t.Failed() {
			if b, err := os.ReadFile(r.logPath); err == nil {
				t.Logf("the nodes' log:\n%s", b)
			}
		}
	})
	return r
}

// completesOnce restarts the node without pauses, lets the paused start
// in jobDir go on, and checks that job id COMPLETES, that every job
// ended consistently, and that id ran exactly once.
func (r *crashRun) completesOnce(jobDir, id string) {
	t := r.t
	t.Helper()
	r.env = nil
	n := r.startNode()
	defer n.kill()
	addr := n.waitReady()
	if addr == "" {
		t.Fatal("the node did not become ready after the restart")
	}
	c := dial(t, addr)
	defer c.conn.Close()
	// A cut start still in flight (a supervisor, or a sbatch) goes on now.
	if err := supervisortest.Resume(jobDir); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := c.GetJob(context.Background(), &fedschedv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		if j := resp.GetJob(); terminalState(j.GetState()) {
			if j.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED {
				t.Fatalf("job %s is %v (%v: %s), want COMPLETED", id, j.GetState(), j.GetReason(), j.GetMessage())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never ended", id)
		}
	}
	r.waitAllEnded(c)
	r.check(c, 1)
	r.checkMarkers()
	if b, err := os.ReadFile(filepath.Join(r.markers, "cut")); err != nil || strings.Count(string(b), id) != 1 {
		t.Errorf("job %s ran %d times, want once (%v)", id, strings.Count(string(b), id), err)
	}
}

// waitPausedJob returns the directory of job id once its supervisor has
// paused there.
func waitPausedJob(t *testing.T, dataDir, id string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if dirs, _ := filepath.Glob(filepath.Join(dataDir, "jobs", "*", id)); len(dirs) == 1 {
			if err := supervisortest.WaitPaused(dirs[0], 0); err == nil {
				return dirs[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor of job %s did not pause", id)
		}
	}
}
