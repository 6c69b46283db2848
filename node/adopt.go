package node

import (
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// adoptStarted handles a stored PENDING job that the executor started: the
// node died after handing it over and before storing that. The executor
// can re-attach it, so it runs: it becomes RUNNING. Left PENDING, it could
// be cancelled without its process being killed, or planned again while it
// runs.
//
// The record and the plan follow what the executor recorded, not the
// restart: the job started when the node handed it over, and its
// processors are held until the executor kills it (Spec.Deadline, one
// second after its slot's last second; see start). A job whose kill came while the node was
// down thus ends with the slot it really had, and one still running holds
// its processors exactly as long as its supervisor lets it run.
func (n *Node) adoptStarted(rec store.JobRecord, pl plan.Placement, estimate, now int64) (store.JobRecord, plan.Placement) {
	j := rec.Job
	sr, ok := n.deps.Executor.(executor.StartRecorder)
	if !ok {
		return rec, pl
	}
	ran, err := sr.Started(j.GetId())
	if err != nil || !ran.Started {
		return rec, pl
	}
	if err := n.deps.Executor.Reattach(j.GetId()); err != nil {
		n.log.Warn("re-attach of a job started before the restart failed", "job", j.GetId(), "err", err)
		return rec, pl
	}
	// The node's start gives the executor kill = start + slot + 1 (see
	// start), the slot being the job's reservation, or its estimate when
	// it waited in a queue: the start it recorded follows from the kill.
	// (The process's own start is later by the executor's latency.)
	slot := estimate
	if j.GetReservation() != nil {
		slot = pl.End - pl.Start
	}
	start := now
	switch {
	case !ran.Deadline.IsZero():
		start = min(now, ran.Deadline.Unix()-1-slot)
	case !ran.At.IsZero():
		start = min(now, ran.At.Unix())
	case j.GetReservation() != nil:
		// Not recorded yet: the pass starts a job when its slot begins.
		start = min(now, pl.Start)
	}
	if j.GetReservation() == nil || pl.Start > start {
		// Queued (no reservation), or started before its stored slot (the
		// turn that started it moved it): its slot is the one the executor
		// enforces.
		end := start + estimate
		if !ran.Deadline.IsZero() {
			end = max(start+1, ran.Deadline.Unix()-1)
		}
		pl = plan.Placement{Start: start, End: end, Reason: plan.ReasonPlacedInFull}
		j.Reservation, _ = n.reservationOf(int(j.GetSpec().GetProcs()), pl, estimate)
	}
	j.StartTime = toTime(start)
	return n.setState(j, rec, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.Reason_REASON_STARTED,
		"started just before the node stopped; re-attached to its process at restart", now), pl
}
