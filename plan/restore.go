package plan

import "fmt"

// Restore puts an accepted job back into the core exactly where it was, as a
// node does when it recovers from its store: waiting with its reservation
// (Conservative), queued (the queue policies, running false), or running.
// A running job, or a waiting one under Conservative, reserves exactly
// pl's slot; Restore fails, leaving the site unchanged, if that slot is not
// free or outside the job's window. Restore jobs in submission order: the
// order of the calls is the queue order (under EDF and LTTR, the order among
// equal keys: the next pass sorts the queue by key).
func (s *Site) Restore(j Job, pl Placement, running bool) error {
	if _, ok := s.running[j.ID]; ok {
		return fmt.Errorf("restore %d: %w", j.ID, ErrDuplicate)
	}
	s.seq++
	e := &entry{job: j, seq: s.seq, place: pl}
	if !running && s.cfg.Policy != Conservative {
		e.place = Placement{Reason: ReasonQueued}
		s.appendWaiting(e)
		s.noteQueued(e)
		return nil
	}
	// A running job may have started before its release (never, in this
	// core) or run past a deadline it was given; its window is its slot.
	r := Reservation{ID: j.ID, Procs: j.Procs, Start: pl.Start, End: pl.End, Release: min(j.Release, pl.Start), Deadline: max(j.Deadline, pl.End)}
	if err := s.plan.Reserve(r); err != nil {
		return fmt.Errorf("restore %d: %w", j.ID, err)
	}
	if running {
		s.running[j.ID] = e
	} else {
		s.appendWaiting(e)
	}
	return nil
}

// Moved returns the ids of waiting jobs whose reservations re-planning has
// changed since the last call, in the order it changed them (an id may
// repeat), and forgets them. Drivers that store reservations use it to
// write the new ones; the simulator ignores it.
func (s *Site) Moved() []int64 {
	m := s.moved
	s.moved = nil
	return m
}
