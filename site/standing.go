package site

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fedsched/fedsched/plan"
)

// Standing reservations, as a node keeps them (node/reservations.go): the
// instances of the rules are laid into the plan only as far as placements
// reach (and at least the standing horizon ahead), and every placement is
// kept clear of the instances not laid yet, so that the plan is the one
// all instances laid in advance would give. A job the rules leave no room
// for is rejected (plan.StandingExcludes). A rule held from the start
// (Config.Standing) never finds work in an instance's way; one added while
// work is planned (AddStanding), or laid again at Restore, may: waiting
// jobs in its way are displaced (DecideDisplaced, as Reserve's displace),
// and an instance a running job or a hold for a peer is in is skipped and
// counted (Instances).

// defaultStandingHorizon is how far ahead the instances are laid at every
// tick at least (a node's default standing horizon), so that the outlook a
// site gossips counts them.
const defaultStandingHorizon = 7 * 24 * 3600

// standingRule is one rule's instances in the plan.
type standingRule struct {
	inst    map[int64]plan.Window // core id -> instance laid
	skipped int
}

// horizon is how far ahead the rules are laid at least.
func (a *Agent) horizon() int64 {
	if a.cfg.StandingHorizon > 0 {
		return a.cfg.StandingHorizon
	}
	return defaultStandingHorizon
}

// layTo lays the instances of every rule as far as the plan needs to reach
// want (and at least the horizon ahead of now): a seventh of the horizon
// beyond, as a node does (reservations.target).
func (a *Agent) layTo(now, want int64) {
	h := a.horizon()
	if len(a.cfg.Standing) == 0 || max(want, now+h) <= a.laidTo {
		return
	}
	to := max(want, now+h) + max(1, h/7)
	for i := range a.cfg.Standing {
		r := &a.cfg.Standing[i]
		for _, w := range r.Instances(max(now, a.laidTo), to) {
			if w.Start < a.laidTo || w.End <= now {
				continue // laid before, or over
			}
			a.layInstance(now, r, w)
		}
	}
	a.laidTo = to
}

// layInstance lays one instance of r. Waiting jobs in its way are
// displaced; a running job, a hold or a fixed reservation in its way makes
// it skip the instance (counted).
func (a *Agent) layInstance(now int64, r *plan.Standing, w plan.Window) {
	a.fixedID--
	f := plan.FixedSpec{ID: a.fixedID, Name: r.Name, Procs: r.Procs, Start: w.Start, End: w.End}
	ds, err := a.site.AddFixed(now, f, false)
	if ce, ok := errors.AsType[*plan.ConflictError](err); ok {
		if c := a.conflict(ce); len(c.Running) == 0 && len(c.Held) == 0 {
			ds, err = a.site.AddFixed(now, f, true)
		}
	}
	sr := a.laid[r.Name]
	if err != nil {
		sr.skipped++
		return
	}
	sr.inst[f.ID] = w
	a.displaced(now, f, ds)
}

// forgetOver forgets the instances that are over by now.
func (a *Agent) forgetOver(now int64) {
	for _, sr := range a.laid {
		maps.DeleteFunc(sr.inst, func(_ int64, w plan.Window) bool { return w.End <= now })
	}
}

// clearOfStanding keeps a placement just made clear of the rules'
// instances (plan.KeepClearOfStanding, the node's rule too): undo takes
// it out, redo makes it again.
func (a *Agent) clearOfStanding(now int64, pj plan.Job, pl plan.Placement, undo func(), redo func() plan.Placement) plan.Placement {
	return plan.KeepClearOfStanding(a.cfg.Standing, a.cfg.Procs, pj, now, pl, agentLayer{a}, undo, redo)
}

// agentLayer lays the agent's rules for plan.KeepClearOfStanding.
type agentLayer struct{ a *Agent }

func (l agentLayer) LaidTo() int64       { return l.a.laidTo }
func (l agentLayer) LayTo(now, to int64) { l.a.layTo(now, to) }

// layForQueue lays the rules as far as the waiting jobs of a queue policy
// reach if they start now, before a pass starts any of them (the node's
// tickReservations).
func (a *Agent) layForQueue(now int64) {
	if len(a.cfg.Standing) == 0 || a.cfg.Policy == plan.Conservative {
		return
	}
	reach := now
	a.ids = a.site.WaitingIDs(a.ids[:0])
	for _, id := range a.ids {
		if jb := a.byID[id]; jb != nil {
			reach = max(reach, now+jb.pj.Estimate)
		}
	}
	a.layTo(now, reach)
}

// jobsReach is the latest end of a job's reservation in the plan (at
// least now): how far the rules are laid before a rule is added, so that
// every job in a new rule's way shows.
func (a *Agent) jobsReach(now int64) int64 {
	reach := now
	for r := range a.site.Plan().All() {
		if !r.Fixed && r.End > reach && a.byID[r.ID] != nil {
			reach = r.End
		}
	}
	return reach
}

// StandingWindows lays the rules held as far as the jobs reach (as
// AddStanding does first) and returns the instances of r that AddStanding
// would lay at now: a driver checks what stands in their way with them.
func (a *Agent) StandingWindows(now int64, r plan.Standing) []plan.Window {
	ws, _ := a.standingWindows(now, r)
	return ws
}

// standingWindows is StandingWindows, and how far the rules are laid once
// r is added.
func (a *Agent) standingWindows(now int64, r plan.Standing) ([]plan.Window, int64) {
	reach := a.jobsReach(now)
	a.layTo(now, reach)
	to := a.laidTo
	if len(a.cfg.Standing) == 0 {
		h := a.horizon()
		to = max(reach, now+h) + max(1, h/7)
	}
	return slices.DeleteFunc(r.Instances(now, to), func(w plan.Window) bool { return w.End <= now }), to
}

// AddStanding adds the standing reservation r at now (r.Name names it,
// unique among the rules): its instances are laid as far as the others
// (StandingWindows), and further ones as placements reach. Nothing
// changes unless every instance laid now fits: fixed reservations that
// leave no room fail with plan.ErrNoFit; jobs in the way refuse it (a
// *ReservationConflict) unless displace is asked and none of them is
// running or held, and then they are displaced (DecideDisplaced). A
// DecideStanding records the rule for the driver.
func (a *Agent) AddStanding(now int64, r plan.Standing, displace bool) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("site agent %s: standing reservation: %w: %w", a.cfg.Name, err, plan.ErrInvalid)
	}
	if r.Procs > a.cfg.Procs {
		return fmt.Errorf("site agent %s: standing reservation %q holds %d processors of %d: %w", a.cfg.Name, r.Name, r.Procs, a.cfg.Procs, plan.ErrInvalid)
	}
	if _, ok := a.laid[r.Name]; ok {
		return fmt.Errorf("site agent %s: standing reservation %q exists: %w", a.cfg.Name, r.Name, plan.ErrInvalid)
	}
	ws, to := a.standingWindows(now, r)
	var jobs []int64
	for _, w := range ws {
		if !a.fits(r.Procs, w) {
			return fmt.Errorf("site agent %s: standing reservation %q over [%d, %d): fixed reservations leave no room: %w", a.cfg.Name, r.Name, w.Start, w.End, plan.ErrNoFit)
		}
		jobs = append(jobs, a.site.Conflicts(plan.FixedSpec{Procs: r.Procs, Start: w.Start, End: w.End})...)
	}
	slices.Sort(jobs)
	if jobs = slices.Compact(jobs); len(jobs) > 0 {
		c := a.conflict(&plan.ConflictError{Jobs: jobs, Displace: displace})
		if !displace || len(c.Running) > 0 || len(c.Held) > 0 {
			return c
		}
	}
	a.cfg.Standing = append(slices.Clip(a.cfg.Standing), r)
	a.laid[r.Name] = &standingRule{inst: map[int64]plan.Window{}}
	a.rules.Clear = a.clearOfStanding
	a.decide(Decision{Kind: DecideStanding, Standing: &r}) // before the jobs it displaces
	for _, w := range ws {
		a.layInstance(now, &r, w)
	}
	a.laidTo = to
	a.dirty = true
	return nil
}

// fits reports whether the fixed reservations leave procs processors over
// w, with every job gone.
func (a *Agent) fits(procs int, w plan.Window) bool {
	prof := plan.NewProfile(a.cfg.Procs)
	for _, f := range a.site.Fixed() {
		if f.Start < w.End && w.Start < f.End {
			prof.Add(max(f.Start, w.Start), min(f.End, w.End), -f.Procs)
		}
	}
	return prof.Fits(procs, w.Start, w.End)
}

// RemoveStanding removes the standing reservation name and every instance
// of it in the plan at now (a DecideUnstanding records it); the jobs
// planned after them may move earlier at the next pass. It reports false
// if there is no such rule.
func (a *Agent) RemoveStanding(now int64, name string) bool {
	sr, ok := a.laid[name]
	if !ok {
		return false
	}
	for id := range sr.inst {
		a.site.RemoveFixed(now, id) //nolint:errcheck // the plan may have dropped it at its end
	}
	delete(a.laid, name)
	i := slices.IndexFunc(a.cfg.Standing, func(r plan.Standing) bool { return r.Name == name })
	r := a.cfg.Standing[i]
	a.cfg.Standing = slices.Delete(slices.Clone(a.cfg.Standing), i, i+1)
	a.dirty = true
	a.decide(Decision{Kind: DecideUnstanding, Standing: &r})
	return true
}

// StandingWake is when a Tick next lays instances further (plan.Forever:
// no rules): a driver that ticks only when the agent's NextWake is due
// also ticks then, to keep the horizon laid.
func (a *Agent) StandingWake() int64 {
	if len(a.cfg.Standing) == 0 {
		return plan.Forever
	}
	return a.laidTo - a.horizon() + 1
}

// Instances are the instances of the standing reservation name in the
// plan now, by core id (a copy), and how many were skipped because a
// running job or a hold was in their way; ok is false if there is no such
// rule.
func (a *Agent) Instances(name string) (inst map[int64]plan.Window, skipped int, ok bool) {
	sr, ok := a.laid[name]
	if !ok {
		return nil, 0, false
	}
	return maps.Clone(sr.inst), sr.skipped, true
}
