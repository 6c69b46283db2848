package site

import (
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
// start now, holding its slot until the peer agrees to the hold (agree) or
// refuses the take (taken): the quote rule with start-now (MayHold,
// HoldFor), as the node's pick.
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
		jb := &job{key: q.Job, pj: pj, route: q.Route, place: pl, expires: now + a.cfg.ReplySeconds, from: m.From, holdID: holdName(q.Job, pj.ID)}
		a.add(jb)
		a.set(jb, stateTaking)
		a.send(Message{Kind: KindTake, To: m.From, Job: q.Job, HoldID: jb.holdID})
	}
}

// reasonTaken is the route's reason for a job handed over under RQF.
const reasonTaken = "taken from the queue by a peer that could start it now (RQF)"

// handOver answers a peer's take, the first phase of RQF's hand-over: a
// job that waits here and that the taker may see leaves the plan, and
// this site agrees to the taker's hold, written ahead (DecideAgree with
// HandOver) and resent until the taker answers, as any agree. Only the
// taker's agreed makes the job its own (DecideDelegate); its refusal (the
// hold ran out, or a restart lost it) brings the job back here, to be
// placed again (KindAgreed). A lost message at either step leaves the job
// at one site: a lost take or refusal lets the hold run out; a lost agree
// or agreed is resent; and a report that comes first settles the agree
// (the lost-agreed race, as under ACF). A job that no longer waits here is
// refused (taken, with its reason).
func (a *Agent) handOver(now int64, m Message) {
	a.pass(now)
	jb := a.jobs[m.Job]
	if jb != nil && jb.state == stateAgreeing && jb.handOver && jb.peer == m.From && jb.holdID == m.HoldID {
		a.send(Message{Kind: KindAgree, To: m.From, Job: m.Job, HoldID: m.HoldID}) // a repeated take
		return
	}
	// The disclosure rule again: only a job the taker may see may be
	// taken (its free processors are its hold's business).
	if jb == nil || jb.state != stateLocal || jb.started || !Discloses(&a.rules, jb.key.Site, jb.route, jb.pj.Procs, m.From, jb.pj.Procs) ||
		!a.site.Cancel(now, jb.pj.ID) {
		a.send(Message{Kind: KindTaken, To: m.From, Job: m.Job, HoldID: m.HoldID, Reason: "the job no longer waits here"})
		return
	}
	if a.adm != nil {
		a.adm.Forget(jb.pj.ID) // it never ran here: nothing to learn
	}
	// What is agreed to: a slot that starts now at the taker (its hold
	// was made with start-now); RQF does not price.
	jb.handOver, jb.peer, jb.holdID, jb.rounds = true, m.From, m.HoldID, nil
	jb.place, jb.price = plan.Placement{Start: now, End: now + jb.pj.Estimate, Reason: plan.ReasonPlacedInFull}, 0
	jb.deadline = now + a.cfg.ReplySeconds
	a.set(jb, stateAgreeing)
	a.decide(Decision{Kind: DecideAgree, Job: jb.key, Peer: m.From, Placement: jb.place, HandOver: true, HoldID: m.HoldID})
	a.send(Message{Kind: KindAgree, To: m.From, Job: m.Job, HoldID: m.HoldID})
}

// taken is the origin's refusal of a take (the job no longer waits
// there): the hold goes. (The hand-over itself comes as an agree.)
func (a *Agent) taken(now int64, m Message) {
	if jb := a.jobs[m.Job]; jb != nil && jb.state == stateTaking && jb.from == m.From && jb.holdID == m.HoldID && m.Reason != "" {
		a.site.Unhold(now, jb.pj.ID)
		a.forget(jb)
	}
}
