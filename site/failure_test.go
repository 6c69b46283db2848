package site

import (
	"slices"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// TestNodeDownRestartsAJobThatStillFits: a failure under a running job
// stops it; with processors left and no deadline it is placed again and
// starts anew, from the failure, as the single-site replay restarts it.
func TestNodeDownRestartsAJobThatStillFits(t *testing.T) {
	f := newFed(t, Config{Name: "a", Procs: 4, Policy: plan.Conservative})
	f.submit("a", 1, 2, 100)
	f.now = 10
	f.agents["a"].NodeDown(f.now, 0) // processor 0 runs job 1
	f.drain("a")
	d, ok := f.find(DecideFailed, JobKey{"a", 1})
	if !ok || !d.Placement.OK() || d.Placement.Start != 10 {
		t.Fatalf("job 1 after the failure: %+v (found %v), want placed again from 10", d, ok)
	}
	delete(f.starts, JobKey{"a", 1})
	f.settle()
	if f.starts[JobKey{"a", 1}] != "a" {
		t.Fatal("job 1 did not start again")
	}
	if got := f.agents["a"].Down(); got != 1 {
		t.Fatalf("%d processors down, want 1", got)
	}
	if !f.agents["a"].NodeUp(f.now) || f.agents["a"].Down() != 0 || f.agents["a"].NodeUp(f.now) {
		t.Fatal("NodeUp does not bring the one failed processor back")
	}
}

// TestNodeDownLosesADelegatedJob: a job delegated to a peer that a failure
// hits and that no longer fits there (its two processors, one of them
// down until repaired) is lost: the peer says so, and the origin learns
// from the report that it did not complete.
func TestNodeDownLosesADelegatedJob(t *testing.T) {
	f := newFed(t, Config{Name: "small", Procs: 2, Policy: plan.Conservative, Transfer: delegation.ACF},
		Config{Name: "big", Procs: 2, Policy: plan.Conservative, Transfer: delegation.ACF})
	f.submit("small", 1, 2, 1000) // starts at home
	f.submit("small", 2, 2, 1000) // cannot start at home: big takes it
	if f.starts[JobKey{"small", 2}] != "big" {
		t.Fatalf("job 2 started at %q, want big", f.starts[JobKey{"small", 2}])
	}
	f.now = 50
	f.agents["big"].NodeDown(f.now, 1)
	f.drain("big")
	f.settle()
	if d, ok := f.find(DecideFailed, JobKey{"small", 2}); !ok || d.Placement.OK() {
		t.Fatalf("big after the failure: %+v (found %v), want job 2 lost", d, ok)
	}
	d, ok := f.find(DecideOutcome, JobKey{"small", 2})
	if !ok || d.Outcome.Completed || d.Outcome.End != 50 || d.Peer != "big" {
		t.Fatalf("the origin's outcome of job 2: %+v (found %v), want not completed at 50", d, ok)
	}
	if f.agents["big"].End(60, JobKey{"small", 2}, true) {
		t.Fatal("big still runs the lost job")
	}
}

// TestNodeDownDecidesItsMoves: the waiting reservations a failure moves
// are decided in the failure's batch (DecideMove, with TrackMoves), not
// at the next pass: a driver that persists the batch and restarts before
// that pass restores the plan the agent had.
func TestNodeDownDecidesItsMoves(t *testing.T) {
	cfg := Config{Name: "s", Procs: 4, Policy: plan.Conservative, TrackMoves: true}
	a, _ := New(cfg)
	x := &journaled{t: t, a: a, j: NewJournal()}
	a.Submit(0, 1, plan.Job{Procs: 1, Estimate: 1000, Deadline: plan.Forever})
	a.Submit(0, 2, plan.Job{Procs: 2, Estimate: 100, Deadline: plan.Forever})
	a.Submit(0, 3, plan.Job{Procs: 3, Estimate: 100, Deadline: plan.Forever}) // waits for job 2: 100..200
	a.Tick(0)
	x.flush(0)
	a.NodeDown(10, 1) // job 2's processor: job 3 no longer fits at 100 and moves after job 1; job 2 goes again at 10
	x.flush(10)
	want, _ := a.Site().Placement(3)
	if want.Start != 1000 {
		t.Fatalf("job 3 placed at %d after the failure, want 1000 (the test's premise)", want.Start)
	}
	if got := x.j.Saved().Jobs[JobKey{"s", 3}].Placement; got.Start != want.Start || got.End != want.End {
		t.Fatalf("the failure's batch leaves job 3 at [%d, %d), the agent placed it at [%d, %d)", got.Start, got.End, want.Start, want.End)
	}
	b, err := Restore(cfg, 10, x.j.Saved())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Site().Placement(3); got.Start != want.Start {
		t.Fatalf("restored job 3 at %d, want %d", got.Start, want.Start)
	}
}

// TestNodeDownReportsAWaitingJobLost: a peer's job lost while it waited
// (it never started) is reported as ending when it was lost, having run
// for no time, not as running since time 0: the origin learns its
// history from the report (ObserveOutcome).
func TestNodeDownReportsAWaitingJobLost(t *testing.T) {
	a, _ := New(Config{Name: "p", Procs: 2, Policy: plan.Conservative})
	a.Submit(0, 1, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
	a.Tick(0)
	key := JobKey{"o", 1}
	a.Step(10, Message{Kind: KindQuoteRequest, From: "o", To: "p", Job: key, Spec: plan.Job{Procs: 2, Estimate: 500, Deadline: plan.Forever},
		Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted, At: 10}}})
	a.Step(10, agreeTo(a, "o", key))
	a.Tick(10)
	a.Ready()
	a.NodeDown(100, 0) // two processors needed, one left: both jobs are lost
	r := a.Ready()
	i := slices.IndexFunc(r.Messages, func(m Message) bool { return m.Kind == KindReport && m.Job == key })
	if i < 0 {
		t.Fatalf("no report of the lost job: %+v", r.Messages)
	}
	if o := r.Messages[i].Outcome; o.Start != 100 || o.End != 100 || o.Completed {
		t.Fatalf("the lost job's report: %+v, want it never ran (start and end 100)", o)
	}
}
