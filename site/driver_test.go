package site

import (
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// TestFailLearnsNothing: a job that failed (its process lost, say) tells
// the statistics nothing; the origin's report says it failed.
func TestFailLearnsNothing(t *testing.T) {
	a, err := New(Config{Name: "p", Procs: 4, Policy: plan.Conservative, Overbooking: &Overbooking{}})
	if err != nil {
		t.Fatal(err)
	}
	key := JobKey{"o", 1}
	a.Step(0, Message{Kind: KindQuoteRequest, From: "o", To: "p", Job: key, Spec: plan.Job{Procs: 1, Estimate: 1000, Deadline: plan.Forever},
		Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}})
	a.Step(0, agreeTo(a, "o", key))
	a.Tick(0)
	a.Ready()
	if a.Fail(100, JobKey{"o", 2}) || !a.Fail(100, key) || a.End(100, key, true) {
		t.Fatal("Fail or End of the wrong job")
	}
	r := a.Ready()
	if r.Learnt || a.Stats().Updates() != 0 {
		t.Fatalf("a failed job was learnt from (learnt %v, %d updates)", r.Learnt, a.Stats().Updates())
	}
	if len(r.Messages) != 1 || r.Messages[0].Kind != KindReport || !r.Messages[0].Outcome.Failed || r.Messages[0].Outcome.Completed {
		t.Fatalf("the report: %+v", r.Messages)
	}
}

// TestGiveUp: a driver gives up on a peer: nothing is resent, a
// delegated job is forgotten, and a restart does not bring either back.
func TestGiveUp(t *testing.T) {
	f := acfPair(t)
	f.submit("small", 2, 2, 1000) // runs at big
	job2 := JobKey{"small", 2}
	f.drop = func(m Message) bool { return m.Kind == KindReport }
	f.now = 10
	f.end("big", job2, true) // its report is lost
	big, small := f.agents["big"], f.agents["small"]
	if small.GiveUp(f.now, JobKey{"small", 99}) {
		t.Fatal("gave up on nothing")
	}
	for _, a := range []*Agent{big, small} {
		j := NewJournal()
		if !a.GiveUp(f.now, job2) || a.GiveUp(f.now, job2) {
			t.Fatalf("%s: GiveUp did not give up once", a.Name())
		}
		r := a.Ready()
		if len(r.Decisions) != 1 || r.Decisions[0].Kind != DecideGaveUp || r.Decisions[0].Peer == "" {
			t.Fatalf("%s: %+v", a.Name(), r.Decisions)
		}
		if a.jobs[job2] != nil || a.owed[job2] != nil {
			t.Fatalf("%s still keeps job 2", a.Name())
		}
		j.s.Jobs[job2] = &SavedJob{Key: job2, Phase: PhaseDelegated, Peer: "big"}
		j.s.Reports[job2] = OwedReport{}
		if err := j.Record(a, r, f.now); err != nil {
			t.Fatal(err)
		}
		if s := j.Saved(); len(s.Jobs) != 0 || len(s.Reports) != 0 {
			t.Fatalf("%s: the journal keeps %v and %v", a.Name(), s.Jobs, s.Reports)
		}
	}
	f.now = 1000
	f.settle()
	if len(f.queue) != 0 {
		t.Fatal("something was resent")
	}
}

// TestGiveUpAgreeing: an origin whose agree goes unanswered (the peer
// died after it quoted, or the taker after it asked to take a job) asks
// again every reply period until its driver gives up on the peer (a
// node's outbox_give_up); then nothing more is sent, the job is forgotten
// with its outcome unknown (it may have run at the peer: it is not placed
// at the origin), and a restart does not bring it back.
func TestGiveUpAgreeing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fed      func(t *testing.T) (*fed, JobKey, string, string)
		handOver bool
	}{
		{name: "quote", fed: func(t *testing.T) (*fed, JobKey, string, string) {
			f := acfPair(t)
			f.drop = func(m Message) bool { return m.Kind == KindAgree } // the peer is gone
			f.submit("small", 2, 2, 1000)
			return f, JobKey{"small", 2}, "small", "big"
		}},
		{name: "hand-over", handOver: true, fed: func(t *testing.T) (*fed, JobKey, string, string) {
			return rqfPair(t, func(m Message) bool { return m.Kind == KindAgree }), JobKey{"o", 2}, "o", "t"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, key, origin, peer := tc.fed(t)
			a := f.agents[origin]
			if d, ok := f.find(DecideAgree, key); !ok || d.Peer != peer || d.HandOver != tc.handOver {
				t.Fatalf("no agree written ahead to %s: %+v", peer, f.log)
			}
			agrees := 0
			f.drop = func(m Message) bool {
				if m.Kind == KindAgree {
					agrees++
				}
				return m.Kind == KindAgree
			}
			for range 3 {
				f.now = a.NextWake(f.now)
				f.settle()
			}
			if agrees != 3 {
				t.Fatalf("%d agrees resent in three reply periods, want 3", agrees)
			}
			j := NewJournal()
			j.s.Jobs[key] = &SavedJob{Key: key, Phase: PhaseAgreeing, Peer: peer, HandOver: tc.handOver, Spec: plan.Job{ID: 2}}
			if !a.GiveUp(f.now, key) || a.GiveUp(f.now, key) {
				t.Fatal("GiveUp did not give up once")
			}
			r := a.Ready()
			if len(r.Decisions) != 1 || r.Decisions[0].Kind != DecideGaveUp || r.Decisions[0].Peer != peer || len(r.Messages) != 0 {
				t.Fatalf("giving up: %+v %+v", r.Decisions, r.Messages)
			}
			if err := j.Record(a, r, f.now); err != nil {
				t.Fatal(err)
			}
			if s := j.Saved(); len(s.Jobs) != 0 {
				t.Fatalf("the journal keeps %v", s.Jobs)
			}
			if a.jobs[key] != nil || len(a.waits) != 0 {
				t.Fatal("the origin keeps the job")
			}
			agrees = 0
			for range 3 {
				f.now += a.cfg.ReplySeconds
				f.settle()
			}
			if agrees != 0 || f.count(DecideStart, key) != 0 {
				t.Fatalf("after giving up: %d agrees sent, %d starts", agrees, f.count(DecideStart, key))
			}
		})
	}
}

// TestNextIDNamesTheJob: a driver that submits under NextID names its
// jobs by the agent's own ids; a peer's job takes an id too.
func TestNextIDNamesTheJob(t *testing.T) {
	a, _ := New(Config{Name: "s", Procs: 4, Policy: plan.EASY})
	for i := range 3 {
		if i == 1 {
			a.Step(0, Message{Kind: KindQuoteRequest, From: "o", To: "s", Job: JobKey{"o", 1}, Spec: plan.Job{Procs: 1, Estimate: 10, Deadline: plan.Forever},
				Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}})
		}
		id := a.NextID()
		a.Submit(0, id, plan.Job{Procs: 1, Estimate: 10, Deadline: plan.Forever})
		for _, d := range a.Ready().Decisions {
			if d.Kind == DecideAccept && d.Spec.ID != d.Job.ID {
				t.Fatalf("job %v has the agent's id %d", d.Job, d.Spec.ID)
			}
		}
	}
}

// TestAcceptCarriesThePeersPrice: the executing site's accept of a peer's
// job carries the price it quoted (a node's ledger needs it).
func TestAcceptCarriesThePeersPrice(t *testing.T) {
	f := newFed(t, Config{Name: "origin", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF},
		Config{Name: "peer", Procs: 8, Policy: plan.EASY, Pricing: delegation.LibraPlus{PBase: 1, Alpha: 1, Beta: 1}})
	f.submit("origin", 1, 2, 900)
	f.agents["origin"].Submit(f.now, 2, plan.Job{Procs: 2, Estimate: 900, Deadline: plan.Forever, Fee: 1e6})
	f.drain("origin")
	f.settle()
	var del, acc Decision
	for _, d := range f.log {
		switch {
		case d.Kind == DecideDelegate && d.Job.ID == 2:
			del = d
		case d.Kind == DecideAccept && d.Job.ID == 2 && d.Peer == "origin":
			acc = d
		}
	}
	if del.Price <= 0 || acc.Price != del.Price {
		t.Fatalf("delegated at %v, accepted at %v", del.Price, acc.Price)
	}
}

// TestLearnOnly: a site that does not overbook still learns its
// statistics (a node does, so that they are ready when it starts to), on
// any policy; it never overbooks. MinSamples is the node's
// overbooking.min_samples.
func TestLearnOnly(t *testing.T) {
	if _, err := New(Config{Name: "s", Procs: 4, Policy: plan.EASY, Overbooking: &Overbooking{}}); err == nil {
		t.Fatal("overbooking accepted on a queue policy")
	}
	if _, err := New(Config{Name: "s", Procs: 4, Policy: plan.Conservative, Overbooking: &Overbooking{MinSamples: -1}}); err == nil {
		t.Fatal("negative min samples accepted")
	}
	// Three samples that ran a tenth of their estimate, then a job with
	// a deadline that only a short gap before a wall meets.
	short := func(o *Overbooking, pol plan.Policy) (*Agent, Ready) {
		a, err := New(Config{Name: "s", Procs: 1, Policy: pol, Overbooking: o, Fixed: []plan.FixedSpec{{ID: -1, Procs: 1, Start: 1000, End: 2000}}})
		if err != nil {
			t.Fatal(err)
		}
		var now int64
		for i := range 3 {
			a.Submit(now, int64(i+1), plan.Job{Procs: 1, Estimate: 100, Release: now, Deadline: plan.Forever})
			a.Tick(now)
			now += 10
			a.End(now, JobKey{"s", int64(i + 1)}, true)
			a.Tick(now)
		}
		a.Ready()
		a.Submit(now, 9, plan.Job{Procs: 1, Estimate: 1000, Release: now, Deadline: 1000})
		return a, a.Ready()
	}
	for _, c := range []struct {
		name       string
		o          *Overbooking
		pol        plan.Policy
		overbooked bool
	}{
		{"learn only, conservative", &Overbooking{LearnOnly: true}, plan.Conservative, false},
		{"learn only, easy", &Overbooking{LearnOnly: true}, plan.EASY, false},
		{"overbooking, too few samples", &Overbooking{}, plan.Conservative, false},
		{"overbooking, min samples 3", &Overbooking{MinSamples: 3}, plan.Conservative, true},
	} {
		a, r := short(c.o, c.pol)
		if a.Stats().Updates() != 3 {
			t.Fatalf("%s: %d samples learnt, want 3", c.name, a.Stats().Updates())
		}
		got := len(r.Decisions) == 1 && r.Decisions[0].Kind == DecideAccept && r.Decisions[0].Placement.Reason == plan.ReasonOverbooked
		if got != c.overbooked {
			t.Fatalf("%s: overbooked %v, want %v: %+v", c.name, got, c.overbooked, r.Decisions)
		}
	}
}

// TestQuoteRefusalKind: a refused quote carries the shared rule's refusal,
// whose kind a node maps to its reason code.
func TestQuoteRefusalKind(t *testing.T) {
	a, _ := New(Config{Name: "p", Procs: 2, Policy: plan.EASY, CommunityShare: 0.5})
	route := delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}
	for _, c := range []struct {
		route delegation.Route
		procs int
		want  RefusalKind
	}{
		{route, 4, RefuseNoPlacement},
		{route, 2, RefuseCommunityShare},
		{append(route, delegation.Hop{Site: "p", Action: delegation.ActionAccepted}), 1, RefuseVisited},
	} {
		a.Step(0, Message{Kind: KindQuoteRequest, From: "o", To: "p", Job: JobKey{"o", 1}, Spec: plan.Job{Procs: c.procs, Estimate: 10, Deadline: plan.Forever}, Route: c.route})
		r := a.Ready()
		if len(r.Messages) != 1 || r.Messages[0].Refusal == nil || r.Messages[0].Refusal.Kind != c.want || r.Messages[0].Reason != r.Messages[0].Refusal.Error() {
			t.Fatalf("%d procs: %+v, want refusal %v", c.procs, r.Messages, c.want)
		}
	}
}
