package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/executor/slurmtest"
	"github.com/fedsched/fedsched/node/executor/supervisortest"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestStopDuringStartSlurm: `fedsched node --executor slurm` is stopped with
// SIGTERM, or killed with SIGKILL, while the sbatch of the job it starts is
// paused (the real sbatch, see slurmtest.PausingSbatch) before it reached
// slurmctld, or after slurmctld queued the job and before sbatch answered.
// The node is restarted (with the plain sbatch) and the paused one let go
// on. The job is submitted to Slurm exactly once, runs once and COMPLETES.
// Before the fix, SIGTERM killed sbatch: before the submission the job was
// lost (the restart found no Slurm job and refused to submit it), after it
// the job was cancelled (the failed start cancelled what it had queued);
// SIGKILL before the submission lost the job too.
func TestStopDuringStartSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real nodes in front of Slurm")
	}
	slurmtest.Require(t)
	for _, point := range []string{slurmtest.BeforeSubmit, slurmtest.AfterSubmit} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			t.Run(fmt.Sprintf("%s/%s", point, strings.ToLower(sig.String()[:4])), func(t *testing.T) {
				stopDuringSlurmStart(t, point, sig)
			})
		}
	}
}

func stopDuringSlurmStart(t *testing.T, point string, sig syscall.Signal) {
	wrapper := slurmtest.PausingSbatch(t, point)
	r := newCutRun(t, "slurm", []string{"--slurm-poll-interval", "200ms"}, []string{"PATH=" + wrapper + ":" + os.Getenv("PATH")})

	n := r.startNode()
	addr := n.waitReady()
	if addr == "" {
		t.Fatal("the node did not become ready")
	}
	c := dial(t, addr)
	// Slurm takes up to its scheduling interval (1 s) to start the job:
	// a slot of a minute, not the crash tests' 1-2 s, which it could
	// overrun.
	spec := r.jobSpec(r.rng, "cut")
	spec.EstimateSeconds = 60
	resp, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{IdempotencyKey: "cut", Spec: spec})
	c.conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetJob().GetId()
	r.led.submits["cut"], r.led.acked = id, 1
	// The node starts the job at once; its sbatch pauses at point.
	jobDir := waitPausedJob(t, r.dir, id)
	t.Cleanup(func() {
		supervisortest.Resume(jobDir) //nolint:errcheck // a failed test's leftover
		for _, sid := range slurmJobsOf(t, jobDir, id) {
			exec.Command("scancel", sid).Run() //nolint:errcheck // a failed test's leftover
		}
	})
	sbatch := supervisortest.PausedPID(jobDir)
	n.cmd.Process.Signal(sig) //nolint:errcheck // checked by its exit
	if sig == syscall.SIGTERM {
		// The stopping node waits for the submission in flight: let it go
		// on (a sbatch bound to the stop would be killed meanwhile).
		time.Sleep(500 * time.Millisecond)
		if err := supervisortest.Resume(jobDir); err != nil {
			t.Fatal(err)
		}
	}
	<-n.exited
	if sig == syscall.SIGTERM {
		if code := n.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("the node stopped with status %d, want 0", code)
		}
	} else if !slurmtest.ProcessGone(sbatch, 5*time.Second) {
		// sbatch dies with the node that ran it (else it could queue the
		// job after the next node did).
		t.Errorf("sbatch (pid %d) runs on after its node was killed", sbatch)
	}

	// A cut sbatch still alive would submit the job now, a second time.
	r.completesOnce(jobDir, id)
	slurmtest.ProcessGone(sbatch, 5*time.Second) // the first node's sbatch has had its chance
	if sids := slurmJobsOf(t, jobDir, id); len(sids) != 1 {
		t.Errorf("job %s was submitted to Slurm %d times (%v), want once", id, len(sids), sids)
	}
}

// slurmJobsOf lists the Slurm jobs of fedsched job id of the store whose
// job directory is jobDir: named id, with the comment naming the store's
// epoch (other tests' stores have jobs of the same id).
func slurmJobsOf(t *testing.T, jobDir, id string) []string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "-t", "all", "-n", id, "-o", "%i|%k").Output()
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	want := "fedsched:" + filepath.Base(filepath.Dir(jobDir)) + "/" + id
	var sids []string
	for l := range strings.Lines(string(out)) {
		if sid, comment, ok := strings.Cut(strings.TrimSpace(l), "|"); ok && comment == want {
			sids = append(sids, sid)
		}
	}
	return sids
}
