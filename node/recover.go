package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// metaSite names the site a data directory belongs to.
const metaSite = "site"

// recover rebuilds the core from the store, exactly as it was acknowledged:
//
//   - the runtime statistics;
//   - the operators' fixed reservations, and the instances of their
//     standing reservations within the horizon (and as far as the live
//     jobs' reservations reach), before any job, so that the jobs'
//     reservations fit around them;
//   - every PENDING job with its stored reservation, in submission order. A
//     pending job whose reservation began while the node was down is
//     re-planned from now inside its window; if no slot remains, it fails
//     (FAILED_LOST_ON_RESTART, SLA violated: the provider was down);
//   - every RUNNING job with its reservation, re-attached to its process
//     through the executor (its supervisor outlives the node). A job the
//     executor cannot find was never started: it failed with the node.
//
// The recovery's own decisions are made durable before the node serves.
func (n *Node) recover(ctx context.Context) error {
	st := n.deps.Store
	switch site, err := st.GetMeta(ctx, metaSite); {
	case errors.Is(err, store.ErrNotFound):
		if err := st.PutMeta(ctx, metaSite, n.cfg.Site); err != nil {
			return err
		}
	case err != nil:
		return err
	case site != n.cfg.Site:
		return fmt.Errorf("data directory %s belongs to site %q, not %q: %w", n.cfg.DataDir, site, n.cfg.Site, ErrInvalidRequest)
	}
	if blob, err := st.GetStats(ctx, statsBlob); err == nil {
		if err := n.stats.UnmarshalJSON(blob); err != nil {
			n.log.Warn("stored runtime statistics unreadable; starting empty", "err", err)
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	// The stored statistics carry the configuration they were saved with;
	// the site's current one (ageing) applies from now on.
	if err := n.stats.Reconfigure(statsConfig(n.cfg.Overbooking)); err != nil {
		return err
	}
	if err := n.seedHistory(); err != nil {
		return err
	}
	var live []store.JobRecord
	token := ""
	for {
		page, next, err := st.ListJobs(ctx, store.JobQuery{PageSize: store.MaxPageSize, PageToken: token})
		if err != nil {
			return err
		}
		for _, rec := range page {
			if seq, ok := seqOf(n.cfg.Site, rec.ID()); ok && seq > n.nextSeq {
				n.nextSeq = seq
			}
			n.metrics.stored(rec.Job.GetState())
			switch rec.Job.GetState() {
			case fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING:
				live = append(live, rec)
			case fedschedv1.JobState_JOB_STATE_CANCELLED:
				// Cancelled while running and not yet ended: its process
				// may still hold the processors.
				if rec.Job.GetStartTime() != nil && rec.Job.GetEndTime() == nil {
					live = append(live, rec)
				}
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	slices.SortFunc(live, func(a, b store.JobRecord) int { return compareIDs(a.ID(), b.ID()) })
	now := n.now()
	if err := n.recoverReservations(ctx, live, now); err != nil {
		return err
	}
	if err := n.recoverAgreements(ctx, now); err != nil {
		return err
	}
	for _, rec := range live {
		if rec.Job.GetState() == fedschedv1.JobState_JOB_STATE_PENDING && rec.Job.GetReason() == fedschedv1.Reason_REASON_DELEGATED {
			n.recoverInflight(rec, now)
			continue
		}
		n.restore(rec, now)
	}
	return n.commit(ctx)
}

func compareIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// restore puts one stored live job back into the core.
func (n *Node) restore(rec store.JobRecord, now int64) {
	j := rec.Job
	seq, _ := seqOf(n.cfg.Site, j.GetId())
	spec := j.GetSpec()
	pj := plan.Job{ID: int64(seq), Procs: int(spec.GetProcs()), Estimate: spec.GetEstimateSeconds(), Release: j.GetSubmitTime().AsTime().Unix(),
		Deadline: plan.Forever, User: spec.GetUser(), App: spec.GetApp()}
	if r := spec.GetRelease(); r != nil {
		pj.Release = max(pj.Release, r.AsTime().Unix())
	}
	if d := spec.GetDeadline(); d != nil {
		pj.Deadline, pj.Fee, pj.Penalty = d.AsTime().Unix(), spec.GetFee(), spec.GetPenalty()
	}
	lj := &liveJob{seq: int64(seq), j: j, rec: rec, pj: pj, sla: spec.GetDeadline() != nil}
	var pl plan.Placement
	if r := j.GetReservation(); r != nil {
		pl = plan.Placement{Start: r.GetStart().AsTime().Unix(), End: r.GetEnd().AsTime().Unix(), PoF: j.GetPof(), Reason: plan.ReasonPlacedInFull}
		if j.GetOverbooked() {
			pl.Reason = plan.ReasonOverbooked
		}
	}
	if j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING {
		lj.rec, pl = n.adoptStarted(rec, pl, pj.Estimate, now)
	}
	running := j.GetState() != fedschedv1.JobState_JOB_STATE_PENDING
	if running {
		lj.cancelled = j.GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED
		err := n.site.Restore(pj, pl, true)
		if err != nil && n.unlayOver(plan.Window{Start: pl.Start, End: pl.End}, now) {
			// An instance of a standing reservation laid at recovery where
			// the job runs: the job keeps its processors.
			err = n.site.Restore(pj, pl, true)
		}
		n.live[lj.seq] = lj
		if err != nil {
			// Its processors cannot be accounted for (the site restarted
			// with fewer): it is killed rather than left running outside
			// the plan, where others would be given its processors.
			n.log.Warn("running job's reservation does not fit the recovered plan; killing it", "job", j.GetId(), "err", err)
			if rerr := n.deps.Executor.Reattach(j.GetId()); rerr == nil {
				if kerr := n.deps.Executor.Kill(j.GetId()); kerr != nil && !errors.Is(kerr, executor.ErrUnknownJob) {
					n.log.Warn("kill of a job outside the recovered plan failed", "job", j.GetId(), "err", kerr)
				}
			}
			if lj.cancelled {
				n.handleExit(executor.Exit{JobID: j.GetId(), Lost: true}, now)
				return
			}
			n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_FAILED_NODE,
				fmt.Sprintf("the site restarted with %d processors and the job's running reservation (%d processors) no longer fits its plan: killed", n.procs, pj.Procs),
				fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
			return
		}
		if err := n.deps.Executor.Reattach(j.GetId()); err != nil {
			if !errors.Is(err, executor.ErrUnknownJob) {
				n.log.Warn("re-attach failed", "job", j.GetId(), "err", err)
			}
			if lj.cancelled {
				n.handleExit(executor.Exit{JobID: j.GetId(), Lost: true}, now)
				return
			}
			n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART,
				"the job was running when the node stopped and its process cannot be found", fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
			return
		}
		if lj.cancelled {
			// Cancelled while running, and still running: the kill the
			// cancel asked for failed (or never reached the process before
			// the node stopped). Ask again (and on, while it fails) rather
			// than let it hold its processors until its reservation's end.
			n.kill(lj, now)
		}
		return
	}
	if n.pol != plan.Conservative || pl.Start >= now {
		if err := n.site.Restore(pj, pl, false); err == nil {
			n.live[lj.seq] = lj
			return
		}
	}
	// Its slot began while the node was down (or no longer fits): plan it
	// again from now, inside its window.
	npl := n.site.Submit(now, pj)
	if !npl.OK() {
		n.live[lj.seq] = lj
		switch {
		case pj.Procs > n.procs:
			// The operator restarted the site smaller than the job.
			n.finish(lj, fedschedv1.JobState_JOB_STATE_REJECTED, fedschedv1.Reason_REASON_REJECTED_TOO_WIDE,
				fmt.Sprintf("the site restarted with %d processors and the job needs %d", n.procs, pj.Procs), fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
		case pl.Start >= now && j.GetReservation() != nil:
			// Its slot had not begun: the recovered plan (fewer
			// processors, or a reservation in the way) has no room for it.
			n.finish(lj, fedschedv1.JobState_JOB_STATE_REJECTED, fedschedv1.Reason_REASON_REJECTED_NO_GAP,
				fmt.Sprintf("after the restart (the site has %d processors) its reservation no longer fits and no slot remains in its window", n.procs),
				fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
		default:
			n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART,
				"the node was down when the job's reservation began and no slot remains in its window", fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
		}
		return
	}
	n.live[lj.seq] = lj
	if npl.Reason != plan.ReasonQueued {
		api, over := n.reservationOf(pj.Procs, npl, pj.Estimate)
		j.Reservation, j.Pof, j.Overbooked = api, npl.PoF, over
	}
	lj.rec = n.setState(j, rec, fedschedv1.JobState_JOB_STATE_PENDING, j.GetReason(), "re-planned after the node restarted", now)
}

// recoverAgreements loads the agreements. Holds are not restored: a
// pending agreement (a quote not yet agreed when the node stopped) is
// rejected, so that the origin's Agree fails and it looks elsewhere; the
// job it would have created never existed.
func (n *Node) recoverAgreements(ctx context.Context, now int64) error {
	recs, err := n.deps.Store.ListAgreements(ctx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		var a agreementRec
		if err := json.Unmarshal(r.Body, &a); err != nil {
			n.log.Warn("stored agreement unreadable; skipped", "agreement", r.ID, "err", err)
			continue
		}
		n.agreements[a.ID] = &a
		n.noteAwaited(&a)
		n.byOrigin[originKey(a.Origin, a.JobID)] = a.ID // a peer's job here, or this site's own at a peer
		if a.Role == rolePeer {
			if uint64(a.Seq) > n.nextSeq {
				n.nextSeq = uint64(a.Seq)
			}
			if a.State == delegation.Pending {
				a.Apply(delegation.EventExpire, now) //nolint:errcheck // pending -> rejected is always allowed
				n.putAgreement(&a, now)
			}
		}
	}
	return nil
}

// recoverInflight keeps a job that was being delegated when the node
// stopped among the live jobs, out of the plan: the site agent, restored
// from the store (savedFromStore), offers it again or asks the peer its
// route says it was agreeing with again. Without federation, a job no peer
// was about to take is rejected: nobody can be asked. (One that a peer may
// have taken stays, its agree waiting for federation to be back.)
func (n *Node) recoverInflight(rec store.JobRecord, now int64) {
	j := rec.Job
	seq, _ := seqOf(n.cfg.Site, j.GetId())
	spec := j.GetSpec()
	pj := planJob(spec, int64(seq), j.GetSubmitTime().AsTime().Unix())
	lj := &liveJob{seq: int64(seq), j: j, rec: rec, pj: pj, sla: spec.GetDeadline() != nil}
	agreeing := slices.ContainsFunc(j.GetRoute(), func(h *fedschedv1.RouteHop) bool {
		return h.GetSite() == n.cfg.Site && h.GetReason() == fedschedv1.Reason_REASON_DELEGATED && h.GetPeerSite() != ""
	})
	if !n.federating() && !agreeing {
		n.setState(j, rec, fedschedv1.JobState_JOB_STATE_REJECTED, fedschedv1.Reason_REASON_REJECTED_NO_GAP,
			"the node restarted without federation while the job was being delegated", now)
		return
	}
	n.live[lj.seq] = lj
}
