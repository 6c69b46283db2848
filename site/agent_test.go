package site

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// fed is a test driver: agents that deliver messages at once, in order,
// optionally dropping chosen ones (raft's network test type, in small).
type fed struct {
	t      *testing.T
	agents map[string]*Agent
	order  []string
	now    int64
	queue  []Message
	drop   func(Message) bool
	log    []Decision
	starts map[JobKey]string
}

type view struct {
	f    *fed
	self string
}

func (v view) Candidates(now int64) []delegation.Candidate {
	return peersOf(v.f.agents, v.f.order, v.self, now, func(free, _ int) int { return free })
}

// peersOf is every agent in order but self as a candidate, with its
// outlook at now, each figure passed through round (the exact figure, or
// rounded as gossip rounds it).
func peersOf(agents map[string]*Agent, order []string, self string, now int64, round func(free, procs int) int) []delegation.Candidate {
	var out []delegation.Candidate
	for _, n := range order {
		if n == self {
			continue
		}
		a := agents[n]
		o := a.Site().Outlook(now, 3600, 4*3600, 24*3600)
		p := a.cfg.Procs
		out = append(out, delegation.Candidate{Site: n, Procs: p, FreeNow: round(o[0], p), Free1h: round(o[1], p), Free4h: round(o[2], p), Free24h: round(o[3], p)})
	}
	return out
}

func newFed(t *testing.T, cfgs ...Config) *fed {
	f := &fed{t: t, agents: map[string]*Agent{}, starts: map[JobKey]string{}}
	for _, c := range cfgs {
		c.Peers = view{f: f, self: c.Name}
		c.Location.Jitter = -1
		a, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		f.agents[c.Name] = a
		f.order = append(f.order, c.Name)
	}
	return f
}

func (f *fed) drain(name string) {
	r := f.agents[name].Ready()
	for _, d := range r.Decisions {
		f.log = append(f.log, d)
		if d.Kind == DecideStart {
			if prev, ok := f.starts[d.Job]; ok {
				f.t.Fatalf("job %v started at %s and at %s", d.Job, prev, name)
			}
			f.starts[d.Job] = name
		}
	}
	for _, m := range r.Messages {
		if f.drop != nil && f.drop(m) {
			continue
		}
		f.queue = append(f.queue, m)
	}
}

// settle delivers messages and ticks every agent until nothing is left at
// the current time.
func (f *fed) settle() {
	for range 1000 {
		for len(f.queue) > 0 {
			m := f.queue[0]
			f.queue = f.queue[1:]
			f.agents[m.To].Step(f.now, m)
			f.drain(m.To)
		}
		ticked := false
		for _, n := range f.order {
			if a := f.agents[n]; a.NextWake(f.now) <= f.now {
				a.Tick(f.now)
				f.drain(n)
				ticked = true
			}
		}
		if !ticked && len(f.queue) == 0 {
			return
		}
	}
	f.t.Fatal("the federation does not settle")
}

func (f *fed) submit(site string, id int64, procs int, est int64) {
	f.agents[site].Submit(f.now, id, plan.Job{Procs: procs, Estimate: est, Release: f.now, Deadline: plan.Forever})
	f.drain(site)
	f.settle()
}

func (f *fed) find(kind DecisionKind, key JobKey) (Decision, bool) {
	for _, d := range f.log {
		if d.Kind == kind && d.Job == key {
			return d, true
		}
	}
	return Decision{}, false
}

// TestACFMovesWaitingJobsToAnIdlePeer: a small site's job that its own
// policy would not start now goes to the peer that starts it now; a job
// EASY backfills at home stays home; the outcome comes back to the origin.
func TestACFMovesWaitingJobsToAnIdlePeer(t *testing.T) {
	f := newFed(t, Config{Name: "small", Procs: 4, Policy: plan.EASY, Transfer: delegation.ACF},
		Config{Name: "big", Procs: 16, Policy: plan.EASY, Transfer: delegation.ACF})
	f.submit("small", 1, 4, 1000) // starts at home
	if f.starts[JobKey{"small", 1}] != "small" {
		t.Fatalf("job 1 started at %q", f.starts[JobKey{"small", 1}])
	}
	f.submit("small", 2, 4, 1000) // cannot start now at home
	if f.starts[JobKey{"small", 2}] != "big" {
		t.Fatalf("job 2 started at %q, want big", f.starts[JobKey{"small", 2}])
	}
	d, ok := f.find(DecideDelegate, JobKey{"small", 2})
	if !ok || d.Peer != "big" || d.Route.Hops() != 1 {
		t.Fatalf("no delegation of job 2 to big: %+v", d)
	}
	f.now = 1000
	if !f.agents["big"].End(f.now, JobKey{"small", 2}, true) {
		t.Fatal("big does not know job 2")
	}
	f.drain("big")
	f.settle()
	if d, ok := f.find(DecideOutcome, JobKey{"small", 2}); !ok || d.Outcome.End != 1000 || !d.Outcome.Completed {
		t.Fatalf("the origin did not learn the outcome: %+v", d)
	}
	if h := f.agents["small"].History()["big"]; h.Jobs != 1 {
		t.Fatalf("history of big: %+v", h)
	}
}

// TestACFPeerAcceptsOnlyWhatItStartsNow: a peer whose own policy would not
// start the job now refuses, and the job waits at home.
func TestACFPeerAcceptsOnlyWhatItStartsNow(t *testing.T) {
	f := newFed(t, Config{Name: "a", Procs: 4, Policy: plan.EASY, Transfer: delegation.ACF},
		Config{Name: "b", Procs: 4, Policy: plan.EASY, Transfer: delegation.ACF})
	f.submit("b", 1, 3, 1000)
	f.submit("a", 1, 4, 1000)
	f.submit("a", 2, 2, 1000) // a is full, b has 1 free: b refuses
	if _, ok := f.find(DecideAccept, JobKey{"a", 2}); !ok {
		t.Fatal("job a/2 not accepted")
	}
	if _, ok := f.starts[JobKey{"a", 2}]; ok {
		t.Fatal("job a/2 started somewhere")
	}
	if _, ok := f.find(DecideDelegate, JobKey{"a", 2}); ok {
		t.Fatal("job a/2 delegated to a peer that cannot start it")
	}
}

// TestTiesGoByRankNotName: under ACF every quote ties on profit and end;
// the peer the location policy ranks first wins, not the alphabetically
// first.
func TestTiesGoByRankNotName(t *testing.T) {
	// aaa can start the job now too, but only 1 processor is free there
	// in an hour: zzz's outlook ranks it first.
	f := newFed(t, Config{Name: "origin", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF},
		Config{Name: "aaa", Procs: 8, Policy: plan.EASY, Fixed: []plan.FixedSpec{{ID: -1, Procs: 7, Start: 1000, End: 100000}}},
		Config{Name: "zzz", Procs: 8, Policy: plan.EASY})
	f.submit("origin", 1, 2, 900)
	f.submit("origin", 2, 2, 900)
	if got := f.starts[JobKey{"origin", 2}]; got != "zzz" {
		t.Fatalf("job went to %q, want zzz (better outlook)", got)
	}
}

// TestOrderedSpillOver: the preferred peer is asked alone first; the
// others only when it cannot take the job.
func TestOrderedSpillOver(t *testing.T) {
	f := newFed(t, Config{Name: "home", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF, Prefer: []string{"partner"}},
		Config{Name: "partner", Procs: 4, Policy: plan.EASY}, Config{Name: "other", Procs: 64, Policy: plan.EASY})
	f.submit("home", 1, 2, 1000)
	f.submit("home", 2, 2, 1000)
	if got := f.starts[JobKey{"home", 2}]; got != "partner" {
		t.Fatalf("job 2 went to %q, want the partner", got)
	}
	for _, m := range []int64{3, 4} { // the partner fills up, then spills over
		f.submit("home", m, 2, 1000)
	}
	if got := f.starts[JobKey{"home", 3}]; got != "partner" {
		t.Fatalf("job 3 went to %q, want the partner", got)
	}
	if got := f.starts[JobKey{"home", 4}]; got != "other" {
		t.Fatalf("job 4 went to %q, want other (the partner is full)", got)
	}
}

// TestLostAgreedIsRetried: the peer's answer to agree is lost; the origin
// asks again after ReplySeconds and the job runs exactly once, at the peer.
func TestLostAgreedIsRetried(t *testing.T) {
	f := newFed(t, Config{Name: "a", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF, ReplySeconds: 10},
		Config{Name: "b", Procs: 8, Policy: plan.EASY, HoldSeconds: 60})
	f.submit("a", 1, 2, 1000)
	dropped := 0
	f.drop = func(m Message) bool {
		if m.Kind == KindAgreed && dropped == 0 {
			dropped++
			return true
		}
		return false
	}
	f.submit("a", 2, 2, 1000)
	if _, ok := f.find(DecideDelegate, JobKey{"a", 2}); ok {
		t.Fatal("delegated without an answer")
	}
	if w := f.agents["a"].NextWake(f.now); w != 10 {
		t.Fatalf("origin wakes at %d, want 10 to ask again", w)
	}
	f.now = 10
	f.settle()
	if d, ok := f.find(DecideDelegate, JobKey{"a", 2}); !ok || d.Peer != "b" {
		t.Fatalf("not delegated after the retry: %+v", d)
	}
	if dropped != 1 || f.starts[JobKey{"a", 2}] != "b" {
		t.Fatalf("dropped %d, started at %q", dropped, f.starts[JobKey{"a", 2}])
	}
}

// TestLostAgreedJobEndsBeforeTheRetry: the peer's answer to agree is
// lost, and the job ends there before the origin asks again: its report,
// which comes first, tells the origin the peer took it; the job is
// delegated at the price agreed and settled, never run a second time
// (the retried agree would find no hold left).
func TestLostAgreedJobEndsBeforeTheRetry(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		f := newFed(t, Config{Name: "a", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF},
			Config{Name: "b", Procs: 8, Policy: plan.EASY, Pricing: delegation.LibraPlus{PBase: 1, Alpha: 1, Beta: 1}})
		f.submit("a", 1, 2, 1000)
		f.drop = func(m Message) bool { return m.Kind == KindAgreed }
		f.agents["a"].Submit(f.now, 2, plan.Job{Procs: 2, Estimate: 1000, Deadline: 50000, Fee: 1e6})
		f.drain("a")
		f.settle()
		job2 := JobKey{"a", 2}
		if f.starts[job2] != "b" {
			t.Fatalf("job 2 started at %q, want b", f.starts[job2])
		}
		if cancelled && !f.cancel("a", job2) {
			t.Fatal("cancel failed")
		}
		f.now = 20
		f.end("b", job2, true)
		f.now = 60
		f.settle()
		var agreed float64
		for _, d := range f.log {
			if d.Kind == DecideAccept && d.Job == job2 && d.Peer == "a" {
				agreed = d.Price
			}
		}
		d, ok := f.find(DecideDelegate, job2)
		if !cancelled && (!ok || d.Peer != "b" || d.Price != agreed || agreed <= 0) {
			t.Fatalf("not delegated to b at %v: %+v", agreed, d)
		}
		if o, ok := f.find(DecideOutcome, job2); !ok || !o.Outcome.Completed || o.Outcome.End != 20 {
			t.Fatalf("cancelled %v: the outcome: %+v", cancelled, o)
		}
		if a := f.agents["a"]; a.jobs[job2] != nil || a.Site().Running() != 1 {
			t.Fatalf("cancelled %v: the origin keeps job 2, or runs it", cancelled)
		}
	}
}

// TestRQFPullsWaitingJobs: an idle site under RQF takes a job waiting in a
// peer's queue that it can start now.
func TestRQFPullsWaitingJobs(t *testing.T) {
	f := newFed(t, Config{Name: "busy", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF},
		Config{Name: "idle", Procs: 8, Policy: plan.EASY, Transfer: delegation.RQF})
	f.submit("busy", 1, 4, 1000)
	f.submit("busy", 2, 4, 1000)
	if _, ok := f.starts[JobKey{"busy", 2}]; ok {
		t.Fatal("job 2 started before the idle site asked")
	}
	// The idle site has had no event yet: it asks at its own event, once
	// the interval since its last round has passed.
	f.now = 600
	f.submit("idle", 1, 1, 10)
	if got := f.starts[JobKey{"busy", 2}]; got != "idle" {
		t.Fatalf("job 2 started at %q, want idle (pulled)", got)
	}
	if d, ok := f.find(DecideDelegate, JobKey{"busy", 2}); !ok || d.Peer != "idle" {
		t.Fatalf("busy did not hand job 2 over: %+v", d)
	}
}

// TestRQFPullsWithoutEvents: an idle site with no workload of its own (no
// event ever happens to it) asks by itself at its place on the interval's
// grid (NextPull), and takes the job waiting at its peer then; a peer's
// queue request does not make it ask.
func TestRQFPullsWithoutEvents(t *testing.T) {
	f := newFed(t, Config{Name: "busy", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF, PullSeconds: 60},
		Config{Name: "idle", Procs: 8, Policy: plan.EASY, Transfer: delegation.RQF, PullSeconds: 60})
	f.submit("busy", 1, 4, 1000)
	f.submit("busy", 2, 4, 1000)
	idle := f.agents["idle"]
	w := idle.NextWake(f.now)
	if want := PullOffset("idle", 60); w != want && w != want+60 {
		t.Fatalf("idle site wakes at %d, want its offset %d on the grid", w, want)
	}
	if _, ok := f.starts[JobKey{"busy", 2}]; ok {
		t.Fatal("job 2 started before the idle site asked")
	}
	f.now = w
	f.settle()
	if got := f.starts[JobKey{"busy", 2}]; got != "idle" {
		t.Fatalf("job 2 started at %q, want idle (pulled at its wake %d)", got, w)
	}
	// The idle site is idle still; busy (now idle, job 1 running) asks
	// only at its own wake or event, not because idle asked it.
	if idle.rqfAt != w {
		t.Fatalf("idle asked last at %d, want %d", idle.rqfAt, w)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, c := range map[string]Config{
		"no name":                 {Procs: 1},
		"no procs":                {Name: "a"},
		"overbooking under easy":  {Name: "a", Procs: 4, Policy: plan.EASY, Overbooking: &Overbooking{}},
		"negative hops":           {Name: "a", Procs: 4, MaxHops: -1},
		"two hops":                {Name: "a", Procs: 4, MaxHops: 2},
		"community share of 1":    {Name: "a", Procs: 4, CommunityShare: 1},
		"unknown transfer policy": {Name: "a", Procs: 4, Transfer: 7},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestPriceDecides: with Libra+$ prices the origin takes the cheaper
// quote (delegation.Best weighs fee − price − PoF × penalty): zzz ranks
// first (two processors free now, as the job needs, and more later) but
// six of its eight processors are taken over the job's window, so its
// price is four times aaa's. Free, the ranking decides.
func TestPriceDecides(t *testing.T) {
	for _, c := range []struct {
		pricing delegation.Pricing
		want    string
	}{{delegation.LibraPlus{PBase: 1, Alpha: 1, Beta: 1}, "aaa"}, {nil, "zzz"}} {
		f := newFed(t, Config{Name: "origin", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF},
			Config{Name: "aaa", Procs: 8, Policy: plan.EASY, Pricing: c.pricing, Fixed: []plan.FixedSpec{{ID: -1, Procs: 7, Start: 1000, End: 100000}}},
			Config{Name: "zzz", Procs: 8, Policy: plan.EASY, Pricing: c.pricing, Fixed: []plan.FixedSpec{{ID: -1, Procs: 6, Start: 0, End: 900}}})
		f.submit("origin", 1, 2, 900)
		f.submit("origin", 2, 2, 900)
		if got := f.starts[JobKey{"origin", 2}]; got != c.want {
			t.Fatalf("pricing %v: job went to %q, want %s", c.pricing, got, c.want)
		}
	}
}

// TestAgentAgesStatisticsAsTheNode: the agent's runtime statistics age as
// a node's with the same overbooking.age_factor and age_every (the node
// records every learnt job into overbook.Stats configured so, statsConfig
// in node/learning.go): the same jobs end, the same weights remain.
func TestAgentAgesStatisticsAsTheNode(t *testing.T) {
	for _, f := range []float64{0.5, 1} {
		a, err := New(Config{Name: "a", Procs: 8, Policy: plan.Conservative,
			Overbooking: &Overbooking{Test: overbook.Threshold{PoFMax: 0.1}, AgeFactor: f, AgeEvery: 4}})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := overbook.NewStats(overbook.StatsConfig{Classifier: overbook.ByRuntime, AgeFactor: f, AgeEvery: 4})
		if err != nil {
			t.Fatal(err)
		}
		var now int64
		for i := range 10 {
			pj := plan.Job{Procs: 1, Estimate: 100, Release: now, Deadline: plan.Forever, User: "u", App: "x"}
			a.Submit(now, int64(i+1), pj)
			a.Tick(now)
			a.Ready()
			now += 30 + int64(i)
			if !a.End(now, JobKey{Site: "a", ID: int64(i + 1)}, true) {
				t.Fatalf("job %d did not run", i+1)
			}
			a.Tick(now)
			a.Ready()
			if err := ref.Record(overbook.JobInfo{ID: int64(i + 1), Procs: 1, Estimate: 100, User: "u", App: "x"}, overbook.Observation{Ran: 30 + int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		j := overbook.JobInfo{Procs: 1, Estimate: 100}
		got, want := a.adm.Stats.Histogram(j).N(), ref.Histogram(j).N()
		if got != want {
			t.Errorf("age factor %v: the agent's statistics weigh %v, a node's %v", f, got, want)
		}
		if f < 1 && got >= 10 {
			t.Errorf("age factor %v: 10 learnt jobs weigh %v: nothing aged", f, got)
		}
	}
}

// TestUnconfirmedQuoteAsksTheNextRound: the chosen peer answers agree
// without an agreement (its hold ran out while the agree was lost); the
// origin asks the next round, and the job goes to the next preferred peer
// (the node does the same: e2e.TestUnconfirmedQuoteAsksTheNextRound).
func TestUnconfirmedQuoteAsksTheNextRound(t *testing.T) {
	f := newFed(t, Config{Name: "home", Procs: 2, Policy: plan.EASY, Transfer: delegation.ACF, Prefer: []string{"partner", "other"}, ReplySeconds: 10},
		Config{Name: "partner", Procs: 4, Policy: plan.EASY, HoldSeconds: 5}, Config{Name: "other", Procs: 4, Policy: plan.EASY})
	f.submit("home", 1, 2, 1000)
	dropped := 0
	f.drop = func(m Message) bool {
		if m.Kind == KindAgree && m.To == "partner" && dropped == 0 {
			dropped++
			return true
		}
		return false
	}
	f.submit("home", 2, 2, 1000)
	f.now = 10
	f.settle()
	if dropped != 1 {
		t.Fatalf("dropped %d agrees", dropped)
	}
	if d, ok := f.find(DecideDelegate, JobKey{"home", 2}); !ok || d.Peer != "other" {
		t.Fatalf("job 2 after partner did not confirm: %+v, want delegated to other", d)
	}
	if h := f.agents["home"].History()["partner"]; h.Failures != 1 {
		t.Fatalf("partner's failures in home's history: %d, want 1", h.Failures)
	}
}

// TestStandingAsLaidInAdvance: an agent lays the instances of a standing
// reservation only as placements reach them, yet places every job where a
// plan holding all instances from the start places it, and rejects the
// jobs the rule leaves no room for (plan.StandingExcludes). The node does
// the same (node.TestStandingSameInNodeAndAgent).
func TestStandingAsLaidInAdvance(t *testing.T) {
	rule := plan.Standing{Name: "nightly", Procs: 6, Start: 3600, Every: 86400, Length: 7200}
	a, err := New(Config{Name: "a", Procs: 8, Policy: plan.Conservative, Standing: []plan.Standing{rule}})
	if err != nil {
		t.Fatal(err)
	}
	var fixed []plan.FixedSpec
	for i, w := range rule.Instances(0, 90*86400) {
		fixed = append(fixed, plan.FixedSpec{ID: -int64(i + 1), Procs: 6, Start: w.Start, End: w.End})
	}
	ref, err := plan.NewSite(plan.Config{Procs: 8, Policy: plan.Conservative, Fixed: fixed})
	if err != nil {
		t.Fatal(err)
	}
	const h, day = 3600, 86400
	for i, j := range []plan.Job{
		{Procs: 4, Estimate: 2 * h}, {Procs: 8, Estimate: 5 * h}, {Procs: 2, Estimate: 30 * h, Release: day}, {Procs: 4, Estimate: 30 * h, Release: day},
		{Procs: 6, Estimate: 20 * h, Release: 9 * day}, {Procs: 8, Estimate: 4 * h, Release: 20*day + 2*h}, {Procs: 2, Estimate: 70 * h, Release: 30 * day},
	} {
		j.Deadline = plan.Forever
		a.Submit(0, int64(i+1), j)
		d := a.Ready().Decisions[0]
		if plan.StandingExcludes([]plan.Standing{rule}, 8, j, 0) {
			if d.Kind != DecideReject {
				t.Errorf("job %d: the rule leaves it no room, the agent %v it", i+1, d.Kind)
			}
			continue
		}
		j.ID = int64(i + 1)
		want := ref.Submit(0, j)
		if d.Kind != DecideAccept || d.Placement.Start != want.Start || d.Placement.End != want.End {
			t.Errorf("job %d: the agent %v [%d, %d), laid in advance [%d, %d)", i+1, d.Kind, d.Placement.Start, d.Placement.End, want.Start, want.End)
		}
	}
}

// TestRejectedByAdmissionIsOffered: a job whose probe fits but that
// admission rejects (a standing reservation leaves it no room: every
// placement must stay clear of it) goes to a peer under on-reject, as a
// node sends it (site.OfferRejected after admission, the one rule of
// both); the agent used to decide on its probe and reject it.
func TestRejectedByAdmissionIsOffered(t *testing.T) {
	rule := plan.Standing{Name: "nightly", Procs: 6, Start: 3600, Every: 86400, Length: 7200}
	f := newFed(t, Config{Name: "a", Procs: 8, Policy: plan.Conservative, Standing: []plan.Standing{rule}},
		Config{Name: "b", Procs: 16, Policy: plan.Conservative})
	f.submit("a", 1, 4, 30*3600)
	if _, rejected := f.find(DecideReject, JobKey{"a", 1}); rejected {
		t.Fatal("a job the standing reservation excludes at home was rejected without asking the peers")
	}
	if d, ok := f.find(DecideDelegate, JobKey{"a", 1}); !ok || d.Peer != "b" {
		t.Fatalf("not delegated to b: %+v", f.log)
	}
}

// TestQuoteKeptClearOfStanding: a peer's quote is held clear of the
// quoting site's standing reservations, as a local job is: a job the rule
// leaves no room for at b (4 processors for 30 hours where the nightly
// instance takes 6 of 8) is refused by b, which was asked, and so is not
// delegated there. (TestRejectedByAdmissionIsOffered: to a peer without
// the rule, it is.)
func TestQuoteKeptClearOfStanding(t *testing.T) {
	rule := plan.Standing{Name: "nightly", Procs: 6, Start: 3600, Every: 86400, Length: 7200}
	f := newFed(t, Config{Name: "a", Procs: 8, Policy: plan.Conservative, Standing: []plan.Standing{rule}},
		Config{Name: "b", Procs: 8, Policy: plan.Conservative, Standing: []plan.Standing{rule}})
	f.submit("a", 1, 4, 30*3600)
	if d, ok := f.find(DecideDelegate, JobKey{"a", 1}); ok {
		t.Fatalf("delegated to %s, whose standing reservation leaves it no room: %+v", d.Peer, f.log)
	}
	d, ok := f.find(DecideReject, JobKey{"a", 1})
	if !ok || !slices.ContainsFunc(d.Route, func(h delegation.Hop) bool { return h.Site == "b" && h.Action == delegation.ActionRefused }) {
		t.Fatalf("b did not refuse it: %+v", f.log)
	}
}

// TestRecycleReusesBatches: a batch handed back with Recycle is filled
// again after the next Ready, with only the new decisions, and a batch not
// handed back is never written to.
func TestRecycleReusesBatches(t *testing.T) {
	a, err := New(Config{Name: "a", Procs: 4})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(id int64) Ready {
		a.Submit(0, id, plan.Job{Procs: 1, Estimate: 100, Release: 0, Deadline: plan.Forever})
		return a.Ready()
	}
	only := func(r Ready, id int64) {
		t.Helper()
		if len(r.Decisions) != 1 || r.Decisions[0].Kind != DecideAccept || r.Decisions[0].Job.ID != id {
			t.Fatalf("batch %+v, want job %d's accept alone", r.Decisions, id)
		}
	}
	r1 := submit(1)
	only(r1, 1)
	first := &r1.Decisions[:1][0]
	a.Recycle(r1)
	r2 := submit(2)
	only(r2, 2)
	r3 := submit(3)
	only(r3, 3)
	if &r3.Decisions[0] != first {
		t.Errorf("the recycled batch's array was not reused")
	}
	only(r2, 2) // not handed back: untouched
}

// TestJobKeyString: the key as "site/id" (hold ids and logs read it).
func TestJobKeyString(t *testing.T) {
	for _, k := range []JobKey{{"a", 0}, {"site007", 123}, {"b", -5}, {"", 1 << 62}} {
		if got, want := k.String(), fmt.Sprintf("%s/%d", k.Site, k.ID); got != want {
			t.Errorf("%#v.String() = %q, want %q", k, got, want)
		}
	}
}

// TestRQFTakesAJobItRefused is the route rule (delegation.Route.WasAt) in
// the agent: a job its origin offered under ACF to a peer that refused it
// (full then) is not a job that was at that peer; when the peer, under RQF,
// is idle and asks, the origin lists it and the peer takes it. The node
// has the same case (node.TestRQFTakesAJobItRefused).
func TestRQFTakesAJobItRefused(t *testing.T) {
	f := newFed(t, Config{Name: "a", Procs: 4, Policy: plan.EASY, Transfer: delegation.ACF},
		Config{Name: "b", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF})
	f.submit("b", 1, 4, 100)  // b is full until 100
	f.submit("a", 1, 4, 1000) // a is full
	f.submit("a", 2, 2, 500)  // a cannot start it: offered to b, which refuses
	d, ok := f.find(DecideAccept, JobKey{"a", 2})
	if !ok || d.Peer != "" || !slices.ContainsFunc(d.Route, func(h delegation.Hop) bool { return h.Site == "b" && h.Action == delegation.ActionRefused }) {
		t.Fatalf("a/2 not kept at a after b refused it: %+v", d)
	}
	f.now = 100
	if !f.agents["b"].End(100, JobKey{"b", 1}, true) {
		t.Fatal("b/1 did not end")
	}
	f.drain("b")
	f.settle()
	if got := f.starts[JobKey{"a", 2}]; got != "b" {
		t.Fatalf("a/2 started at %q, want b (it refused the quote, then took the job from a's queue)", got)
	}
}

// rqfPair is an origin o whose job o/2 waits behind o/1 and an idle
// taker t (at 100, when t/1 ends), both under RQF: t takes o/2 from o's
// queue at 100, unless drop loses a message on the way.
func rqfPair(t *testing.T, drop func(Message) bool) *fed {
	f := newFed(t, Config{Name: "o", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF},
		Config{Name: "t", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF})
	f.submit("t", 1, 4, 100)
	f.submit("o", 1, 4, 1000)
	f.submit("o", 2, 2, 30) // runs 30 s wherever it runs (ended by hand)
	f.drop = drop
	f.now = 100
	if !f.agents["t"].End(100, JobKey{"t", 1}, true) {
		t.Fatal("t/1 did not end")
	}
	f.drain("t")
	f.settle()
	return f
}

// dropNth loses the n-th message of kind from one site to another.
func dropNth(kind Kind, from string, n int) func(Message) bool {
	seen := 0
	return func(m Message) bool {
		if m.Kind != kind || m.From != from {
			return false
		}
		seen++
		return seen == n
	}
}

// agreeTo is origin's agree to the hold a keeps for its job key (the
// one a's quote or take named).
func agreeTo(a *Agent, origin string, key JobKey) Message {
	m := Message{Kind: KindAgree, From: origin, To: a.cfg.Name, Job: key}
	if jb := a.jobs[key]; jb != nil {
		m.HoldID = jb.holdID
	}
	return m
}

// count is how many decisions of kind about key the federation made.
func (f *fed) count(kind DecisionKind, key JobKey) int {
	n := 0
	for _, d := range f.log {
		if d.Kind == kind && d.Job == key {
			n++
		}
	}
	return n
}

// TestHandOverIsTwoPhase: RQF's hand-over is an agree to the taker's hold,
// resent until answered: the origin's job is the taker's only once it
// answers agreed. A message lost at either step leaves the job at exactly
// one site: it runs once, and its origin learns its outcome.
func TestHandOverIsTwoPhase(t *testing.T) {
	o2 := JobKey{"o", 2}
	end := func(f *fed, at int64) {
		f.now = at
		if !f.agents[f.starts[o2]].End(at, o2, true) {
			f.t.Fatalf("o/2 did not end at %s", f.starts[o2])
		}
		f.drain(f.starts[o2])
		f.settle()
	}
	t.Run("no loss", func(t *testing.T) {
		f := rqfPair(t, nil)
		ag, ok := f.find(DecideAgree, o2)
		if !ok || !ag.HandOver || ag.Peer != "t" {
			t.Fatalf("no agree to t's hold written ahead: %+v", f.log)
		}
		if d, ok := f.find(DecideDelegate, o2); !ok || d.Peer != "t" || f.starts[o2] != "t" {
			t.Fatalf("o/2 not handed over to t: %+v, started at %q", d, f.starts[o2])
		} else if h := d.Route[len(d.Route)-1]; h.Action != delegation.ActionDelegated || h.Reason != "taken from the queue by a peer that could start it now (RQF)" {
			t.Fatalf("the origin's route: %+v", d.Route)
		}
		if i := slices.IndexFunc(f.log, func(d Decision) bool { return d.Kind == DecideAccept && d.Job == o2 && d.Peer == "o" }); i < 0 ||
			!f.log[i].Route.WasAt("t") || f.log[i].Route.Hops() != 1 {
			t.Fatalf("t's accept: %+v", f.log)
		}
		end(f, 130)
		if _, ok := f.find(DecideOutcome, o2); !ok || f.agents["o"].Busy() && len(f.agents["o"].jobs) > 1 {
			t.Fatal("o did not learn o/2's outcome")
		}
	})
	t.Run("agree lost", func(t *testing.T) {
		// The resend comes when t's hold has run out: t refuses, and the
		// job comes back to o's queue, where t takes it again.
		f := rqfPair(t, dropNth(KindAgree, "o", 1))
		if _, ok := f.find(DecideDelegate, o2); ok || f.starts[o2] != "" {
			t.Fatalf("o/2 moved without an agree: %+v", f.log)
		}
		f.now = 160
		f.settle()
		if n := f.count(DecideAccept, o2); n < 2 {
			t.Fatalf("o/2 did not come back to o's plan after t refused the late agree: %d accepts", n)
		}
		for f.starts[o2] == "" && f.now < 1200 {
			f.now = min(f.agents["o"].NextWake(f.now+1), f.agents["t"].NextWake(f.now+1))
			f.settle()
		}
		if f.starts[o2] == "" {
			t.Fatalf("o/2 never started: %+v", f.log)
		}
		end(f, f.now+30)
		if _, ok := f.find(DecideOutcome, o2); f.starts[o2] == "t" && !ok {
			t.Fatal("o did not learn o/2's outcome")
		}
	})
	t.Run("agreed lost", func(t *testing.T) {
		// t runs the job; o asks again and is answered as before.
		f := rqfPair(t, dropNth(KindAgreed, "t", 1))
		if f.starts[o2] != "t" {
			t.Fatalf("o/2 started at %q, want t", f.starts[o2])
		}
		if _, ok := f.find(DecideDelegate, o2); ok {
			t.Fatal("o delegated without the answer")
		}
		f.now = 160
		f.settle()
		if d, ok := f.find(DecideDelegate, o2); !ok || d.Peer != "t" {
			t.Fatalf("the resent agree did not settle the hand-over: %+v", f.log)
		}
		end(f, 190)
		if _, ok := f.find(DecideOutcome, o2); !ok {
			t.Fatal("o did not learn o/2's outcome")
		}
	})
	t.Run("agreed and report lost", func(t *testing.T) {
		// t runs the job and it ends before o asks again, its report lost
		// too: t answers the resent agree for the job it ran (a refusal
		// would have o run it again), and the resent report settles it.
		drops := []func(Message) bool{dropNth(KindAgreed, "t", 1), dropNth(KindReport, "t", 1)}
		f := rqfPair(t, func(m Message) bool { return drops[0](m) || drops[1](m) })
		end(f, 130)
		f.now = 160
		f.settle()
		if d, ok := f.find(DecideDelegate, o2); !ok || d.Peer != "t" || d.Placement.Start != 100 || d.Placement.End != 130 {
			t.Fatalf("the resent agree after the run: %+v", d)
		}
		f.now = 190
		f.settle()
		if _, ok := f.find(DecideOutcome, o2); !ok || f.agents["o"].Busy() && len(f.agents["o"].jobs) > 1 || f.agents["t"].Busy() {
			t.Fatalf("the resent report did not settle o/2: %+v", f.log)
		}
		if f.count(DecideStart, o2) != 1 {
			t.Fatal("o/2 did not run exactly once")
		}
	})
	t.Run("take refused", func(t *testing.T) {
		// The job no longer waits at its origin: the taker's hold goes at
		// once.
		a, _ := New(Config{Name: "t", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF, Peers: staticView{{Site: "o", Procs: 4}}})
		key := JobKey{"o", 1}
		a.Step(0, Message{Kind: KindQueue, From: "o", To: "t", Jobs: []QueuedJob{{Job: key, Spec: plan.Job{Procs: 2, Estimate: 100, Deadline: plan.Forever},
			Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}}}})
		r := a.Ready()
		if len(r.Messages) != 1 || r.Messages[0].Kind != KindTake || a.Site().Holds() != 1 {
			t.Fatalf("no take under a hold: %+v", r.Messages)
		}
		a.Step(1, Message{Kind: KindTaken, From: "o", To: "t", Job: key, HoldID: r.Messages[0].HoldID, Reason: "the job no longer waits here"})
		if a.Site().Holds() != 0 || a.Busy() {
			t.Fatal("the refused take's hold stays")
		}
	})
}

// TestHandOverAfterItsHoldRanOut: the taker answers an agree that comes
// after its hold ran out (its tick forgot it, or a restart lost it) with
// a refusal, and the origin places the job again itself: no job is lost.
// (The one-message hand-over, taken, used to make the taker place such a
// job as any other: the origin had let it go already.) A job the taker
// accepted keeps its origin across a restart: the origin's Terminate still
// reaches it.
func TestHandOverAfterItsHoldRanOut(t *testing.T) {
	origin := JobKey{"o", 1}
	cfg := Config{Name: "t", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF, Peers: staticView{{Site: "o", Procs: 4}}}
	queue := Message{Kind: KindQueue, From: "o", To: "t", Jobs: []QueuedJob{{Job: origin, Spec: plan.Job{Procs: 2, Estimate: 100, Deadline: plan.Forever},
		Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}}}}
	t.Run("accepted, then restarted", func(t *testing.T) {
		a, _ := New(cfg)
		x := &journaled{t: t, a: a, j: NewJournal()}
		a.Step(0, queue)
		x.flush(0)
		a.Step(4, Message{Kind: KindAgree, From: "o", To: "t", Job: origin, HoldID: x.out[0].HoldID})
		x.flush(4)
		if len(x.out) != 1 || x.out[0].Kind != KindAgreed || x.out[0].Offer == nil {
			t.Fatalf("the hand-over is not agreed: %+v", x.out)
		}
		b, err := Restore(cfg, 10, x.j.Saved())
		if err != nil {
			t.Fatal(err)
		}
		b.Step(10, Message{Kind: KindTerminate, From: "o", To: "t", Job: origin})
		if r := b.Ready(); !slices.ContainsFunc(r.Decisions, func(d Decision) bool { return d.Kind == DecideCancel && d.Job == origin }) {
			t.Fatalf("the origin's Terminate did not cancel the job handed over: %+v", r.Decisions)
		}
	})
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("late, restart %v", restart), func(t *testing.T) {
			a, _ := New(cfg)
			x := &journaled{t: t, a: a, j: NewJournal()}
			a.Step(0, queue)
			x.flush(0)
			hold := x.out[0].HoldID
			at := int64(60) // the hold runs out at 60
			if restart {
				var err error
				if a, err = Restore(cfg, 30, x.j.Saved()); err != nil {
					t.Fatal(err)
				}
				at = 40
			}
			a.Tick(at)
			a.Ready()
			a.Step(at, Message{Kind: KindAgree, From: "o", To: "t", Job: origin, HoldID: hold})
			a.Tick(at)
			r := a.Ready()
			if len(r.Decisions) != 0 || len(r.Messages) != 1 || r.Messages[0].Kind != KindAgreed || r.Messages[0].Offer != nil {
				t.Fatalf("the late agree is not refused: %+v %+v", r.Decisions, r.Messages)
			}
			if a.Busy() || a.Site().Holds() != 0 {
				t.Fatal("the taker keeps something of the job")
			}
		})
	}
	t.Run("origin", func(t *testing.T) {
		// The origin's side, across a restart: the agree to the hold is
		// asked again of the taker alone; its refusal brings the job back
		// into the plan, its agreed makes it delegated.
		ocfg := Config{Name: "o", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF, Peers: staticView{{Site: "t", Procs: 4}}}
		for _, agreed := range []bool{false, true} {
			a, _ := New(ocfg)
			x := &journaled{t: t, a: a, j: NewJournal()}
			a.Submit(0, 1, plan.Job{Procs: 4, Estimate: 1000, Deadline: plan.Forever})
			a.Submit(0, 2, plan.Job{Procs: 2, Estimate: 100, Deadline: plan.Forever})
			a.Tick(0)
			x.flush(0)
			key := JobKey{"o", 2}
			hold := holdName(key, 7)
			a.Step(5, Message{Kind: KindTake, From: "t", To: "o", Job: key, HoldID: hold})
			x.flush(5)
			if len(x.out) != 1 || x.out[0].Kind != KindAgree || x.out[0].To != "t" || x.out[0].HoldID != hold || a.Site().Plan().Len() != 1 {
				t.Fatalf("the take is not agreed to with the job out of the plan: %+v", x.out)
			}
			b, err := Restore(ocfg, 20, x.j.Saved())
			if err != nil {
				t.Fatal(err)
			}
			if r := b.Ready(); len(r.Messages) != 1 || r.Messages[0].Kind != KindAgree || r.Messages[0].To != "t" || r.Messages[0].Job != key || r.Messages[0].HoldID != hold {
				t.Fatalf("the restored origin does not agree to t's hold again: %+v", r.Messages)
			}
			ans := Message{Kind: KindAgreed, From: "t", To: "o", Job: key, HoldID: hold, Reason: "no hold for the job (expired or released)"}
			if agreed {
				ans = Message{Kind: KindAgreed, From: "t", To: "o", Job: key, Offer: &Offer{Quote: delegation.Quote{Site: "t", HoldID: key.String(), Start: 5, End: 105}}}
			}
			b.Step(21, ans)
			b.Tick(21)
			r := b.Ready()
			want := DecideAccept
			if agreed {
				want = DecideDelegate
			}
			if len(r.Decisions) != 1 || r.Decisions[0].Kind != want || r.Decisions[0].Job != key {
				t.Fatalf("agreed %v: %+v, want %v", agreed, r.Decisions, want)
			}
			if !agreed && (r.Decisions[0].Peer != "" || !r.Decisions[0].Placement.OK()) {
				t.Fatalf("the job refused is not placed again at its origin: %+v", r.Decisions[0])
			}
		}
	})
}

// TestLateHandOverMessages: an agree or a refusal of an earlier hand-over
// of the same job to the same taker that comes late, once the taker has
// taken the job again under a new hold, is told apart by the hold it
// names: the late agree does not confirm the new hold (the origin may
// still plan the job), and the late refusal does not bring the job back
// to the origin's plan while the taker runs it. Either way the job ran at
// both sites.
func TestLateHandOverMessages(t *testing.T) {
	o2 := JobKey{"o", 2}
	// late holds back the n-th message of kind from a site; a copy
	// duplicates it as well.
	type late struct {
		kind Kind
		from string
		n    int
		copy bool
		seen int
		msgs []Message
	}
	net := func(f *fed, ls ...*late) func(Message) bool {
		return func(m Message) bool {
			lost := false
			for _, l := range ls {
				if m.Kind == l.kind && m.From == l.from {
					if l.seen++; l.seen == l.n {
						l.msgs = append(l.msgs, m)
						lost = lost || !l.copy
					}
				}
			}
			return lost
		}
	}
	deliver := func(f *fed, l *late) {
		if len(l.msgs) != 1 {
			f.t.Fatalf("%v from %s: %d held back", l.kind, l.from, len(l.msgs))
		}
		f.queue = append(f.queue, l.msgs[0])
		f.settle()
	}
	until := func(f *fed, at int64) {
		for f.now < at {
			f.now = min(f.agents["o"].NextWake(f.now+1), f.agents["t"].NextWake(f.now+1), at)
			f.settle()
		}
	}
	finish := func(f *fed) {
		// o/1 ends: o starts o/2 if it still plans it.
		f.now = 1000
		f.settle()
		for _, n := range []string{"o", "t"} {
			if f.agents[n].jobs[o2] != nil && f.agents[n].jobs[o2].started {
				f.end(n, o2, true)
			}
		}
		f.now = 1200
		f.settle()
		if f.count(DecideStart, o2) != 1 {
			t.Fatalf("o/2 started %d times", f.count(DecideStart, o2))
		}
	}
	t.Run("agree", func(t *testing.T) {
		// The first agree comes after the taker's hold ran out and it
		// took the job again; its second take is lost.
		agree, take := &late{kind: KindAgree, from: "o", n: 1}, &late{kind: KindTake, from: "t", n: 2}
		f := newFed(t, Config{Name: "o", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF},
			Config{Name: "t", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF})
		f.submit("t", 1, 4, 100)
		f.submit("o", 1, 4, 1000)
		f.submit("o", 2, 2, 30)
		f.drop = net(f, agree, take)
		f.now = 100
		f.end("t", JobKey{"t", 1}, true)
		until(f, 300) // refused at 160, taken again at 220
		if len(take.msgs) != 1 || f.agents["t"].jobs[o2] == nil || f.agents["t"].jobs[o2].state != stateTaking {
			t.Fatalf("t did not take o/2 again: %v", f.kinds(o2))
		}
		deliver(f, agree)
		finish(f)
	})
	t.Run("refusal", func(t *testing.T) {
		// The taker's refusal of the first agree comes twice, the second
		// time while the origin hands the job over again; the taker's
		// agreed to that hand-over comes after it.
		agree, refusal, agreed := &late{kind: KindAgree, from: "o", n: 1}, &late{kind: KindAgreed, from: "t", n: 1, copy: true}, &late{kind: KindAgreed, from: "t", n: 2}
		f := newFed(t, Config{Name: "o", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF},
			Config{Name: "t", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF})
		f.submit("t", 1, 4, 100)
		f.submit("o", 1, 4, 1000)
		f.submit("o", 2, 2, 30)
		f.drop = net(f, agree, refusal, agreed)
		f.now = 100
		f.end("t", JobKey{"t", 1}, true)
		for len(agreed.msgs) == 0 && f.now < 600 {
			until(f, f.now+1)
		}
		if len(agreed.msgs) != 1 || f.starts[o2] != "t" {
			t.Fatalf("t did not take o/2 again by %d: %v, started at %q, %d held back", f.now, f.kinds(o2), f.starts[o2], len(agreed.msgs))
		}
		deliver(f, refusal)
		deliver(f, agreed)
		finish(f)
	})
}
