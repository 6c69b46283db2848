package plan

import (
	"fmt"
	"iter"
	"maps"
	"sort"
)

// Reservation is a job's slot in the plan: Procs processors over
// [Start, End), which must lie inside the job's window [Release, Deadline).
// End-Start may be shorter than the job's estimate when the job is
// overbooked. A Fixed reservation is an operator's: no policy moves,
// shortens or overbooks it.
type Reservation struct {
	ID       int64
	Procs    int
	Start    int64
	End      int64
	Release  int64
	Deadline int64
	Fixed    bool
}

// Len is the reserved time in seconds.
func (r Reservation) Len() int64 { return r.End - r.Start }

// Plan is a site's plan of the future: its availability profile plus the
// reservations that make it. Every mutation keeps the two consistent and
// refuses what would over-commit a processor or leave a window.
//
// A Plan is not safe for concurrent use: one goroutine owns it.
type Plan struct {
	prof *Profile
	res  map[int64]Reservation // by value: no allocation per reservation
}

// New returns an empty plan of a site with procs processors.
func New(procs int) *Plan {
	return &Plan{prof: NewProfile(procs), res: make(map[int64]Reservation)}
}

// Procs is the number of processors of the site.
func (p *Plan) Procs() int { return p.prof.procs }

// Profile returns the plan's availability profile. The caller must not
// modify it; it stays valid, and changes, with the plan.
func (p *Plan) Profile() *Profile { return p.prof }

// Len is the number of reservations in the plan.
func (p *Plan) Len() int { return len(p.res) }

// Get returns a copy of reservation id.
func (p *Plan) Get(id int64) (Reservation, bool) {
	r, ok := p.res[id]
	return r, ok
}

// All yields every reservation, in no particular order, without copying
// the plan. The plan must not change during the walk.
func (p *Plan) All() iter.Seq[Reservation] { return maps.Values(p.res) }

// Reservations returns a copy of every reservation, ordered by start, then id.
func (p *Plan) Reservations() []Reservation {
	out := make([]Reservation, 0, len(p.res))
	for _, r := range p.res {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Free returns the number of free processors at t.
func (p *Plan) Free(t int64) int { return p.prof.Free(t) }

// EarliestFit returns the earliest start >= onOrAfter at which procs
// processors are free for duration, ending by deadline. See Profile.EarliestFit.
func (p *Plan) EarliestFit(procs int, duration, onOrAfter, deadline int64) (int64, bool) {
	return p.prof.EarliestFit(procs, duration, onOrAfter, deadline)
}

// Gaps appends every maximal gap of at least procs free processors inside
// [from, to). See Profile.Gaps.
func (p *Plan) Gaps(dst []Gap, procs int, from, to int64) []Gap {
	return p.prof.Gaps(dst, procs, from, to)
}

func (p *Plan) check(r Reservation) error {
	switch {
	case r.Procs <= 0:
		return fmt.Errorf("reservation %d: procs %d: %w", r.ID, r.Procs, ErrInvalid)
	case r.Procs > p.prof.procs:
		return fmt.Errorf("reservation %d: %d procs on a %d-processor site: %w", r.ID, r.Procs, p.prof.procs, ErrExceedsCapacity)
	case r.End <= r.Start:
		return fmt.Errorf("reservation %d: empty slot [%d, %d): %w", r.ID, r.Start, r.End, ErrInvalid)
	case r.Start < r.Release || r.End > r.Deadline:
		return fmt.Errorf("reservation %d: slot [%d, %d) outside window [%d, %d): %w", r.ID, r.Start, r.End, r.Release, r.Deadline, ErrOutsideWindow)
	}
	return nil
}

// Reserve adds r to the plan. It fails, leaving the plan unchanged, if the
// id is taken, r is malformed or outside its window, or the processors are
// not free.
func (p *Plan) Reserve(r Reservation) error {
	return p.reserve(r, false)
}

// reserve is Reserve for a caller that may already know r's processors are
// free (fitted): the queue pass, which has just checked it.
func (p *Plan) reserve(r Reservation, fitted bool) error {
	if _, dup := p.res[r.ID]; dup {
		return fmt.Errorf("reserve %d: %w", r.ID, ErrDuplicate)
	}
	if err := p.check(r); err != nil {
		return err
	}
	if !fitted && !p.prof.Fits(r.Procs, r.Start, r.End) {
		return fmt.Errorf("reserve %d: %d procs over [%d, %d): %w", r.ID, r.Procs, r.Start, r.End, ErrNoFit)
	}
	p.prof.Add(r.Start, r.End, -r.Procs)
	p.res[r.ID] = r
	return nil
}

// Release removes reservation id and returns it.
func (p *Plan) Release(id int64) (Reservation, error) {
	r, ok := p.res[id]
	if !ok {
		return Reservation{}, fmt.Errorf("release %d: %w", id, ErrUnknownReservation)
	}
	p.prof.Add(r.Start, r.End, r.Procs)
	delete(p.res, id)
	return r, nil
}

// Shorten moves the end of reservation id back to end (a job ended early,
// or was cut). end must lie in (Start, End]; a fixed reservation cannot be
// shortened.
func (p *Plan) Shorten(id int64, end int64) error {
	r, ok := p.res[id]
	if !ok {
		return fmt.Errorf("shorten %d: %w", id, ErrUnknownReservation)
	}
	if r.Fixed {
		return fmt.Errorf("shorten %d: %w", id, ErrFixed)
	}
	if end <= r.Start || end > r.End {
		return fmt.Errorf("shorten %d to %d: not in (%d, %d]: %w", id, end, r.Start, r.End, ErrInvalid)
	}
	p.prof.Add(end, r.End, r.Procs)
	r.End = end
	p.res[id] = r
	return nil
}

// Move re-places reservation id at [start, end) (re-planning). The new slot
// must lie in the window and be free apart from the reservation itself;
// otherwise the plan is unchanged. A fixed reservation cannot move.
func (p *Plan) Move(id int64, start, end int64) error {
	r, ok := p.res[id]
	if !ok {
		return fmt.Errorf("move %d: %w", id, ErrUnknownReservation)
	}
	if r.Fixed {
		return fmt.Errorf("move %d: %w", id, ErrFixed)
	}
	nr := r
	nr.Start, nr.End = start, end
	if err := p.check(nr); err != nil {
		return fmt.Errorf("move: %w", err)
	}
	p.prof.Add(r.Start, r.End, r.Procs)
	if !p.prof.Fits(nr.Procs, start, end) {
		p.prof.Add(r.Start, r.End, -r.Procs)
		return fmt.Errorf("move %d to [%d, %d): %w", id, start, end, ErrNoFit)
	}
	p.prof.Add(start, end, -r.Procs)
	p.res[id] = nr
	return nil
}

// Extend moves the end of reservation id forward to end, if the processors
// are free and the window allows (an overbooked job growing back).
func (p *Plan) Extend(id int64, end int64) error {
	r, ok := p.res[id]
	if !ok {
		return fmt.Errorf("extend %d: %w", id, ErrUnknownReservation)
	}
	if r.Fixed {
		return fmt.Errorf("extend %d: %w", id, ErrFixed)
	}
	if end <= r.End || end > r.Deadline {
		return fmt.Errorf("extend %d to %d: not in (%d, %d]: %w", id, end, r.End, r.Deadline, ErrInvalid)
	}
	if !p.prof.Fits(r.Procs, r.End, end) {
		return fmt.Errorf("extend %d to %d: %w", id, end, ErrNoFit)
	}
	p.prof.Add(r.End, end, -r.Procs)
	r.End = end
	p.res[id] = r
	return nil
}

// FreeUntil returns the latest end <= limit such that procs processors are
// free throughout [from, end), or from if none are free at from.
func (p *Plan) FreeUntil(procs int, from, limit int64) int64 {
	if p.prof.Free(from) < procs {
		return from
	}
	return min(limit, p.prof.firstAfter(from, int32(procs), false))
}

// EndingAt appends to dst the reservations that end exactly at t, ordered by
// id, and returns the extended slice. It scans the plan; it serves the
// comprehensive risk computation, which asks once per candidate gap.
func (p *Plan) EndingAt(dst []Reservation, t int64) []Reservation {
	n := len(dst)
	for _, r := range p.res {
		if r.End == t {
			dst = append(dst, r)
		}
	}
	sort.Slice(dst[n:], func(i, j int) bool { return dst[n+i].ID < dst[n+j].ID })
	return dst
}
