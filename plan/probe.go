package plan

// Probe answers, without changing anything, what Submit would decide for j
// at now: the placement under Conservative, or for the queue policies a
// placement at now if j could start at once (its processors free for its
// whole estimate and nobody waiting ahead of it), else ReasonQueued with
// Start = Forever. A federation uses it to compare its own answer with
// peers' quotes.
func (s *Site) Probe(now int64, j Job) Placement {
	switch {
	case j.Procs <= 0 || j.Estimate <= 0 || j.Deadline-max(now, j.Release) <= 0:
		return Placement{Reason: ReasonRejectedInvalid}
	case j.Procs > s.cfg.Procs:
		return Placement{Reason: ReasonRejectedTooWide}
	}
	if s.cfg.Policy == Conservative {
		return s.adm.Admit(s.plan, &j, now)
	}
	if s.CanStartNow(now, j) {
		return Placement{Start: now, End: now + j.Estimate, Reason: ReasonPlacedInFull}
	}
	return Placement{Start: Forever, End: Forever, Reason: ReasonQueued}
}

// CanStartNow reports whether j would start at now if it were submitted:
// under the queue policies, nobody waits ahead of it and its processors are
// free for its whole estimate (the ACF acceptance rule); under Conservative,
// its earliest fit is now.
func (s *Site) CanStartNow(now int64, j Job) bool {
	if j.Procs > s.cfg.Procs || j.Estimate <= 0 {
		return false
	}
	if s.cfg.Policy != Conservative && len(s.waiting) > 0 {
		return false
	}
	return max(now, j.Release) == now && s.plan.prof.Fits(j.Procs, now, min(now+j.Estimate, j.Deadline)) && now+j.Estimate <= j.Deadline
}

// Outlook is the site's coarse free-capacity outlook: the processors free
// at now and at now plus each of the given offsets, as the plan stands (a
// hint for gossip, not a promise).
func (s *Site) Outlook(now int64, offsets ...int64) []int {
	out := make([]int, 1+len(offsets))
	out[0] = s.plan.Free(now)
	for i, d := range offsets {
		out[i+1] = s.plan.Free(now + d)
	}
	return out
}
