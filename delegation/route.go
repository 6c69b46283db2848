package delegation

import "fmt"

// Action is one step of a job's route.
type Action int

// Actions.
const (
	ActionSubmitted Action = iota + 1
	ActionQuoted
	ActionRefused
	ActionDelegated
	ActionAccepted
	ActionExecuting
)

var actionNames = [...]string{"", "submitted", "quoted", "refused", "delegated", "accepted", "executing"}

func (a Action) String() string {
	if a > 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Hop is one entry of a job's provenance: which site did what, when and why.
type Hop struct {
	Site   string `json:"site"`
	Action Action `json:"action"`
	Reason string `json:"reason,omitempty"`
	At     int64  `json:"at"`
}

// Route is the provenance of a job: its way from the submitting site to the
// executing one, in order.
type Route []Hop

// Visited reports whether site appears on the route (a job is never
// delegated back to a site it passed through).
func (r Route) Visited(site string) bool {
	for _, h := range r {
		if h.Site == site {
			return true
		}
	}
	return false
}

// WasAt reports whether the job was at site: whether site appears on the
// route other than as a peer that answered a quote for it (ActionQuoted,
// ActionRefused). The provenance of a job is the sites responsible for it
// on its way from submission to execution; a peer that only quoted or
// refused never held it. The site rules that keep a job from coming back
// (site.MayHold, site.Discloses) read this, in the simulator's agent,
// whose routes record every quote answer, and in the node, whose routes
// keep them apart.
func (r Route) WasAt(site string) bool {
	for _, h := range r {
		if h.Site == site && h.Action != ActionQuoted && h.Action != ActionRefused {
			return true
		}
	}
	return false
}

// Hops is the number of delegations on the route.
func (r Route) Hops() int {
	n := 0
	for _, h := range r {
		if h.Action == ActionDelegated {
			n++
		}
	}
	return n
}

// CanDelegate reports whether a job with this route may be delegated once
// more under a limit of maxHops delegations (0 means 1).
func (r Route) CanDelegate(maxHops int) bool {
	if maxHops <= 0 {
		maxHops = 1
	}
	return r.Hops() < maxHops
}

// With returns the route extended by h; r itself is not modified.
func (r Route) With(h Hop) Route {
	out := make(Route, len(r), len(r)+1)
	copy(out, r)
	return append(out, h)
}
