package site

import (
	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// pull is RQF's trigger: after a pass that leaves processors idle with
// nothing waiting here, ask the ranked peers for the jobs waiting in their
// queues. (The study's RQF also pulls when its own head is blocked, to
// backfill; testing every disclosed job against a long local queue made a
// replay of months too slow, so this RQF pulls only into an empty queue.)
func (a *Agent) pull(now int64) {
	free := IdleProcs(a.site, now)
	// At most one round per interval: a site with idle processors ticks
	// at every event, and each round discloses whole queues.
	if !PullDue(free, a.rqfAt, now, a.cfg.PullSeconds) {
		return
	}
	a.rqfAt = now
	ranked := PullRanking(a.cfg.Peers.Candidates(now), a.cfg.Name, a.rank.History(), a.cfg.Location, newRand(a.cfg.Seed, uint64(now)))
	for _, c := range ranked {
		a.send(Message{Kind: KindQueueRequest, To: c.Site, Spec: plan.Job{Procs: free}})
	}
}

// disclose answers a queue request with the jobs waiting here that the
// disclosure rule lets the asker see (Discloses), in queue order.
func (a *Agent) disclose(now int64, m Message) {
	a.pass(now)
	out := Message{Kind: KindQueue, To: m.From}
	a.ids = a.site.WaitingIDs(a.ids[:0])
	for _, id := range a.ids {
		jb := a.byID[id]
		if jb == nil || !Discloses(&a.rules, jb.key.Site, jb.route, jb.pj.Procs, m.From, m.Spec.Procs) {
			continue
		}
		spec := jb.pj
		spec.ID = 0
		out.Jobs = append(out.Jobs, QueuedJob{Job: jb.key, Spec: spec, Route: jb.route})
		if len(out.Jobs) == MaxDisclosed {
			break
		}
	}
	a.send(out)
}

// pick takes, from a peer's queue, every job this site's own policy would
// start now, holding its slot until the peer hands it over: the quote rule
// with start-now (MayHold, HoldFor), as the node's pick.
func (a *Agent) pick(now int64, m Message) {
	for _, q := range m.Jobs {
		if a.jobs[q.Job] != nil || a.site.Plan().Free(now) == 0 {
			continue
		}
		pj := q.Spec
		pj.ID = a.nextID()
		if MayHold(&a.rules, q.Route) != nil {
			continue
		}
		pl, _, r := HoldFor(a.site, &a.rules, now, pj, now+a.cfg.ReplySeconds, true)
		if r != nil {
			continue
		}
		jb := &job{key: q.Job, pj: pj, route: q.Route, place: pl, expires: now + a.cfg.ReplySeconds, from: m.From}
		a.add(jb)
		a.set(jb, stateTaking)
		a.send(Message{Kind: KindTake, To: m.From, Job: q.Job})
	}
}

// handOver gives a waiting job to the peer that asks to take it.
func (a *Agent) handOver(now int64, m Message) {
	a.pass(now)
	jb := a.jobs[m.Job]
	// The disclosure rule again: only a job the taker may see may be
	// taken (its free processors are its hold's business).
	if jb == nil || jb.state != stateLocal || jb.started || !Discloses(&a.rules, jb.key.Site, jb.route, jb.pj.Procs, m.From, jb.pj.Procs) ||
		!a.site.Cancel(now, jb.pj.ID) {
		a.send(Message{Kind: KindTaken, To: m.From, Job: m.Job, Reason: "the job no longer waits here"})
		return
	}
	if a.adm != nil {
		a.adm.Forget(jb.pj.ID) // it never ran here: nothing to learn
	}
	delete(a.byID, jb.pj.ID)
	a.set(jb, stateDelegated)
	jb.peer = m.From
	jb.route = jb.route.With(delegation.Hop{Site: m.From, Action: delegation.ActionDelegated, At: now,
		Reason: "taken from the queue by a peer that could start it now (RQF)"})
	a.decide(Decision{Kind: DecideDelegate, Job: jb.key, Placement: plan.Placement{Start: now, End: now + jb.pj.Estimate, Reason: plan.ReasonPlacedInFull},
		Peer: m.From, Route: jb.route, Spec: jb.pj})
	spec := jb.pj
	spec.ID = 0
	a.send(Message{Kind: KindTaken, To: m.From, Job: m.Job, Spec: spec, Route: jb.route})
}

// taken settles a take request: the job is accepted here, or the hold goes.
func (a *Agent) taken(now int64, m Message) {
	jb := a.jobs[m.Job]
	switch {
	case jb != nil && jb.state != stateTaking:
		return
	case m.Reason != "":
		if jb != nil {
			a.site.Unhold(now, jb.pj.ID)
			a.forget(jb)
		}
		return
	}
	route := m.Route.With(delegation.Hop{Site: a.cfg.Name, Action: delegation.ActionAccepted, At: now})
	if jb != nil {
		jb.route = route
		if _, err := a.site.Confirm(now, jb.pj.ID); err == nil {
			a.set(jb, stateLocal)
			a.decide(Decision{Kind: DecideAccept, Job: jb.key, Placement: jb.place, Peer: m.From, Route: jb.route, Spec: jb.pj})
			return
		}
		a.forget(jb)
	}
	// The hold ran out on the way (a tick may have dropped it already), or
	// a restart lost it: the peer has let the job go all the same, so this
	// site places it as any other, and owes the peer its outcome.
	jb = &job{key: m.Job, pj: m.Spec, route: route, from: m.From}
	jb.pj.ID = a.nextID()
	a.add(jb)
	a.admit(now, jb)
}
