package node

import (
	"github.com/fedsched/fedsched/node/auth"
)

// seenBy is what id may see of a snapshot (docs/security.md, "What a user
// sees"): operators, sites and insecure callers see everything; a user
// sees its own jobs in full, and of the rest of the plan only what
// occupies the site (the processors and times of other users' jobs and of
// holds, without their ids, users, sites or estimates) and the operators'
// reservations, which ListReservations shows every user anyway. The
// site's totals (running, pending, free processors) and its peers are the
// answer of GetSite, which every identity may call.
func (s *SiteSnapshot) seenBy(id auth.Identity) *SiteSnapshot {
	if id.Kind != auth.User {
		return s
	}
	v := *s
	v.Jobs, v.Agreements, v.Entries, v.Queued = nil, nil, nil, nil
	own := map[string]bool{}
	for _, j := range s.Jobs {
		if j.User == id.Name {
			own[j.ID] = true
			v.Jobs = append(v.Jobs, j)
		}
	}
	for _, e := range s.Entries {
		switch {
		case e.User == id.Name && (e.Kind == EntryRunning || e.Kind == EntryPending):
			own[e.ID] = true
		case e.Kind == EntryRunning || e.Kind == EntryPending || e.Kind == EntryHold:
			e = PlanEntry{Kind: e.Kind, Procs: e.Procs, Start: e.Start, End: e.End}
		}
		v.Entries = append(v.Entries, e)
	}
	for _, e := range s.Queued {
		if e.User == id.Name {
			v.Queued = append(v.Queued, e)
		}
	}
	// The agreements of the user's delegated jobs; those of jobs run for
	// peers belong to other sites' users.
	for _, a := range s.Agreements {
		if a.Role == roleOrigin && own[a.JobID] {
			v.Agreements = append(v.Agreements, a)
		}
	}
	return &v
}
