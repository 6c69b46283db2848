package plan

import (
	"fmt"
	"time"
)

// Window is an interval [Start, End) of plan time.
type Window struct {
	Start, End int64
}

// Len is the length of the window in seconds.
func (w Window) Len() int64 { return w.End - w.Start }

const (
	daySeconds  = 24 * 60 * 60
	weekSeconds = 7 * daySeconds
)

// Standing is a standing reservation: a rule that repeats a fixed
// reservation of Procs processors. Its instances start at Start, Start+Every,
// Start+2*Every, ..., each lasting Length seconds, as long as they start
// before Until. If Weekdays is not empty, only the instances whose start
// falls on one of those days (in UTC) are kept.
//
// Plan time is a count of seconds with no calendar. Epoch says which Unix
// time corresponds to plan time 0, so that an instance starting at plan time
// t starts at Unix time Epoch+t; its weekday is that of Epoch+t in UTC. A
// simulator replaying an SWF trace sets Epoch to the header's UnixStartTime;
// a node whose plan time is Unix time leaves it 0. Epoch matters only with
// Weekdays.
//
// All arithmetic is on integers; there is no floating time.
type Standing struct {
	// Name names the rule in reports (e.g. "maintenance").
	Name string
	// Procs is the number of processors each instance holds. Must be > 0.
	Procs int
	// Start is the start of the first instance (before any weekday filter).
	Start int64
	// Every is the period P, in seconds. Must be > 0.
	Every int64
	// Length is how long each instance lasts, in seconds: 0 < Length <= Every,
	// so that instances of one rule never overlap.
	Length int64
	// Until: no instance starts at or after Until. 0 or Forever: no end.
	Until int64
	// Weekdays, if not empty, keeps only the instances that start on one of
	// these days (UTC, see Epoch).
	Weekdays []time.Weekday
	// Epoch is the Unix time of plan time 0, in seconds.
	Epoch int64
}

// until returns the rule's end with 0 read as Forever.
func (st *Standing) until() int64 {
	if st.Until == 0 {
		return Forever
	}
	return st.Until
}

// Validate reports whether the rule is well formed. Errors wrap ErrInvalid.
func (st *Standing) Validate() error {
	u := st.until()
	switch {
	case st.Procs <= 0:
		return fmt.Errorf("standing reservation %q: procs %d: %w", st.Name, st.Procs, ErrInvalid)
	case st.Every <= 0 || st.Every >= Forever:
		return fmt.Errorf("standing reservation %q: period %d s: %w", st.Name, st.Every, ErrInvalid)
	case st.Length <= 0 || st.Length > st.Every:
		return fmt.Errorf("standing reservation %q: length %d s not in (0, period %d s]: %w", st.Name, st.Length, st.Every, ErrInvalid)
	case st.Start <= Never || st.Start >= Forever:
		return fmt.Errorf("standing reservation %q: start %d out of range: %w", st.Name, st.Start, ErrInvalid)
	case u <= st.Start || u > Forever:
		return fmt.Errorf("standing reservation %q: until %d not after start %d: %w", st.Name, st.Until, st.Start, ErrInvalid)
	case st.Epoch <= Never || st.Epoch >= Forever:
		return fmt.Errorf("standing reservation %q: epoch %d out of range: %w", st.Name, st.Epoch, ErrInvalid)
	}
	for _, d := range st.Weekdays {
		if d < time.Sunday || d > time.Saturday {
			return fmt.Errorf("standing reservation %q: weekday %d: %w", st.Name, int(d), ErrInvalid)
		}
	}
	return nil
}

// floorDiv and floorMod divide rounding towards minus infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// weekday returns the UTC weekday of Unix time epoch+t without overflow:
// Unix day 0 (1 January 1970) was a Thursday.
func weekday(epoch, t int64) time.Weekday {
	w := (floorMod(epoch, weekSeconds) + floorMod(t, weekSeconds)) % weekSeconds
	return time.Weekday((w/daySeconds + int64(time.Thursday)) % 7)
}

// Instances returns the instances of the rule whose [start, end) intersects
// [from, to), in time order. An invalid rule (see Validate) has none. The
// cost is one step per period in the range, so give a bounded range.
func (st *Standing) Instances(from, to int64) []Window {
	if st.Validate() != nil {
		return nil
	}
	from, to = max(from, Never), min(to, Forever)
	if from >= to {
		return nil
	}
	var mask uint8
	for _, d := range st.Weekdays {
		mask |= 1 << uint(d)
	}
	// Instance k starts at s_k = Start + k*Every. It intersects [from, to)
	// iff s_k + Length > from and s_k < to; it exists iff k >= 0 and
	// s_k < Until. The bounds stay far from overflow: every operand is
	// within (Never, Forever].
	lo := max(0, floorDiv(from-st.Length-st.Start, st.Every)+1)
	limit := min(to, st.until())
	if limit <= st.Start {
		return nil
	}
	hi := floorDiv(limit-st.Start-1, st.Every) // last k with s_k < limit
	if lo > hi {
		return nil
	}
	var out []Window
	if mask == 0 {
		out = make([]Window, 0, min(hi-lo+1, 1<<16))
	}
	for k := lo; k <= hi; k++ {
		s := st.Start + k*st.Every
		if mask != 0 && mask&(1<<uint(weekday(st.Epoch, s))) == 0 {
			continue
		}
		out = append(out, Window{Start: s, End: s + st.Length})
	}
	return out
}

// cycleCap bounds Cycle.
const cycleCap = 28 * daySeconds

// Cycle is the common period of the rules: the least common multiple of
// their periods, a rule with a weekday filter counting as a week, at most
// 28 days (hourly, daily and weekly rules all repeat within it).
func Cycle(rules []Standing) int64 {
	c := int64(1)
	for i := range rules {
		p := max(rules[i].Every, 1)
		if len(rules[i].Weekdays) > 0 {
			p = lcmCapped(p, weekSeconds)
		}
		c = lcmCapped(c, p)
	}
	return c
}

func lcmCapped(a, b int64) int64 {
	if a >= cycleCap || b >= cycleCap {
		return cycleCap
	}
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return min(a/x*b, cycleCap)
}

// StandingExcludes reports whether the rules alone leave job j no room on a
// site of procs processors: from max(from, j.Release) on, within one cycle
// of the rules plus its estimate (and before its deadline), a site holding
// nothing but the rules' instances has no slot of j.Estimate seconds on
// j.Procs processors. Such a job can never run while the rules stand; a
// site rejects it rather than promise it a slot an instance will claim.
// A job the deadline alone rules out, or one wider than the site, is not
// the rules' doing: false.
func StandingExcludes(rules []Standing, procs int, j Job, from int64) bool {
	if len(rules) == 0 || j.Procs <= 0 || j.Procs > procs || j.Estimate <= 0 {
		return false
	}
	start := max(from, j.Release)
	end := min(start+Cycle(rules)+j.Estimate, j.Deadline)
	if end-start < j.Estimate {
		return false
	}
	walls := NewProfile(procs)
	for i := range rules {
		for _, w := range rules[i].Instances(start, end) {
			walls.Add(max(w.Start, start), min(w.End, end), -rules[i].Procs)
		}
	}
	_, ok := walls.EarliestFit(j.Procs, j.Estimate, start, end)
	return !ok
}

// maxLayRounds bounds how often a placement is laid further and made
// again by KeepClearOfStanding.
const maxLayRounds = 64

// StandingLayer lays a site's standing reservations lazily: LaidTo is how
// far every rule's instances are in the plan, LayTo lays them further.
type StandingLayer interface {
	LaidTo() int64
	LayTo(now, to int64)
}

// KeepClearOfStanding keeps a placement pl of job j, just made, clear of
// the instances of rules, the one rule of a node and of a site agent: a
// job the rules leave no room for (StandingExcludes) is rejected; one
// placed past the laid range is taken out (undo), the rules are laid as
// far as its end, and it is placed again (redo), until it is clear. No
// slot is ever promised that an instance will claim later.
func KeepClearOfStanding(rules []Standing, procs int, j Job, now int64, pl Placement, l StandingLayer, undo func(), redo func() Placement) Placement {
	if len(rules) == 0 || !pl.OK() {
		return pl
	}
	if pl.Reason != ReasonQueued && pl.End <= l.LaidTo() {
		return pl // clear of every instance laid, and none lies before LaidTo unlaid
	}
	if StandingExcludes(rules, procs, j, now) {
		undo()
		return Placement{Reason: ReasonRejectedNoGap}
	}
	for range maxLayRounds {
		if !pl.OK() || pl.Reason == ReasonQueued || pl.End <= l.LaidTo() {
			return pl
		}
		undo()
		l.LayTo(now, pl.End)
		pl = redo()
	}
	if pl.OK() && pl.Reason != ReasonQueued && pl.End > l.LaidTo() {
		undo()
		return Placement{Reason: ReasonRejectedNoGap}
	}
	return pl
}
