package site

import (
	"slices"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// kinds lists the decisions the log holds for key, in order.
func (f *fed) kinds(key JobKey) []DecisionKind {
	var out []DecisionKind
	for _, d := range f.log {
		if d.Job == key {
			out = append(out, d.Kind)
		}
	}
	return out
}

// step delivers the queued messages one at a time while keep says so,
// without ticking; it reports how many it delivered.
func (f *fed) step(keep func(Message) bool) int {
	n := 0
	for len(f.queue) > 0 && keep(f.queue[0]) {
		m := f.queue[0]
		f.queue = f.queue[1:]
		f.agents[m.To].Step(f.now, m)
		f.drain(m.To)
		n++
	}
	return n
}

// holds counts the holds every agent's plan keeps.
func (f *fed) holds() int {
	n := 0
	for _, a := range f.agents {
		n += a.Site().Holds()
	}
	return n
}

func (f *fed) cancel(site string, key JobKey) bool {
	ok := f.agents[site].Cancel(f.now, key)
	f.drain(site)
	f.settle()
	return ok
}

func (f *fed) end(site string, key JobKey, completed bool) {
	if !f.agents[site].End(f.now, key, completed) {
		f.t.Fatalf("%s does not run %v", site, key)
	}
	f.drain(site)
	f.settle()
}

// acfPair is an origin (2 processors, full with job 1) and a 16-processor
// peer, both ACF: a second job of the origin goes to the peer.
func acfPair(t *testing.T) *fed {
	f := newFed(t, Config{Name: "small", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF},
		Config{Name: "big", Procs: 16, Policy: plan.EASY, Transfer: delegation.ACF},
		Config{Name: "mid", Procs: 8, Policy: plan.EASY, Transfer: delegation.ACF})
	f.submit("small", 1, 2, 1000)
	return f
}

// TestCancel: a user's cancel of a job at its origin, in every state the
// job can be in there, decides what the node does (ops.go cancel,
// federation.go cancelDelegated and terminateOp).
func TestCancel(t *testing.T) {
	job2 := JobKey{"small", 2}
	for _, tc := range []struct {
		name string
		// run brings job 2 into the state to test and cancels it.
		run func(t *testing.T, f *fed)
		// origin and peer are the decisions each side made for job 2.
		origin, peer []DecisionKind
	}{
		{
			name: "waiting",
			run: func(t *testing.T, f *fed) {
				f.agents["small"].cfg.Peers = nil // alone: it waits at home
				f.submit("small", 2, 2, 1000)
				if f.agents["small"].Site().Waiting() != 1 || !f.cancel("small", job2) {
					t.Fatal("job 2 does not wait, or the cancel failed")
				}
				if f.agents["small"].Site().Waiting() != 0 {
					t.Fatal("a cancelled job still waits")
				}
			},
			origin: []DecisionKind{DecideAccept, DecideCancel},
		},
		{
			name: "running",
			run: func(t *testing.T, f *fed) {
				if !f.cancel("small", JobKey{"small", 1}) {
					t.Fatal("cancel failed")
				}
				// It keeps its processors until it has stopped.
				if a := f.agents["small"]; a.Site().Running() != 1 || a.Site().Plan().Free(f.now) != 0 {
					t.Fatal("a cancelled running job let go of its processors before its end")
				}
				f.now = 5
				f.end("small", JobKey{"small", 1}, false)
				if got := f.kinds(JobKey{"small", 1}); !slices.Equal(got, []DecisionKind{DecideAccept, DecideStart, DecideCancel, DecideKill, DecideEnd}) {
					t.Fatalf("job 1: %v", got)
				}
				if d, _ := f.find(DecideEnd, JobKey{"small", 1}); !d.Outcome.Cancelled || d.Outcome.Start != 0 || d.Outcome.End != 5 {
					t.Fatalf("end of job 1: %+v", d.Outcome)
				}
				if free := f.agents["small"].Site().Plan().Free(f.now); free != 2 {
					t.Fatalf("%d processors free after the end, want 2", free)
				}
			},
		},
		{
			name: "asking, no answer yet",
			run: func(t *testing.T, f *fed) {
				f.agents["small"].Submit(f.now, 2, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
				f.drain("small")
				// The peers hold a slot each; their quotes are on the way.
				f.step(func(m Message) bool { return m.Kind == KindQuoteRequest })
				if f.holds() != 2 {
					t.Fatalf("%d holds, want 2", f.holds())
				}
				if !f.cancel("small", job2) {
					t.Fatal("cancel failed")
				}
			},
			origin: []DecisionKind{DecideOffer, DecideCancel},
		},
		{
			name: "asking, one offer in",
			run: func(t *testing.T, f *fed) {
				f.agents["small"].Submit(f.now, 2, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
				f.drain("small")
				f.step(func(m Message) bool { return m.Kind == KindQuoteRequest })
				f.step(func(m Message) bool { return m.Kind == KindQuote && m.From == "big" })
				if !f.cancel("small", job2) {
					t.Fatal("cancel failed")
				}
			},
			origin: []DecisionKind{DecideOffer, DecideCancel},
		},
		{
			name: "agreeing, the peer takes it",
			run: func(t *testing.T, f *fed) {
				f.agents["small"].Submit(f.now, 2, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
				f.drain("small")
				f.step(func(m Message) bool { return m.Kind != KindAgreed })
				if !f.cancel("small", job2) {
					t.Fatal("cancel failed")
				}
				// The peer took the job; the Terminate reaches it before
				// its pass starts it.
				if d, _ := f.find(DecideOutcome, job2); !d.Outcome.Cancelled || d.Outcome.Completed {
					t.Fatalf("outcome: %+v", d.Outcome)
				}
			},
			// The peer's report comes before its acknowledgement of
			// the Terminate, and settles the job at the origin.
			origin: []DecisionKind{DecideOffer, DecideAgree, DecideCancel, DecideTerminate, DecideOutcome},
			peer:   []DecisionKind{DecideAccept, DecideCancel, DecideReport, DecideAcked},
		},
		{
			name: "agreeing, the peer refuses",
			run: func(t *testing.T, f *fed) {
				f.agents["small"].Submit(f.now, 2, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
				f.drain("small")
				f.step(func(m Message) bool { return m.Kind != KindAgree })
				// The hold is gone when the agree comes (released).
				big := f.agents["big"]
				big.Step(f.now, Message{Kind: KindRelease, From: "small", To: "big", Job: job2})
				if !f.cancel("small", job2) {
					t.Fatal("cancel failed")
				}
			},
			origin: []DecisionKind{DecideOffer, DecideAgree, DecideCancel, DecideAcked},
		},
		{
			name: "delegated, running at the peer",
			run: func(t *testing.T, f *fed) {
				f.submit("small", 2, 2, 1000)
				if f.starts[job2] != "big" {
					t.Fatalf("job 2 started at %q", f.starts[job2])
				}
				f.now = 3
				if !f.cancel("small", job2) {
					t.Fatal("cancel failed")
				}
				f.now = 4
				f.end("big", job2, true) // it ended by itself before the kill
				if d, _ := f.find(DecideOutcome, job2); !d.Outcome.Cancelled || d.Outcome.End != 4 {
					t.Fatalf("outcome: %+v", d.Outcome)
				}
				if h := f.agents["small"].History()["big"]; h.Jobs != 0 {
					t.Fatalf("the origin learnt from a job it cancelled: %+v", h)
				}
			},
			origin: []DecisionKind{DecideOffer, DecideAgree, DecideDelegate, DecideCancel, DecideTerminate, DecideAcked, DecideOutcome},
			peer:   []DecisionKind{DecideAccept, DecideStart, DecideCancel, DecideKill, DecideEnd, DecideReport, DecideAcked},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := acfPair(t)
			tc.run(t, f)
			f.settle()
			var origin, peer []DecisionKind
			for _, d := range f.log {
				if d.Job != job2 {
					continue
				}
				if d.Kind == DecideAccept && d.Peer == "" || d.Kind == DecideStart && f.starts[job2] == "small" ||
					d.Kind == DecideOffer || d.Kind == DecideAgree || d.Kind == DecideDelegate || d.Kind == DecideTerminate || d.Kind == DecideOutcome ||
					(d.Kind == DecideCancel && d.Peer == "") || (d.Kind == DecideAcked && d.Peer != "small") {
					origin = append(origin, d.Kind)
				} else {
					peer = append(peer, d.Kind)
				}
			}
			if !slices.Equal(origin, tc.origin) || !slices.Equal(peer, tc.peer) {
				t.Errorf("origin decided %v, want %v; peers decided %v, want %v", origin, tc.origin, peer, tc.peer)
			}
			if f.holds() != 0 {
				t.Errorf("%d holds left", f.holds())
			}
			for n, a := range f.agents {
				if a.Busy() && n != "small" {
					t.Errorf("%s is still busy: %d jobs, %d owed", n, len(a.jobs), len(a.owed))
				}
				if _, ok := a.jobs[job2]; ok {
					t.Errorf("%s still keeps job 2", n)
				}
			}
		})
	}
}

// TestCancelledRunningJobIsCensored: the statistics learn from a job
// cancelled while it ran only that it needed more than it ran, even when
// its process exited by itself before the kill (the node's learn with
// cut).
func TestCancelledRunningJobIsCensored(t *testing.T) {
	for _, completed := range []bool{false, true} {
		a, err := New(Config{Name: "a", Procs: 4, Policy: plan.Conservative, Overbooking: &Overbooking{}})
		if err != nil {
			t.Fatal(err)
		}
		pj := plan.Job{Procs: 1, Estimate: 1000, Deadline: plan.Forever}
		a.Submit(0, 1, pj)
		a.Tick(0)
		a.Cancel(0, JobKey{"a", 1})
		a.Ready()
		a.End(100, JobKey{"a", 1}, completed)
		if r := a.Ready(); !r.Learnt {
			t.Fatal("the batch of the end does not say the statistics learnt")
		}
		h := a.Stats().Histogram(overbook.JobInfo{Procs: 1, Estimate: 1000})
		if h.N() != 1 || h.CensoredWeight(10) != 1 {
			t.Fatalf("completed=%v: %v samples, %v censored at 10%%; want one censored", completed, h.N(), h.CensoredWeight(10))
		}
	}
}

// TestTerminate: the executing side stops a job only for its origin; a
// Terminate for a job it no longer has is acknowledged all the same, and
// an unacknowledged one is resent.
func TestTerminate(t *testing.T) {
	f := acfPair(t)
	job2 := JobKey{"small", 2}
	f.submit("small", 2, 2, 1000)
	big := f.agents["big"]
	big.Step(f.now, Message{Kind: KindTerminate, From: "mid", To: "big", Job: job2})
	r := big.Ready()
	if len(r.Decisions) != 0 || len(r.Messages) != 1 || r.Messages[0].Kind != KindTerminated {
		t.Fatalf("a Terminate from a site that is not the origin: %+v", r)
	}
	if f.agents["small"].Cancel(f.now, JobKey{"small", 99}) || big.Cancel(f.now, JobKey{"x", 1}) {
		t.Fatal("cancel of an unknown job succeeded")
	}
	dropped := 0
	f.drop = func(m Message) bool {
		if m.Kind == KindTerminate && dropped == 0 {
			dropped++
			return true
		}
		return false
	}
	f.now = 10
	f.cancel("small", job2)
	if dropped != 1 || len(f.agents["small"].owed) != 1 {
		t.Fatalf("dropped %d, owed %d", dropped, len(f.agents["small"].owed))
	}
	if w := f.agents["small"].NextWake(f.now); w != 70 {
		t.Fatalf("next wake %d, want the resend at 70", w)
	}
	f.now = 70
	f.settle()
	if got := f.kinds(job2); !slices.Contains(got, DecideKill) {
		t.Fatalf("the resent Terminate did not stop the job: %v", got)
	}
	// Cancelling again changes nothing.
	if !f.agents["small"].Cancel(f.now, job2) || len(f.agents["small"].Ready().Decisions) != 0 {
		t.Fatal("a second cancel decided something")
	}
	f.end("big", job2, false)
	// The job's Terminate came after its end: still acknowledged.
	big.Step(f.now, Message{Kind: KindTerminate, From: "small", To: "big", Job: job2})
	if r := big.Ready(); len(r.Messages) != 1 || r.Messages[0].Kind != KindTerminated || len(r.Decisions) != 0 {
		t.Fatalf("a late Terminate: %+v", r)
	}
}
