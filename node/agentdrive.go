package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// The node as the site agent's driver (docs/architecture.md, "The node as
// the agent's driver"), its local part: a node hands every decision about
// its own jobs, its operators' fixed and standing reservations and the
// processors its batch system takes out of service to a site.Agent it
// owns, and writes the agent's decisions to its records (applyReady); the
// federation's part is agentfed.go.
//
// The node's plan is the agent's (n.site is n.agent.Site(), read by the
// status, explain and reservation-conflict code), and so are the runtime
// statistics (n.stats is n.agent.Stats(): the agent learns them).

// restoreWait bounds how long a restarting node waits for gossip to know
// a peer before it restores offers in flight (awaitPeers).
const restoreWait = 10 * time.Second

// startAgent builds the node's agent from what recovery left in the store
// (savedFromStore, site.Restore) and makes its plan and statistics the
// node's. Recovery's own changes are committed before.
func (n *Node) startAgent(ctx context.Context, now int64) error {
	saved, err := savedFromStore(ctx, n.deps.Store, n.cfg.Site)
	if err != nil {
		return fmt.Errorf("site agent: %w", err)
	}
	if n.federating() && inFlight(saved) {
		n.awaitPeers(ctx, restoreWait)
	}
	// The statistics as recovery left them: a first start has trained
	// them on overbooking.history without storing them yet.
	if saved.Stats, err = n.stats.MarshalJSON(); err != nil {
		return fmt.Errorf("site agent: statistics: %w", err)
	}
	// A stored fixed reservation that recovery could not lay (the site
	// restarted smaller, or work is in its way: reservations.unfit) is
	// kept as a record only, out of the plan: listed with its problem,
	// deletable, tried again at the next restart.
	for id, f := range saved.Reservations {
		if slices.ContainsFunc(n.resv.unfit, func(u *fixedRes) bool { return u.id == f.Name }) {
			delete(saved.Reservations, id)
		}
	}
	// The standing rules come from the store (saved.Standing), as the
	// ones added at run time: the agent lays their instances again.
	cfg := n.agentConfig(nil)
	cfg.Standing = nil
	a, err := site.Restore(cfg, now, saved)
	if err != nil {
		return err
	}
	if a.NextID() != int64(n.nextSeq)+1 {
		return fmt.Errorf("site agent: next id %d, the node's %d: %w", a.NextID(), n.nextSeq+1, ErrInvalidRequest)
	}
	// The fixed reservations and the rules' instances are the agent's
	// now, under its ids.
	clear(n.resv.byCore)
	for id, f := range saved.Reservations {
		fr := n.resv.fixed[f.Name]
		if fr == nil {
			return fmt.Errorf("site agent: reservation %s not recovered: %w", f.Name, ErrInvalidRequest)
		}
		fr.core = id
		n.resv.byCore[id] = f.Name
	}
	for _, s := range n.resv.rules {
		clear(s.inst)
		s.skipped = 0
	}
	n.agent, n.site, n.stats = a, a.Site(), a.Stats()
	if n.adm != nil {
		n.adm.Stats = a.Stats()
	}
	return n.applyReady(ctx, now, a.Ready())
}

// keyOf is the agent's key of one of the site's own jobs.
// A peer's job is known to the agent by its origin's key (its agreement's
// job).
func (n *Node) keyOf(lj *liveJob) site.JobKey {
	if o := lj.peek().GetOriginSite(); o != "" && o != n.cfg.Site {
		if a := n.peerAgreement(lj.seq); a != nil {
			if k, err := keyOfID(a.JobID); err == nil {
				return k
			}
		}
	}
	return site.JobKey{Site: n.cfg.Site, ID: lj.seq}
}

// agentSubmit admits a job through the agent: its accept or reject is
// written as today's admission writes it. lj is not live yet.
func (n *Node) agentSubmit(lj *liveJob, now int64) error {
	if id := n.agent.NextID(); id != lj.seq {
		return fmt.Errorf("site agent: job %d submitted, the agent's next id is %d: %w", lj.seq, id, ErrUnavailable)
	}
	n.born = lj
	defer func() { n.born = nil }()
	n.agent.Submit(now, lj.seq, lj.pj)
	return n.applyReady(context.Background(), now, n.agent.Ready())
}

// agentTick is the scheduling pass of a node that drives its agent: the
// agent's Tick, its starts made durable first (as pass does).
func (n *Node) agentTick(ctx context.Context, now int64, replies func(error)) error {
	if !n.agent.Stepped() && n.coreWake > now && n.agent.StandingWake() > now {
		// Nothing happened to the site and nothing is due: a turn that
		// only read (a status, a listing) is no event, as in the
		// simulator (an idle RQF site would ask for work at it).
		return nil
	}
	n.agent.Tick(now)
	r := n.agent.Ready()
	if slices.ContainsFunc(r.Decisions, func(d site.Decision) bool { return d.Kind == site.DecideStart }) {
		err := n.commit(ctx)
		replies(err)
		if err != nil {
			return err
		}
	}
	return n.applyReady(ctx, now, r)
}

// applyReady writes a batch of the agent's decisions to the node's
// records and carries them out. The decisions that answer a node op (the
// end of a job, a cancel and its kill) are written by that op, which
// called the agent; here they need nothing more.
func (n *Node) applyReady(ctx context.Context, now int64, r site.Ready) error {
	defer n.agent.Recycle(r)
	if r.Learnt {
		n.pending.stats = true
	}
	if len(r.Messages) > 0 && !n.federating() {
		// An agree restored for a job a peer may have taken, on a node
		// restarted without federation: resent until federation is back.
		n.log.Warn("federation is off: the site agent's messages are not sent", "messages", len(r.Messages), "kind", r.Messages[0].Kind.String(), "to", r.Messages[0].To)
		r.Messages = r.Messages[:0]
	}
	if n.pending.empty() == false && slices.ContainsFunc(r.Decisions, func(d site.Decision) bool { return d.Kind == site.DecideStart }) {
		// A start outside the pass (a peer's request passes first): the
		// batch's records are durable before any process runs.
		if err := n.commit(ctx); err != nil {
			return err
		}
	}
	n.rqf.last = r.PulledAt
	// One counter names the site's jobs, its peers' jobs and its holds:
	// the agent's (a hold given a quote takes an id too).
	n.nextSeq = max(n.nextSeq, uint64(r.Seq))
	n.queueOut(now, r.Messages)
	var displaced []plan.Displaced
	var reserve string
	terminated := map[site.JobKey]bool{}
	for _, d := range r.Decisions {
		lj := n.liveOf(d.Job)
		if b := n.born; b != nil && d.Job == n.keyOf(b) {
			lj = b
		}
		if fed, err := n.applyFed(d, lj, now); fed {
			if err != nil {
				return err
			}
			continue
		}
		switch d.Kind {
		case site.DecideAccept:
			if d.Job.Site != n.cfg.Site {
				if err := n.peerAccepted(d, now); err != nil {
					return err
				}
				continue
			}
			if done, err := n.admitted(lj, d, now); err != nil {
				return err
			} else if done {
				continue
			}
			n.acceptLocal(lj, d.Placement, now)
		case site.DecideReject:
			if d.Job.Site != n.cfg.Site {
				// A peer's job handed over after its hold ran out, that
				// this site could not place: its origin gets a report.
				continue
			}
			if done, err := n.admitted(lj, d, now); err != nil {
				return err
			} else if done {
				continue
			}
			reason, msg := rejectReason(d.Placement, lj.pj, n.cfg.Site, now)
			lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_REJECTED, reason, msg, now)
		case site.DecideStart:
			if lj != nil {
				n.start(ctx, lj, plan.Decision{Kind: plan.DecideStart, JobID: lj.seq, Start: d.Start, End: d.End}, now)
			}
		case site.DecideExpire:
			if lj != nil {
				n.expire(lj, now)
			}
		case site.DecideMove:
			if lj != nil && lj.job().GetState() == fedschedv1.JobState_JOB_STATE_PENDING {
				n.moved(lj, d.Placement, now)
			}
		case site.DecideDisplaced:
			if lj != nil {
				// The slot it was displaced from: its reservation, or
				// where an earlier instance in this batch placed it.
				was := plan.Placement{Start: lj.job().GetReservation().GetStart().AsTime().Unix()}
				for _, e := range displaced {
					if e.JobID == lj.seq {
						was = e.Placement
					}
				}
				displaced = append(displaced, plan.Displaced{JobID: lj.seq, Placement: d.Placement, Rejected: !d.Placement.OK(), Was: was})
			}
			reserve = d.Fixed.Name
		case site.DecideFailed:
			// Processors taken out of service (agentCapacity) took the
			// waiting job's slot: placed again, or failed.
			switch {
			case lj == nil:
			case lj.job().GetState() != fedschedv1.JobState_JOB_STATE_PENDING:
				return fmt.Errorf("site agent: %v failed while %v: %w", d.Job, lj.job().GetState(), ErrInvalidRequest)
			case d.Placement.OK():
				n.moved(lj, d.Placement, now)
			default:
				n.failNode(lj, now)
			}
		case site.DecideCancel:
			// A cancel at this site is written by its op; a peer's job
			// its origin terminated, here.
			if d.Peer != "" && lj != nil {
				terminated[d.Job] = true
				n.terminated(lj, d.Peer, now)
			}
		case site.DecideKill:
			if terminated[d.Job] && lj != nil {
				n.kill(lj, now)
			}
		case site.DecideEnd, site.DecideExtend, site.DecideReserve, site.DecideUnreserve,
			site.DecideStanding, site.DecideUnstanding:
			// Written by the op that called the agent; a running job's
			// kill time is its supervisor's and never moves
			// (plan.Config.NoGrowBack).
		default:
			return fmt.Errorf("site agent: decision %v about %v in a site that does not federate: %w", d.Kind, d.Job, ErrInvalidRequest)
		}
	}
	if len(displaced) > 0 {
		n.displacedBy = append(n.displacedBy, n.settleDisplaced(displaced, reserve, now)...)
	}
	n.syncStanding()
	return nil
}

// liveOf is the live job the agent's key names: one of the site's own
// jobs, or a peer's it runs (by its agreement), nil if none.
func (n *Node) liveOf(k site.JobKey) *liveJob {
	if k.Site == n.cfg.Site {
		return n.live[k.ID]
	}
	if a := n.agreementOfKey(k); a != nil && a.Role == rolePeer {
		return n.live[a.Seq]
	}
	return nil
}

// syncStanding makes the node's view of its rules' instances (listed, and
// naming the plan's fixed reservations: byCore) the agent's, which lays
// them; an instance the agent skipped is logged.
func (n *Node) syncStanding() {
	for id, s := range n.resv.rules {
		inst, skipped, ok := n.agent.Instances(id)
		if !ok {
			continue // being created: createReservation adds it
		}
		for core := range s.inst {
			if _, ok := inst[core]; !ok {
				delete(s.inst, core)
				delete(n.resv.byCore, core)
			}
		}
		for core, w := range inst {
			if _, ok := s.inst[core]; !ok {
				n.addInstance(s, core, w)
			}
		}
		if skipped > s.skipped {
			n.log.Warn("instances of a standing reservation skipped: a running job or a hold is in their way", "reservation", id, "skipped", skipped-s.skipped)
		}
		s.skipped = skipped
	}
}

// agentEnd tells the agent how a job it started ended (the executor's
// exit e): a lost or provider-failed job teaches nothing (Fail); a killed
// one was cut. The agent takes the end at the turn's now (its plan's
// time) and measures the run from the planned start: when the loop is
// late to start a job or to take its exit, it learns a run longer than
// the node's own core, which measures from the recorded start to the
// exit (docs/architecture.md, "Where the switch stands").
func (n *Node) agentEnd(lj *liveJob, e executor.Exit, now int64) {
	k := n.keyOf(lj)
	if e.Lost || e.ProviderFailed {
		n.agent.Fail(now, k)
	} else {
		n.agent.End(now, k, !e.Killed)
	}
	n.applyOwn(now)
}

// applyOwn applies what an op's agent call decided; such a batch holds
// no start.
func (n *Node) applyOwn(now int64) {
	if err := n.applyReady(context.Background(), now, n.agent.Ready()); err != nil {
		n.log.Error("site agent decision not applied", "err", err)
	}
}

// admitted is what an accept and a reject of one of this site's own jobs
// share: a job the agent offered to peers ends its offer there (done);
// otherwise the admission test's samples go on the job's record, and the
// caller writes the decision.
func (n *Node) admitted(lj *liveJob, d site.Decision, now int64) (done bool, err error) {
	if lj == nil {
		return true, fmt.Errorf("site agent: %v of unknown job %v: %w", d.Kind, d.Job, ErrInvalidRequest)
	}
	if offering(lj) {
		n.offerEnded(lj, d, now)
		return true, nil
	}
	lj.job().OverbookSamples, lj.job().TooFewSamples = d.Placement.Samples, d.Placement.TooFewSamples
	return false, nil
}
