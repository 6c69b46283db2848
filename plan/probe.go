package plan

import (
	"math"
	"slices"
)

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
		jc := j // only this branch hands out a pointer: j itself stays off the heap
		return s.adm.Admit(s.plan, &jc, now)
	}
	if s.CanStartNow(now, j) {
		return Placement{Start: now, End: now + j.Estimate, Reason: ReasonPlacedInFull}
	}
	return Placement{Start: Forever, End: Forever, Reason: ReasonQueued}
}

// CanStartNow reports whether j would start at now if it were submitted
// now: under Conservative, its earliest fit is now; under the queue
// policies, the site's own scheduling pass at now, run with j appended to
// the queue (at its key's place under EDF and LTTR), starts it. This is
// ACF's test on both sides: a site offers exactly the jobs its own policy
// would not start now, and a peer accepts only what its own policy would
// start now. A job EASY backfills past a waiting head starts now; a job
// behind a head that fits now starts now too if both fit. Nothing changes.
func (s *Site) CanStartNow(now int64, j Job) bool {
	if j.Procs <= 0 || j.Procs > s.cfg.Procs || j.Estimate <= 0 || max(now, j.Release) != now || now+j.Estimate > j.Deadline {
		return false
	}
	if !s.plan.prof.Fits(j.Procs, now, now+j.Estimate) {
		return false
	}
	if s.cfg.Policy == Conservative || len(s.waiting) == 0 {
		return true
	}
	return s.dryPass(now, j)
}

// dryPass runs the queue policy's pass at now with j added to the queue and
// undoes everything it did, reporting whether j started.
func (s *Site) dryPass(now int64, j Job) bool {
	saved := slices.Clone(s.waiting)
	places := make([]Placement, len(saved))
	for i, e := range saved {
		places[i] = e.place
	}
	seq, inOrder, n := s.seq, s.inOrder, len(s.out)
	// The probe takes an id nothing in the plan uses, whatever j.ID is.
	j.ID = math.MinInt64
	for _, used := s.plan.Get(j.ID); used; _, used = s.plan.Get(j.ID) {
		j.ID++
	}
	if s.cfg.Policy.DeadlineOrdered() {
		s.sortQueue()
	}
	s.seq++
	s.inOrder++
	s.enqueue(&entry{job: j, seq: s.seq})
	switch s.cfg.Policy {
	case FCFS:
		s.startQueued(now, false, false, false)
	case EASY:
		s.startQueued(now, true, true, false)
	case LIST:
		s.startQueued(now, true, false, false)
	case EDF, LTTR:
		s.startQueued(now, true, true, true)
	}
	started := false
	for _, d := range s.out[n:] {
		if d.Kind != DecideStart {
			continue
		}
		s.plan.Release(d.JobID) //nolint:errcheck // reserved by the pass just above
		delete(s.running, d.JobID)
		started = started || d.JobID == j.ID
	}
	s.out = s.out[:n]
	s.waiting = saved
	for i, e := range saved {
		e.place = places[i]
	}
	s.seq, s.inOrder = seq, inOrder
	return started
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

// WaitingIDs appends the ids of the accepted jobs that have not started to
// dst, in queue order (submission order; key order under EDF and LTTR as
// of the last pass).
func (s *Site) WaitingIDs(dst []int64) []int64 {
	s.tidy()
	for _, e := range s.waiting {
		dst = append(dst, e.job.ID)
	}
	return dst
}
