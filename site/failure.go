package site

import (
	"github.com/fedsched/fedsched/plan"
)

// NodeDown takes one of the site's processors out of service at now (a
// node failure the driver injects; pick chooses which, as in
// plan.Site.NodeDown). The job running on it, if any, is stopped and placed
// again from now inside its window, to run from the start (the thesis's
// restart of disabled jobs); waiting reservations that no longer fit are
// placed again, and those that cannot be are lost. The job the failure
// stopped, and every job it lost, gets a DecideFailed (Placement.OK() when
// it was placed again); a waiting job placed again gets a DecideMove
// (with Config.TrackMoves); the origin of a lost job delegated here gets a
// report (not completed).
// The runtime statistics learn nothing from a failure: it says nothing of
// how long the job needed.
func (a *Agent) NodeDown(now int64, pick int) {
	a.dirty = true
	hit, lost := a.site.NodeDown(now, pick)
	if jb := a.byID[hit]; hit != 0 && jb != nil && jb.cancelled {
		// Being killed for its cancel anyway: it ended now.
		out := Outcome{Start: jb.start, End: now, Cancelled: true}
		a.settle(now, jb, Decision{Kind: DecideEnd, Job: jb.key, Outcome: out}, out)
	} else if hit != 0 && jb != nil {
		jb.started = false
		pj := jb.pj
		pj.Release = now
		pl := a.site.Submit(now, pj)
		pl = a.clearOfStanding(now, pj, pl, func() { a.site.Cancel(now, pj.ID) }, func() plan.Placement { return a.site.Submit(now, pj) })
		if pl.OK() {
			jb.pj.Release, jb.place = now, pl
			a.decide(Decision{Kind: DecideFailed, Job: jb.key, Placement: pl, Route: jb.route, Spec: jb.pj})
		} else {
			a.lose(now, jb, pl, jb.start)
		}
	}
	for _, id := range lost {
		if jb := a.byID[id]; jb != nil {
			a.lose(now, jb, plan.Placement{Reason: plan.ReasonRejectedNoGap}, now) // waiting: it never started
		}
	}
	a.moves() // the reservations placed again, in this batch: a restart before the next pass restores them there
}

// lose gives up a job a failure took away: the driver is told, and the
// origin of a job delegated here gets its report (the job ran from start,
// or never: start is now).
func (a *Agent) lose(now int64, jb *job, pl plan.Placement, start int64) {
	a.settle(now, jb, Decision{Kind: DecideFailed, Job: jb.key, Placement: pl, Route: jb.route}, Outcome{Start: start, End: now})
}

// NodeUp returns the longest-failed processor to service at now; it
// reports false if none is down.
func (a *Agent) NodeUp(now int64) bool {
	if !a.site.NodeUp(now) {
		return false
	}
	a.dirty = true
	return true
}

// Down is the number of the site's processors out of service.
func (a *Agent) Down() int { return a.site.Down() }
