package site

import (
	"github.com/fedsched/fedsched/plan"
)

// Standing reservations, as a node keeps them (node/reservations.go): the
// instances of the rules are laid into the plan only as far as placements
// reach, and every placement is kept clear of the instances not laid yet,
// so that the plan is the one all instances laid in advance would give. A
// job the rules leave no room for is rejected (plan.StandingExcludes).
// The agent has its rules from the start, so no instance ever finds work
// in its way (a node's operator may create a rule while work is planned).

// standingHorizon is how far ahead the instances are laid at every tick at
// least (a node's default standing horizon), so that the outlook a site
// gossips counts them.
const standingHorizon = 7 * 24 * 3600

// layTo lays every instance of the rules that starts before to and has not
// ended by now.
func (a *Agent) layTo(now, to int64) {
	if len(a.cfg.Standing) == 0 || to <= a.laidTo {
		return
	}
	for i := range a.cfg.Standing {
		r := &a.cfg.Standing[i]
		for _, w := range r.Instances(a.laidTo, to) {
			if w.Start < a.laidTo || w.End <= now {
				continue // laid before, or over
			}
			a.fixedID--
			// No placement reaches past laidTo, so nothing is in the way.
			a.site.AddFixed(now, plan.FixedSpec{ID: a.fixedID, Name: r.Name, Procs: r.Procs, Start: w.Start, End: w.End}, false) //nolint:errcheck // see above
		}
	}
	a.laidTo = to
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
