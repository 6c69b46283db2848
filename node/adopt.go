package node

import (
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// adoptStarted handles a stored PENDING job that the executor started: the
// node died after handing it over and before storing that. The executor
// can re-attach it, so it runs: it becomes RUNNING, started when its
// reservation began (when the pass starts a job) or now if it had none.
// Left PENDING, it could be cancelled without its process being killed, or
// planned again while it runs.
func (n *Node) adoptStarted(rec store.JobRecord, pl plan.Placement, estimate, now int64) (store.JobRecord, plan.Placement) {
	j := rec.Job
	sr, ok := n.deps.Executor.(executor.StartRecorder)
	if !ok {
		return rec, pl
	}
	if started, err := sr.Started(j.GetId()); err != nil || !started {
		return rec, pl
	}
	if err := n.deps.Executor.Reattach(j.GetId()); err != nil {
		n.log.Warn("re-attach of a job started before the restart failed", "job", j.GetId(), "err", err)
		return rec, pl
	}
	if j.GetReservation() == nil || pl.Start > now {
		// Queued (no reservation), or started early: it holds its
		// processors from now for its estimate.
		pl = plan.Placement{Start: now, End: now + estimate, Reason: plan.ReasonPlacedInFull}
		r, api := n.reservationOf(j.GetId(), int(j.GetSpec().GetProcs()), pl, estimate)
		j.Reservation = api
		n.pending.putRes(j.GetId(), r)
	}
	j.StartTime = toTime(pl.Start)
	return n.setState(j, rec, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.Reason_REASON_STARTED,
		"started just before the node stopped; re-attached to its process at restart", now), pl
}
