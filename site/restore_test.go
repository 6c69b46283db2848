package site

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/swf"
)

// A replay for the restore property: agents wired as the simulator wires
// them (a virtual clock, an in-memory network with a latency, ties broken
// by sequence number), jobs that run their trace runtime or are killed at
// the end of their reservation, users who cancel some jobs, and a journal
// per agent as a driver's store. At one point it may crash one agent and
// put it back from its journal (Restore).

type evKind int

const (
	evEnd evKind = iota
	evMessage
	evSubmit
	evCancel
)

type event struct {
	at   int64
	kind evKind
	seq  int64
	site string
	key  JobKey
	job  plan.Job
	gen  int
	msg  Message
}

type events []*event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	if q[i].kind != q[j].kind {
		return q[i].kind < q[j].kind
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type logged struct {
	at   int64
	site string
	d    Decision
}

type running struct {
	site       string
	start, end int64 // end: the kill time
	gen        int
}

type replay struct {
	t        *testing.T
	cfgs     map[string]Config
	agents   map[string]*Agent
	journals map[string]*Journal
	order    []string
	runtime  map[JobKey]int64
	run      map[JobKey]*running
	q        events
	seq      int64
	latency  int64
	log      []logged
	starts   map[JobKey]int
	sent     map[string]int
	// loss: one message in loss is lost (0: none); salt picks which.
	loss, salt uint64
	lostN      int
	// dup: one message in dup comes a second time, up to three reply
	// periods late (0: none).
	dup  uint64
	dupN int
}

// replayView gives each agent the other agents' exact outlook, as the
// simulator does (rounded as gossip rounds it).
type replayView struct {
	r    *replay
	self string
}

func (v replayView) Candidates(now int64) []delegation.Candidate {
	return peersOf(v.r.agents, v.r.order, v.self, now, delegation.CoarseFree)
}

func (r *replay) push(e *event) {
	r.seq++
	e.seq = r.seq
	heap.Push(&r.q, e)
}

func (r *replay) drain(name string, now int64) {
	a := r.agents[name]
	rd := a.Ready()
	if err := r.journals[name].Record(a, rd, now); err != nil {
		r.t.Fatal(err)
	}
	for _, d := range rd.Decisions {
		r.log = append(r.log, logged{at: now, site: name, d: d})
		switch d.Kind {
		case DecideStart:
			r.starts[d.Job]++
			if r.run[d.Job] != nil {
				r.t.Fatalf("%v started at %s while it runs at %s", d.Job, name, r.run[d.Job].site)
			}
			// A conservative reservation agreed after its slot began starts
			// late: the process runs from now.
			r.run[d.Job] = &running{site: name, start: max(d.Start, now), end: d.End}
			r.schedule(d.Job)
		case DecideExtend:
			if rn := r.run[d.Job]; rn != nil {
				rn.end = d.End
				r.schedule(d.Job)
			}
		case DecideKill:
			if rn := r.run[d.Job]; rn != nil {
				rn.end = now
				r.schedule(d.Job)
			}
		}
	}
	for _, m := range rd.Messages {
		if late, ok := r.duplicated(m); ok {
			r.push(&event{at: now + r.latency + late, kind: evMessage, msg: m})
		}
		if r.lost(m) {
			continue
		}
		r.push(&event{at: now + r.latency, kind: evMessage, msg: m})
	}
}

// duplicated picks one message in r.dup to come twice, and how late its
// copy comes, as lost picks (by the message, never the order of sending).
func (r *replay) duplicated(m Message) (int64, bool) {
	if r.dup == 0 {
		return 0, false
	}
	id := fmt.Sprintf("dup %v %s %s %v", m.Kind, m.From, m.To, m.Job)
	r.sent[id]++
	h := fnv.New64a()
	fmt.Fprintf(h, "%s %d %d", id, r.sent[id], r.salt)
	x := h.Sum64()
	if x%r.dup != 0 {
		return 0, false
	}
	r.dupN++
	return int64(x/r.dup) % (3 * r.agents[m.From].cfg.ReplySeconds), true
}

// lost drops one message in r.loss: which one depends on the message,
// how often the same one was sent before and the salt, never on the order
// of sending, so that a crash does not change which messages are lost.
func (r *replay) lost(m Message) bool {
	if r.loss == 0 {
		return false
	}
	id := fmt.Sprintf("%v %s %s %v", m.Kind, m.From, m.To, m.Job)
	r.sent[id]++
	h := fnv.New64a()
	fmt.Fprintf(h, "%s %d", id, r.sent[id])
	if r.salt != 0 {
		fmt.Fprintf(h, " %d", r.salt)
	}
	if h.Sum64()%r.loss == 0 {
		r.lostN++
		return true
	}
	return false
}

// schedule (re)plans the end of a running job: its runtime, or its kill.
func (r *replay) schedule(key JobKey) {
	rn := r.run[key]
	rn.gen++
	at := min(rn.start+r.runtime[key], rn.end)
	r.push(&event{at: at, kind: evEnd, site: rn.site, key: key, gen: rn.gen})
}

func (r *replay) handle(e *event) {
	switch e.kind {
	case evEnd:
		rn := r.run[e.key]
		if rn == nil || rn.gen != e.gen {
			return
		}
		delete(r.run, e.key)
		completed := rn.start+r.runtime[e.key] <= e.at
		if !r.agents[rn.site].End(e.at, e.key, completed) {
			r.t.Fatalf("%s does not know the end of %v", rn.site, e.key)
		}
		r.drain(rn.site, e.at)
	case evMessage:
		r.agents[e.msg.To].Step(e.at, e.msg)
		r.drain(e.msg.To, e.at)
	case evSubmit:
		r.agents[e.site].Submit(e.at, e.key.ID, e.job)
		r.drain(e.site, e.at)
	case evCancel:
		r.agents[e.site].Cancel(e.at, e.key)
		r.drain(e.site, e.at)
	}
}

// tick lets every agent whose wake is due at now take it, until none is:
// first those whose wake, as of the step before (prev), is now.
func (r *replay) tick(now int64, wakes map[string]int64) {
	for range 1000 {
		ticked := false
		for _, n := range r.order {
			if a := r.agents[n]; wakes[n] <= now || a.NextWake(now) <= now {
				wakes[n] = plan.Forever
				a.Tick(now)
				r.drain(n, now)
				ticked = true
			}
		}
		if !ticked {
			return
		}
	}
	r.t.Fatal("the agents do not settle")
}

// play runs the replay to its end; after the step that handles the
// crashAt-th event (if > 0), the agent crash is put back from its journal
// by restore, which returns the jobs it names as lost.
func (r *replay) play(crashAt int, crash string, restore func(r *replay, name string, now int64)) {
	n := 0
	var cur int64 // the time of the last step
	for steps := 0; ; steps++ {
		if steps > 1e6 {
			var busy []string
			for _, name := range r.order {
				for k, jb := range r.agents[name].jobs {
					busy = append(busy, fmt.Sprintf("%s: %v state %d peer %q", name, k, jb.state, jb.peer))
				}
			}
			slices.Sort(busy)
			r.t.Fatalf("the replay does not end: %d jobs left %.200v", len(busy), busy)
		}
		now := int64(plan.Forever)
		if len(r.q) > 0 {
			now = r.q[0].at
		}
		wakes := map[string]int64{}
		for _, name := range r.order {
			wakes[name] = r.agents[name].NextWake(cur)
			now = min(now, wakes[name])
		}
		cur = now
		if now == plan.Forever || len(r.q) == 0 && !slices.ContainsFunc(r.order, func(n string) bool { return r.agents[n].Busy() }) {
			return // (an idle RQF site would ask for work for ever)
		}
		for len(r.q) > 0 && r.q[0].at == now {
			r.handle(heap.Pop(&r.q).(*event))
			n++
		}
		r.tick(now, wakes)
		if crashAt > 0 && n >= crashAt {
			restore(r, crash, now)
			crashAt = 0
		}
	}
}

// restartAgent is the crash: the agent's memory is gone; what its
// journal kept brings it back.
func restartAgent(r *replay, name string, now int64) {
	a, err := Restore(r.cfgs[name], now, r.journals[name].Saved())
	if err != nil {
		r.t.Fatal(err)
	}
	r.agents[name] = a
	r.drain(name, now)
}

// restoreWorkload is a KTH slice over three sites: one that overbooks
// (conservative, heuristic PoF, trained on the jobs before the slice),
// two EASY sites; all ACF. Every job has a deadline at twice its
// estimate after its submission, and a few are cancelled by their users.
func restoreWorkload(t *testing.T, seed uint64, transfer delegation.TransferMode) (*replay, []*event) {
	t.Helper()
	tr, err := swf.ReadFile("../traces/KTH-SP2-1996-2.1-cln.swf.gz", swf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	var usable []swf.Job
	for _, j := range tr.Jobs {
		if j.ReqTime > 0 && j.Runtime > 0 && j.Procs() > 0 && j.Procs() <= 32 {
			usable = append(usable, j)
		}
	}
	from := 2000 + rng.IntN(len(usable)-4000)
	var past []PastJob
	for _, j := range usable[from-150 : from] {
		past = append(past, PastJob{Job: overbook.JobInfo{Procs: int(j.Procs()), Estimate: j.ReqTime}, Ran: min(j.Runtime, j.ReqTime)})
	}
	cfgs := []Config{
		{Name: "a", Procs: 32, Policy: plan.Conservative, TrackMoves: true, NoGrowBack: true,
			Overbooking: &Overbooking{Mode: overbook.Heuristic, Test: overbook.Threshold{PoFMax: 0.2}, History: past, AgeFactor: 0.9}},
		{Name: "b", Procs: 48, Policy: plan.EASY},
		{Name: "c", Procs: 16, Policy: plan.EASY},
	}
	r := &replay{t: t, cfgs: map[string]Config{}, agents: map[string]*Agent{}, journals: map[string]*Journal{},
		runtime: map[JobKey]int64{}, run: map[JobKey]*running{}, latency: 2, starts: map[JobKey]int{}, sent: map[string]int{},
		loss: 8}
	for _, c := range cfgs {
		c.Peers = replayView{r: r, self: c.Name}
		c.Transfer = transfer
		c.Seed = seed
		a, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		r.cfgs[c.Name], r.agents[c.Name], r.journals[c.Name] = c, a, NewJournal()
		r.order = append(r.order, c.Name)
	}
	var subs []*event
	t0 := usable[from].Submit
	for i, j := range usable[from : from+300] {
		name := r.order[i%3]
		at := (j.Submit - t0) / 3 // three times the load
		key := JobKey{Site: name, ID: int64(i + 1)}
		est := j.ReqTime
		pj := plan.Job{Procs: int(j.Procs()), Estimate: est, Release: at, Deadline: at + 2*est + 600, Fee: 10, Penalty: 5}
		r.runtime[key] = j.Runtime
		subs = append(subs, &event{at: at, kind: evSubmit, site: name, key: key, job: pj})
		if rng.IntN(25) == 0 {
			subs = append(subs, &event{at: at + rng.Int64N(2*est+1), kind: evCancel, site: name, key: key})
		}
	}
	return r, subs
}

func (r *replay) start(subs []*event) {
	for _, e := range subs {
		c := *e
		r.push(&c)
	}
}

// TestRestoreContinuesAsIfNoCrash is the restore property: one agent
// crashes at a random step of a replay and is rebuilt from its journal
// (what a driver persists of its decisions, Saved); the replay goes on,
// losing one message in 8 throughout. When the crashed agent held no
// slot for a peer and negotiated nothing at that moment, every later
// decision of every agent equals the uninterrupted replay's: same kind,
// job, time, site, placement, route. When it did, that is what a restart
// loses (Restore's list): the processors its holds kept are free again at
// once, so its plan and the outlook its peers see differ from then on,
// and any later decision may; for those crashes the test checks that the
// replays agree up to the crash and that the federation still ends clean
// (no hold left, nothing owed, every job decided, none started twice).
func TestRestoreContinuesAsIfNoCrash(t *testing.T) {
	crashTrials(t, delegation.ACF, 8, true)
}

// TestRestoreContinuesAsIfNoCrashRQF is the same property under RQF,
// losing one message in 8 as well (the hand-over is two-phase: an agree
// to the taker's hold, resent until answered): an idle site's last round
// (Ready.PulledAt) is kept. (A hand-over settles within a few latencies,
// so a crash seldom finds one in flight: busy crashes are not required
// here.)
func TestRestoreContinuesAsIfNoCrashRQF(t *testing.T) {
	crashTrials(t, delegation.RQF, 4, false)
}

// playClean plays the KTH replay of seed (restoreWorkload) with what set
// changes in it (its losses), to its end, and checks that it ends clean.
func playClean(t *testing.T, seed uint64, transfer delegation.TransferMode, set func(r *replay)) *replay {
	r, subs := restoreWorkload(t, seed, transfer)
	set(r)
	r.start(subs)
	r.play(0, "", nil)
	checkClean(t, r)
	return r
}

// TestLossLosesNoJob is the hand-over's property: federation replays
// (the KTH slices of the restore property, six workloads) losing one
// message in 2, 3, 5 or 8, each loss pattern its own, under RQF and under
// ACF: at the end no job is lost (every job decided, and every origin's
// delegated jobs reported back), none started twice, nothing is owed or
// held. Under RQF it checks that hand-overs were made and that some came
// back to their origin (a lost agree: the taker's hold ran out).
func TestLossLosesNoJob(t *testing.T) {
	for _, transfer := range []delegation.TransferMode{delegation.RQF, delegation.ACF} {
		var lost, handOvers, back int
		for seed := uint64(1); seed <= 6; seed++ {
			for _, loss := range []uint64{2, 3, 5, 8} {
				r := playClean(t, seed, transfer, func(r *replay) { r.loss, r.salt = loss, seed*31+loss })
				lost += r.lostN
				agreed := map[JobKey]bool{}
				for _, l := range r.log {
					switch {
					case l.d.Kind == DecideAgree && l.d.HandOver:
						handOvers++
						agreed[l.d.Job] = true
					case l.d.Kind == DecideAccept && l.d.Job.Site == l.site && agreed[l.d.Job]:
						back++ // refused: back in its origin's plan
						delete(agreed, l.d.Job)
					}
				}
			}
		}
		t.Logf("%v: %d messages lost; %d hand-overs, %d came back to their origin", transfer, lost, handOvers, back)
		if lost == 0 || transfer == delegation.RQF && (handOvers == 0 || back == 0) {
			t.Fatalf("%v: the replays did not lose what the property is about", transfer)
		}
	}
}

// TestLateCopiesRunNoJobTwice is the same property when messages also
// come twice, the copy late (up to three reply periods): every message is
// idempotent, and one about an earlier negotiation of the same job (an
// agree or a refusal of an earlier RQF hand-over to the same taker, a
// quote, a queue) settles nothing. One message in 8 is lost, and one in
// 3 or 5 comes twice.
func TestLateCopiesRunNoJobTwice(t *testing.T) {
	for _, transfer := range []delegation.TransferMode{delegation.RQF, delegation.ACF} {
		var dups int
		for seed := uint64(1); seed <= 6; seed++ {
			for _, dup := range []uint64{3, 5} {
				dups += playClean(t, seed, transfer, func(r *replay) { r.dup, r.salt = dup, seed*37+dup }).dupN
			}
		}
		t.Logf("%v: %d messages came twice", transfer, dups)
		if dups == 0 {
			t.Fatalf("%v: no message came twice", transfer)
		}
	}
}

func crashTrials(t *testing.T, transfer delegation.TransferMode, seeds uint64, needBusy bool) {
	quiet, busy := 0, 0
	for seed := uint64(1); seed <= seeds; seed++ {
		base, subs := restoreWorkload(t, seed, transfer)
		base.start(subs)
		base.play(0, "", nil)
		checkClean(t, base)
		events := int(base.seq)
		rng := rand.New(rand.NewPCG(seed, 11))
		for trial := range 10 {
			crash := base.order[rng.IntN(3)]
			at := 1 + rng.IntN(events*2/3)
			name := fmt.Sprintf("seed %d trial %d: %s at event %d", seed, trial, crash, at)
			r, subs := restoreWorkload(t, seed, transfer)
			r.start(subs)
			var lost []JobKey
			var crashed int
			r.play(at, crash, func(r *replay, name string, now int64) {
				crashed = len(r.log)
				for k := range r.agents[name].waits {
					lost = append(lost, k)
				}
				restartAgent(r, name, now)
			})
			if testing.Verbose() {
				t.Log(name)
			}
			checkClean(t, r)
			first := firstDifference(base.log, r.log)
			if first != -1 && first < crashed {
				t.Fatalf("%s: the replays differ before the crash (decision %d of %d)", name, first, crashed)
			}
			if len(lost) == 0 {
				quiet++
				if first != -1 {
					t.Fatalf("%s: nothing in flight, yet decision %d differs: %s", name, first, describe(base.log, r.log, first))
				}
				continue
			}
			busy++
		}
	}
	t.Logf("%d crashes with nothing in flight (identical replays), %d with negotiations lost", quiet, busy)
	if quiet == 0 || busy == 0 && needBusy {
		t.Fatalf("the crashes did not cover both cases: %d quiet, %d busy", quiet, busy)
	}
}

func firstDifference(a, b []logged) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i].at != b[i].at || a[i].site != b[i].site || !reflect.DeepEqual(a[i].d, b[i].d) {
			return i
		}
	}
	return -1
}

func describe(a, b []logged, i int) string {
	s := func(l []logged) string {
		if i >= len(l) {
			return "(none)"
		}
		return fmt.Sprintf("at %d %s %v %v %+v", l[i].at, l[i].site, l[i].d.Kind, l[i].d.Job, l[i].d.Placement)
	}
	return "uninterrupted " + s(a) + ", restored " + s(b)
}

// checkClean: at the end every agent has settled everything, and every
// job has a fate at its origin.
func checkClean(t *testing.T, r *replay) {
	t.Helper()
	for _, n := range r.order {
		a := r.agents[n]
		if a.Busy() || a.Site().Holds() != 0 {
			var left []string
			for k, jb := range a.jobs {
				left = append(left, fmt.Sprintf("%v state %d started %v cancelled %v peer %q", k, jb.state, jb.started, jb.cancelled, jb.peer))
			}
			for _, k := range slices.Collect(maps.Keys(a.jobs)) {
				for _, l := range r.log {
					if l.d.Job == k {
						t.Logf("at %d %s %v %v peer %q", l.at, l.site, l.d.Kind, l.d.Job, l.d.Peer)
					}
				}
			}
			t.Fatalf("%s is not clean at the end: jobs %v, %d owed, %d holds", n, left, len(a.owed), a.Site().Holds())
		}
	}
	for k, n := range r.starts {
		if n > 1 {
			t.Fatalf("job %v started %d times", k, n)
		}
	}
	fate := map[JobKey]bool{}
	for _, l := range r.log {
		switch l.d.Kind {
		case DecideReject, DecideEnd, DecideCancel, DecideExpire:
			fate[l.d.Job] = true
		}
	}
	for k := range r.runtime {
		if !fate[k] {
			t.Fatalf("job %v was never decided", k)
		}
	}
}

// TestRestoreKeepsQueueOrder: the plan's queue order is the order jobs
// joined it, not their ids: a peer's job held before a local submission
// but agreed after it comes after it, and a restored site re-plans in
// that order (the local job gets the slot a running job's early end
// frees).
func TestRestoreKeepsQueueOrder(t *testing.T) {
	cfg := Config{Name: "b", Procs: 4, Policy: plan.Conservative}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j := NewJournal()
	step := func(now int64) {
		a.Tick(now)
		if err := j.Record(a, a.Ready(), now); err != nil {
			t.Fatal(err)
		}
	}
	a.Submit(0, 1, plan.Job{Procs: 4, Estimate: 1000, Deadline: plan.Forever}) // runs 0..1000
	step(0)
	peer := JobKey{"a", 1}
	a.Step(0, Message{Kind: KindQuoteRequest, From: "a", To: "b", Job: peer, Spec: plan.Job{Procs: 3, Estimate: 500, Deadline: plan.Forever},
		Route: delegation.Route{{Site: "a", Action: delegation.ActionSubmitted}}, HoldSeconds: 60})
	step(0)
	a.Submit(1, 2, plan.Job{Procs: 3, Estimate: 500, Release: 1, Deadline: plan.Forever}) // after the hold: 1500..2000
	step(1)
	a.Step(2, agreeTo(a, "a", peer))
	step(2)
	b, err := Restore(cfg, 2, j.Saved())
	if err != nil {
		t.Fatal(err)
	}
	var got [2][]Decision
	for i, ag := range []*Agent{a, b} {
		ag.End(100, JobKey{"b", 1}, true)
		ag.Tick(100)
		got[i] = ag.Ready().Decisions
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Fatalf("after the restore the early end decides %+v, without it %+v", got[1], got[0])
	}
	if i := slices.IndexFunc(got[0], func(d Decision) bool { return d.Kind == DecideStart }); i < 0 || got[0][i].Job != (JobKey{"b", 2}) {
		t.Fatalf("the freed slot did not go to the job first in the queue: %+v", got[0])
	}
}

// staticView offers fixed candidates.
type staticView []delegation.Candidate

func (v staticView) Candidates(int64) []delegation.Candidate { return v }

// journaled is an agent whose every batch goes into a journal; the
// messages of the last batch are kept.
type journaled struct {
	t   *testing.T
	a   *Agent
	j   *Journal
	out []Message
}

func (x *journaled) flush(now int64) {
	r := x.a.Ready()
	if err := x.j.Record(x.a, r, now); err != nil {
		x.t.Fatal(err)
	}
	x.out = r.Messages
}

// TestRestoreResendsOwedOnTheirGrid: what is owed (a report to an
// origin, a Terminate to a peer) is resent after a restart on the grid it
// was on, every reply period from when it became owed; and a restart
// later than a queue's expiry runs the pass it missed at once.
func TestRestoreResendsOwedOnTheirGrid(t *testing.T) {
	t.Run("report", func(t *testing.T) {
		cfg := Config{Name: "big", Procs: 16, Policy: plan.EASY}
		a, _ := New(cfg)
		x := &journaled{t: t, a: a, j: NewJournal()}
		key := JobKey{"small", 1}
		a.Step(0, Message{Kind: KindQuoteRequest, From: "small", To: "big", Job: key, Spec: plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever},
			Route: delegation.Route{{Site: "small", Action: delegation.ActionSubmitted}}, StartNow: true})
		a.Step(0, agreeTo(a, "small", key))
		a.Tick(0)
		x.flush(0)
		a.End(100, key, true) // its report is lost
		x.flush(100)
		b, err := Restore(cfg, 190, x.j.Saved())
		if err != nil {
			t.Fatal(err)
		}
		b.Tick(190)
		if r := b.Ready(); len(r.Messages) != 0 {
			t.Fatalf("resent at once: %+v", r.Messages)
		}
		if w := b.NextWake(190); w != 220 {
			t.Fatalf("next resend at %d, want 220 (owed since 100, every 60 s)", w)
		}
		b.Tick(220)
		if r := b.Ready(); len(r.Messages) != 1 || r.Messages[0].Kind != KindReport || r.Messages[0].Outcome.End != 100 {
			t.Fatalf("at 220: %+v", r.Messages)
		}
	})
	t.Run("terminate", func(t *testing.T) {
		cfg := Config{Name: "small", Procs: 2, Policy: plan.EASY, Peers: staticView{{Site: "big", Procs: 16, FreeNow: 16, Free1h: 16, Free4h: 16, Free24h: 16}}}
		a, _ := New(cfg)
		x := &journaled{t: t, a: a, j: NewJournal()}
		key := JobKey{"small", 1}
		a.Submit(0, 1, plan.Job{Procs: 4, Estimate: 1000, Deadline: plan.Forever}) // too wide here: offered
		x.flush(0)
		a.Step(0, Message{Kind: KindQuote, From: "big", To: "small", Job: key, Offer: &Offer{Quote: delegation.Quote{Site: "big", HoldID: "h", Start: 0, End: 1000, Expires: 60}}})
		a.Step(0, Message{Kind: KindAgreed, From: "big", To: "small", Job: key, Offer: &Offer{Quote: delegation.Quote{Site: "big", HoldID: "h", Start: 0, End: 1000}}})
		x.flush(0)
		a.Cancel(10, key) // its Terminate is lost
		x.flush(10)
		if len(x.out) != 1 || x.out[0].Kind != KindTerminate {
			t.Fatalf("no Terminate sent: %+v", x.out)
		}
		b, err := Restore(cfg, 100, x.j.Saved())
		if err != nil {
			t.Fatal(err)
		}
		if w := b.NextWake(100); w != 100 {
			t.Fatalf("a restored agent wakes at %d, want a pass at once", w)
		}
		b.Tick(100)
		b.Ready()
		if w := b.NextWake(100); w != 130 {
			t.Fatalf("next resend at %d, want 130 (owed since 10, every 60 s)", w)
		}
		b.Tick(130)
		if r := b.Ready(); len(r.Messages) != 1 || r.Messages[0].Kind != KindTerminate || r.Messages[0].To != "big" {
			t.Fatalf("at 130: %+v", r.Messages)
		}
		b.Step(132, Message{Kind: KindTerminated, From: "big", To: "small", Job: key})
		if r := b.Ready(); len(r.Decisions) != 1 || r.Decisions[0].Kind != DecideAcked {
			t.Fatalf("the acknowledgement: %+v", r.Decisions)
		}
		b.Step(140, Message{Kind: KindReport, From: "big", To: "small", Job: key, Outcome: Outcome{Start: 0, End: 12, Cancelled: true}})
		if r := b.Ready(); len(r.Decisions) != 1 || r.Decisions[0].Kind != DecideOutcome || b.Busy() {
			t.Fatalf("the report: %+v, busy %v", r.Decisions, b.Busy())
		}
	})
	t.Run("expiry missed while down", func(t *testing.T) {
		cfg := Config{Name: "s", Procs: 2, Policy: plan.EASY}
		a, _ := New(cfg)
		x := &journaled{t: t, a: a, j: NewJournal()}
		a.Submit(0, 1, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
		a.Submit(0, 2, plan.Job{Procs: 2, Estimate: 100, Deadline: 500}) // must start by 400
		a.Tick(0)
		x.flush(0)
		b, err := Restore(cfg, 600, x.j.Saved())
		if err != nil {
			t.Fatal(err)
		}
		if w := b.NextWake(600); w != 600 {
			t.Fatalf("a restored agent wakes at %d, want a pass at once", w)
		}
		b.Tick(600)
		if r := b.Ready(); len(r.Decisions) != 1 || r.Decisions[0].Kind != DecideExpire || r.Decisions[0].Job != (JobKey{"s", 2}) {
			t.Fatalf("at 600: %+v", r.Decisions)
		}
	})
}

// TestRestoreKeepsLastPull: an idle RQF site restored within an interval
// of its last round does not ask its peers again before the interval is
// over (Ready.PulledAt is kept).
func TestRestoreKeepsLastPull(t *testing.T) {
	cfg := Config{Name: "idle", Procs: 4, Policy: plan.EASY, Transfer: delegation.RQF,
		Peers: staticView{{Site: "busy", Procs: 4}}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := &journaled{t: t, a: a, j: NewJournal()}
	a.Tick(100) // idle and never asked: it asks now
	x.flush(100)
	if len(x.out) != 1 || x.out[0].Kind != KindQueueRequest {
		t.Fatalf("no round at 100: %+v", x.out)
	}
	b, err := Restore(cfg, 130, x.j.Saved())
	if err != nil {
		t.Fatal(err)
	}
	b.Tick(130)
	if r := b.Ready(); len(r.Messages) != 0 {
		t.Fatalf("a restored site asked again within the interval: %+v", r.Messages)
	}
	if w, want := b.NextWake(130), NextPull(4, 100, 130, 60, PullOffset("idle", 60)); w != want || w < 160 {
		t.Fatalf("next round at %d, want %d (not before 160)", w, want)
	}
}

// TestJournalStartedLate: a journal that starts after the agent did
// (a driver that began persisting later) skips decisions about jobs it
// never saw instead of failing.
func TestJournalStartedLate(t *testing.T) {
	a, _ := New(Config{Name: "s", Procs: 1, Policy: plan.EASY})
	a.Submit(0, 1, plan.Job{Procs: 1, Estimate: 10, Deadline: plan.Forever})
	a.Ready() // not journaled
	j := NewJournal()
	a.Tick(0)
	a.Cancel(1, JobKey{"s", 1})
	a.Tick(1)
	if err := j.Record(a, a.Ready(), 1); err != nil {
		t.Fatal(err)
	}
	if len(j.Saved().Jobs) != 0 {
		t.Fatalf("the journal made up a job: %+v", j.Saved().Jobs)
	}
}

// TestRestoreAnswersARepeatedAgreeAsBefore: a peer restarted after it
// accepted a job answers its origin's repeated agree (the first answer was
// lost) with the offer it agreed to, price included: the origin's
// delegation and the peer's accept then name the same price.
func TestRestoreAnswersARepeatedAgreeAsBefore(t *testing.T) {
	cfg := Config{Name: "peer", Procs: 8, Policy: plan.Conservative, Pricing: delegation.LibraPlus{PBase: 1, Alpha: 1, Beta: 1}}
	a, _ := New(cfg)
	x := &journaled{t: t, a: a, j: NewJournal()}
	key := JobKey{"origin", 1}
	a.Step(0, Message{Kind: KindQuoteRequest, From: "origin", To: "peer", Job: key, Spec: plan.Job{Procs: 2, Estimate: 3600, Deadline: 20000},
		Route: delegation.Route{{Site: "origin", Action: delegation.ActionSubmitted}}})
	agree := agreeTo(a, "origin", key)
	a.Step(1, agree)
	x.flush(1)
	first := x.out[len(x.out)-1]
	if first.Kind != KindAgreed || first.Offer == nil || first.Offer.Price <= 0 {
		t.Fatalf("no priced agreement: %+v", x.out)
	}
	b, err := Restore(cfg, 10, x.j.Saved())
	if err != nil {
		t.Fatal(err)
	}
	b.Ready()
	b.Step(10, agree)
	r := b.Ready()
	if len(r.Messages) != 1 || r.Messages[0].Offer == nil {
		t.Fatalf("the repeated agree: %+v", r.Messages)
	}
	if got, want := r.Messages[0].Offer.Quote, first.Offer.Quote; got.Price != want.Price || got.Start != want.Start || got.End != want.End || got.HoldID != want.HoldID {
		t.Fatalf("after the restart the agreement is %+v, before it was %+v", got, want)
	}
}
