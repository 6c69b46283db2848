package site

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fedsched/fedsched/plan"
)

// Operators' fixed reservations made and removed while work is planned,
// by a node's rules (node/reservations.go createReservation and
// deleteReservation): a reservation is made only if the processors are
// free over its slot, or if the jobs in its way may be displaced (the
// operator asked for it) and none of them is running or held for a peer's
// quote; displaced jobs are placed again in their window by the
// admission test, or dropped (their SLA violated, the provider's doing).

// ReservationConflict is a reservation refused because jobs stand in its
// way. It matches plan.ErrConflict.
type ReservationConflict struct {
	// Jobs are all the jobs whose reservations overlap the slot, Running
	// those running (or held for a peer's quote: Held), which are never
	// displaced.
	Jobs, Running, Held []JobKey
	// Displace says displacement was asked for (and refused because of
	// Running or Held).
	Displace bool
}

func (e *ReservationConflict) Error() string {
	if e.Displace {
		return fmt.Sprintf("reservation: running jobs %v and jobs held for peers %v cannot be displaced: %v", e.Running, e.Held, plan.ErrConflict)
	}
	return fmt.Sprintf("reservation: conflicts with jobs %v: %v", e.Jobs, plan.ErrConflict)
}

// Unwrap makes errors.Is(err, plan.ErrConflict) true.
func (e *ReservationConflict) Unwrap() error { return plan.ErrConflict }

// Reserve makes an operator's fixed reservation of f.Procs processors over
// [f.Start, f.End) at now (f.ID is ignored: the agent names it, and Reserve
// returns the id). Without displace, jobs in its way refuse it (a
// *ReservationConflict); with displace, the waiting ones are placed again
// in their window (DecideDisplaced with the new placement) or dropped
// (DecideDisplaced without one; the origin of a peer's job gets a
// report), unless a running job or a hold for a peer is in the way. Fixed
// reservations that leave no room for it fail with plan.ErrNoFit; a
// malformed slot, or one over by now, with plan.ErrInvalid. A
// DecideReserve records it for the driver.
func (a *Agent) Reserve(now int64, f plan.FixedSpec, displace bool) (int64, error) {
	f.ID = a.fixedID - 1
	ds, err := a.site.AddFixed(now, f, displace)
	if ce, ok := errors.AsType[*plan.ConflictError](err); ok {
		return 0, a.conflict(ce)
	}
	if err != nil {
		return 0, fmt.Errorf("site agent %s: %w", a.cfg.Name, err)
	}
	a.fixedID = f.ID
	a.reserved[f.ID] = f
	a.dirty = true
	a.decide(Decision{Kind: DecideReserve, Fixed: f})
	a.displaced(now, f, ds)
	return f.ID, nil
}

// displaced decides about the waiting jobs the reservation f displaced:
// placed again, or dropped.
func (a *Agent) displaced(now int64, f plan.FixedSpec, ds []plan.Displaced) {
	for _, d := range ds {
		jb := a.byID[d.JobID]
		if jb == nil {
			continue
		}
		if !d.Rejected {
			jb.place = d.Placement
			a.decide(Decision{Kind: DecideDisplaced, Job: jb.key, Placement: d.Placement, Fixed: f})
			continue
		}
		a.settle(now, jb, Decision{Kind: DecideDisplaced, Job: jb.key, Placement: d.Placement, Fixed: f, Route: jb.route}, dropped(now))
	}
}

// conflict names the jobs of a plan conflict.
func (a *Agent) conflict(ce *plan.ConflictError) *ReservationConflict {
	out := &ReservationConflict{Displace: ce.Displace}
	for _, id := range ce.Jobs {
		jb := a.byID[id]
		if jb == nil {
			continue
		}
		out.Jobs = append(out.Jobs, jb.key)
		switch {
		case jb.state == stateHeld || jb.state == stateTaking:
			out.Held = append(out.Held, jb.key)
		case jb.started:
			out.Running = append(out.Running, jb.key)
		}
	}
	for _, v := range [][]JobKey{out.Jobs, out.Running, out.Held} {
		slices.SortFunc(v, cmpKey)
	}
	return out
}

// Unreserve removes the operator's fixed reservation id at now (a
// DecideUnreserve records it); the jobs planned after it may move
// earlier at the next pass. It reports false if there is no such
// reservation in the plan (over, or never made).
func (a *Agent) Unreserve(now int64, id int64) bool {
	if _, ok := a.reserved[id]; !ok {
		return false
	}
	delete(a.reserved, id)
	if a.site.RemoveFixed(now, id) != nil {
		return false // over already
	}
	a.dirty = true
	a.decide(Decision{Kind: DecideUnreserve, Fixed: plan.FixedSpec{ID: id}})
	return true
}
