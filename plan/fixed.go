package plan

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrConflict is returned when a fixed reservation collides with accepted
// work. The error is a *ConflictError that lists the jobs; test for it with
// errors.Is(err, ErrConflict) and read it with errors.As.
var ErrConflict = errors.New("fixed reservation collides with accepted jobs")

// ConflictError lists the jobs that stop a fixed reservation.
type ConflictError struct {
	// ID is the fixed reservation asked for.
	ID int64
	// Jobs are all the jobs whose reservations overlap it in time, sorted.
	Jobs []int64
	// Running is the subset of Jobs that are running; they can never be
	// displaced.
	Running []int64
	// Displace tells whether displacement was asked for (and refused
	// because of Running).
	Displace bool
}

func (e *ConflictError) Error() string {
	if e.Displace {
		return fmt.Sprintf("fixed reservation %d: running jobs %s cannot be displaced: %v", e.ID, ids(e.Running), ErrConflict)
	}
	return fmt.Sprintf("fixed reservation %d: conflicts with jobs %s: %v", e.ID, ids(e.Jobs), ErrConflict)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

func ids(v []int64) string {
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// FixedSpec asks for a fixed reservation: Procs processors over exactly
// [Start, End). ID shares the id space of jobs (a fixed reservation and a
// job must never have the same id); drivers use negative ids for fixed
// reservations, since job ids are positive.
type FixedSpec struct {
	ID    int64
	Name  string
	Procs int
	Start int64
	End   int64
}

// Displaced is what became of a waiting job that a fixed reservation pushed
// out of its slot.
type Displaced struct {
	JobID int64
	// Was is where the job was planned before.
	Was Placement
	// Placement is the admission test's answer for the job now: its new
	// slot, or, if Rejected, why it could not be placed (Reason).
	Placement Placement
	// Rejected: the job could not be re-placed in its window and has been
	// removed from the site.
	Rejected bool
}

// fixedSet is the site's bookkeeping of fixed reservations. The reservations
// themselves are in the plan (Reservation.Fixed); here are their names and a
// heap of their ends, so that the pass can drop the ones that are over and
// NextWake can see when processors come back. Entries of the heap may be
// stale (a reservation removed, or removed and added again): an entry counts
// only while the plan holds a fixed reservation of that id with that end.
type fixedSet struct {
	names map[int64]string
	ends  ghostHeap
}

func (f *fixedSet) live(p *Plan, g ghost) bool {
	r, ok := p.res[g.id]
	return ok && r.Fixed && r.End == g.end
}

// expire drops the fixed reservations that ended at or before now. They lie
// wholly in the past, so dropping them frees nothing anyone could use: the
// site does not become dirty.
func (f *fixedSet) expire(p *Plan, now int64) {
	for len(f.ends) > 0 && f.ends[0].end <= now {
		g := heap.Pop(&f.ends).(ghost)
		if f.live(p, g) {
			p.Release(g.id) //nolint:errcheck // live: in the plan
			delete(f.names, g.id)
		}
	}
}

// nextEnd returns the earliest end of a fixed reservation after now, or
// Forever. A stale or overdue entry at the top makes it answer now+1, which
// only costs a spare pass.
func (f *fixedSet) nextEnd(now int64) int64 {
	if len(f.ends) == 0 {
		return Forever
	}
	if e := f.ends[0].end; e > now {
		return e
	}
	return now + 1
}

// checkFixed validates a spec against the site and the clock.
func (s *Site) checkFixed(now int64, f FixedSpec) error {
	switch {
	case f.Procs <= 0:
		return fmt.Errorf("fixed reservation %d: procs %d: %w", f.ID, f.Procs, ErrInvalid)
	case f.Procs > s.cfg.Procs:
		return fmt.Errorf("fixed reservation %d: %d procs on a %d-processor site: %w", f.ID, f.Procs, s.cfg.Procs, ErrExceedsCapacity)
	case f.End <= f.Start || f.Start <= Never || f.End > Forever:
		return fmt.Errorf("fixed reservation %d: slot [%d, %d): %w", f.ID, f.Start, f.End, ErrInvalid)
	case f.End <= now:
		return fmt.Errorf("fixed reservation %d: slot [%d, %d) is over at %d: %w", f.ID, f.Start, f.End, now, ErrInvalid)
	}
	if _, dup := s.plan.res[f.ID]; dup {
		return fmt.Errorf("fixed reservation %d: %w", f.ID, ErrDuplicate)
	}
	if _, dup := s.running[f.ID]; dup {
		return fmt.Errorf("fixed reservation %d: a job has that id: %w", f.ID, ErrDuplicate)
	}
	s.tidy()
	for _, e := range s.waiting {
		if e.job.ID == f.ID {
			return fmt.Errorf("fixed reservation %d: a job has that id: %w", f.ID, ErrDuplicate)
		}
	}
	return nil
}

// fixedOnlyFits reports whether f fits beside the fixed reservations alone,
// that is whether displacing every job could ever make room for it.
func (s *Site) fixedOnlyFits(f FixedSpec) bool {
	scratch := NewProfile(s.cfg.Procs)
	for id := range s.fixed.names {
		r, ok := s.plan.res[id]
		if ok && r.Start < f.End && f.Start < r.End {
			scratch.Add(max(r.Start, f.Start), min(r.End, f.End), -r.Procs)
		}
	}
	return scratch.Fits(f.Procs, f.Start, f.End)
}

// Conflicts returns the jobs whose reservations stand in the way of f,
// sorted, without changing anything: none if the processors are free over
// [f.Start, f.End). Otherwise the rule is simple and exact: every job
// (non-fixed) reservation that overlaps [f.Start, f.End) in time conflicts,
// whether or not some smaller set would do. Under the queue policies (EASY,
// FCFS, LIST) only running jobs hold reservations, so only they can
// conflict; jobs waiting in their queues simply treat the fixed reservation
// as a wall. Under KeepUntilEstimate a job that ended early but whose
// processors are kept until its estimate counts too.
func (s *Site) Conflicts(f FixedSpec) []int64 {
	if f.End <= f.Start || s.plan.prof.Fits(f.Procs, f.Start, f.End) {
		return nil
	}
	var out []int64
	for id, r := range s.plan.res {
		if !r.Fixed && r.Start < f.End && f.Start < r.End {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// AddFixed reserves f.Procs processors over exactly [f.Start, f.End) as a
// fixed reservation: Reservation{Fixed: true, Release: Start, Deadline: End}.
// No policy moves, shortens or overbooks it; the earliest-fit and gap
// searches, the queue policies and re-planning all treat it as a wall.
//
// If the processors are free, it is reserved and AddFixed returns nil, nil.
// Otherwise the conflicting jobs are those Conflicts lists, and:
//
//   - without displace, AddFixed refuses with a *ConflictError (ErrConflict)
//     listing them; the site is unchanged;
//   - with displace, if any of them is running or held for a peer's quote,
//     it refuses the same way (those are never displaced;
//     ConflictError.Running lists them);
//   - with displace and none running, the waiting conflicting jobs are taken
//     out of the plan, the fixed reservation is made, and each displaced
//     job, in submission order, is placed again by the site's admission
//     test (Admit) in its window [max(now, release), deadline). Jobs that
//     cannot be placed are removed from the site and reported Rejected. The
//     returned list says what became of each, in submission order. Kept
//     reservations of jobs that already ended (KeepUntilEstimate) are simply
//     dropped and not listed.
//
// The caller settles the SLA consequences of the displaced jobs: a rejected
// displaced job whose SLA was accepted counts as VIOLATED (the provider broke
// the agreement, and owes the penalty); a re-placed one may have a new PoF.
// Displaced jobs can move later: the conservative guarantee that no job
// starts after the slot promised at submission does not hold for them.
//
// If the fixed reservations already in the plan leave no room for f even
// with every job displaced, AddFixed fails with ErrNoFit. Malformed specs
// fail with ErrInvalid or ErrExceedsCapacity, a taken id with ErrDuplicate;
// f.End must be after now (f.Start may be before it).
func (s *Site) AddFixed(now int64, f FixedSpec, displace bool) ([]Displaced, error) {
	if err := s.checkFixed(now, f); err != nil {
		return nil, err
	}
	r := Reservation{ID: f.ID, Procs: f.Procs, Start: f.Start, End: f.End, Release: f.Start, Deadline: f.End, Fixed: true}
	if s.plan.prof.Fits(f.Procs, f.Start, f.End) {
		return nil, s.commitFixed(r, f.Name)
	}
	if !s.fixedOnlyFits(f) {
		return nil, fmt.Errorf("fixed reservation %d: %d procs over [%d, %d) collide with other fixed reservations: %w", f.ID, f.Procs, f.Start, f.End, ErrNoFit)
	}
	conflicts := s.Conflicts(f)
	var running []int64
	for _, id := range conflicts {
		// Running jobs, and holds backing a quote to a peer, are promises
		// this site cannot take back: they are never displaced.
		_, run := s.running[id]
		_, held := s.holds[id]
		if run || held {
			running = append(running, id)
		}
	}
	if !displace || len(running) > 0 {
		return nil, &ConflictError{ID: f.ID, Jobs: conflicts, Running: running, Displace: displace}
	}
	in := make(map[int64]bool, len(conflicts))
	for _, id := range conflicts {
		in[id] = true
	}
	var moved []*entry
	s.tidy()
	for _, e := range s.waiting { // submission order
		if in[e.job.ID] {
			moved = append(moved, e)
		}
	}
	// Take every conflicting reservation out: waiting jobs and kept ones.
	taken := make([]Reservation, 0, len(conflicts))
	for _, id := range conflicts {
		old, err := s.plan.Release(id)
		if err != nil {
			continue
		}
		taken = append(taken, old)
	}
	if err := s.commitFixed(r, f.Name); err != nil {
		// Cannot happen: only fixed reservations overlap f now, and they
		// leave room. Put everything back rather than corrupt the plan.
		for _, old := range taken {
			s.plan.Reserve(old) //nolint:errcheck // they were there a moment ago
		}
		return nil, err
	}
	out := make([]Displaced, 0, len(moved))
	gone := make(map[*entry]bool)
	for _, e := range moved {
		was := e.place
		pl := s.adm.Admit(s.plan, &e.job, now)
		if pl.OK() && s.reserve(e, pl) == nil {
			out = append(out, Displaced{JobID: e.job.ID, Was: was, Placement: pl})
			continue
		}
		if pl.OK() { // the admission test broke its contract
			pl = Placement{Reason: ReasonRejectedNoGap}
		}
		gone[e] = true
		out = append(out, Displaced{JobID: e.job.ID, Was: was, Placement: pl, Rejected: true})
	}
	if len(gone) > 0 {
		s.waiting = slices.DeleteFunc(s.waiting, func(e *entry) bool { return gone[e] })
		s.dropIndex()
	}
	// Jobs that moved later left room behind: let the next pass re-plan.
	s.dirty = true
	return out, nil
}

func (s *Site) commitFixed(r Reservation, name string) error {
	if err := s.plan.Reserve(r); err != nil {
		return err
	}
	if s.fixed.names == nil {
		s.fixed.names = make(map[int64]string)
	}
	s.fixed.names[r.ID] = name
	heap.Push(&s.fixed.ends, ghost{id: r.ID, end: r.End})
	return nil
}

// RemoveFixed releases fixed reservation id. If it had not ended by now the
// site becomes dirty, so that the next pass may move later reservations
// earlier into the room it leaves. It fails with ErrUnknownReservation if
// there is no fixed reservation id.
func (s *Site) RemoveFixed(now int64, id int64) error {
	r, ok := s.plan.res[id]
	if !ok || !r.Fixed {
		return fmt.Errorf("remove fixed reservation %d: %w", id, ErrUnknownReservation)
	}
	end := r.End
	if _, err := s.plan.Release(id); err != nil {
		return err
	}
	delete(s.fixed.names, id)
	if end > now {
		s.dirty = true
	}
	return nil
}

// Fixed returns a copy of every fixed reservation still in the plan, ordered
// by start, then id. Fixed reservations that are over are dropped by the
// first pass after their end.
func (s *Site) Fixed() []Reservation {
	out := make([]Reservation, 0, len(s.fixed.names))
	for id := range s.fixed.names {
		if r, ok := s.plan.res[id]; ok {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Reservation) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// FixedName returns the name given to fixed reservation id.
func (s *Site) FixedName(id int64) (string, bool) {
	n, ok := s.fixed.names[id]
	return n, ok
}
