package plan

import (
	"fmt"
)

// A hold is a tentative reservation that backs a quote to a peer: the slot
// is taken out of the plan like an accepted job's, but the job is not
// accepted until the origin confirms it. A hold that is neither confirmed nor
// released by its expiry is dropped by the first pass after it.
type hold struct {
	e       *entry
	expires int64
}

// Hold runs the admission test for j at now and, if it accepts, holds the
// placement until expires. The job is then neither waiting nor running:
// Confirm makes it an accepted job, Unhold or expiry drops it.
func (s *Site) Hold(now int64, j Job, expires int64) Placement {
	switch {
	case j.Procs <= 0 || j.Estimate <= 0 || j.Deadline-max(now, j.Release) <= 0:
		return Placement{Reason: ReasonRejectedInvalid}
	case j.Procs > s.cfg.Procs:
		return Placement{Reason: ReasonRejectedTooWide}
	}
	if _, dup := s.holds[j.ID]; dup {
		return Placement{Reason: ReasonRejectedInvalid}
	}
	var pl Placement
	if s.cfg.Policy == Conservative {
		jc := j // only this branch hands out a pointer: j itself stays off the heap
		pl = s.adm.Admit(s.plan, &jc, now)
		j = jc
	} else if s.CanStartNow(now, j) {
		// A queue policy can promise only what starts at once.
		pl = Placement{Start: now, End: now + j.Estimate, Reason: ReasonPlacedInFull}
	} else {
		return Placement{Reason: ReasonRejectedNoGap}
	}
	if !pl.OK() {
		return pl
	}
	s.seq++
	s.inOrder++ // joins the queue through enqueue, at Confirm
	e := &entry{job: j, seq: s.seq}
	if err := s.reserve(e, pl); err != nil {
		return Placement{Reason: ReasonRejectedNoGap}
	}
	if s.holds == nil {
		s.holds = make(map[int64]*hold)
	}
	s.holds[j.ID] = &hold{e: e, expires: expires}
	return pl
}

// Confirm turns the hold of job id into an accepted job (the origin agreed
// to the quote). It fails with ErrUnknownReservation if there is no such
// hold, and with ErrHoldExpired if it ran out before now.
func (s *Site) Confirm(now int64, id int64) (Placement, error) {
	h, ok := s.holds[id]
	if !ok {
		return Placement{}, fmt.Errorf("confirm hold %d: %w", id, ErrUnknownReservation)
	}
	if h.expires <= now {
		s.dropHold(id)
		return Placement{}, fmt.Errorf("confirm hold %d at %d (expired %d): %w", id, now, h.expires, ErrHoldExpired)
	}
	delete(s.holds, id)
	if s.cfg.Policy != Conservative {
		// The queue policies keep no reservations for waiting jobs: the
		// job joins the queue and starts at the next pass if it still fits.
		if _, err := s.plan.Release(id); err == nil {
			s.dirty = true
		}
		h.e.place = Placement{Reason: ReasonQueued}
	}
	s.enqueue(h.e)
	return h.e.place, nil
}

// Unhold drops the hold of job id (the origin took another offer). It
// reports false if there is no such hold.
func (s *Site) Unhold(now int64, id int64) bool {
	if _, ok := s.holds[id]; !ok {
		return false
	}
	s.dropHold(id)
	return true
}

func (s *Site) dropHold(id int64) {
	delete(s.holds, id)
	if _, err := s.plan.Release(id); err == nil {
		s.dirty = true
	}
}

// expireHolds drops every hold whose expiry is at or before now.
func (s *Site) expireHolds(now int64) {
	for id, h := range s.holds {
		if h.expires <= now {
			s.dropHold(id)
		}
	}
}

// nextHoldExpiry is the earliest hold expiry, or Forever.
func (s *Site) nextHoldExpiry() int64 {
	t := Forever
	for _, h := range s.holds {
		t = min(t, h.expires)
	}
	return t
}

// Holds is the number of outstanding holds.
func (s *Site) Holds() int { return len(s.holds) }
