package plan

import (
	"cmp"
	"slices"
	"sort"
)

// The deadline policies (EDF, LTTR) keep the waiting queue sorted by a key
// computed from the job at submission, ties broken by submission order, and
// otherwise schedule like EASY (see docs/policies.md). The queue is kept
// sorted on insertion (a binary search and one copy), so a pass never sorts
// it, nor scans it to check: every path that hands out a submission number
// and keeps the order counts it (Site.inOrder), and only when another path
// (Restore, which appends in call order) has handed one out does the next
// pass sort.

// Key is the job's place in the queue of a deadline policy: under EDF its
// deadline; under LTTR its latest time to run, deadline − forecast (the
// estimate when the job has no forecast). A job without a deadline has key
// Forever and so waits behind every job that has one. Other policies order
// by submission and have no key: Key returns 0.
func (p Policy) Key(j *Job) int64 {
	if !p.DeadlineOrdered() {
		return 0
	}
	if j.Deadline >= Forever {
		return Forever
	}
	if p == EDF {
		return j.Deadline
	}
	f := j.Forecast
	if f <= 0 {
		f = j.Estimate
	}
	return j.Deadline - f
}

// cmpQueued orders two waiting entries of the site's queue: by key, then by
// submission order. Under the submission-order policies every key is 0.
func (s *Site) cmpQueued(a, b *entry) int {
	if c := cmp.Compare(s.cfg.Policy.Key(&a.job), s.cfg.Policy.Key(&b.job)); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// enqueue adds an accepted waiting job to the queue: at the end under the
// submission-order policies, at its key's place under EDF and LTTR.
func (s *Site) enqueue(e *entry) {
	s.noteQueued(e)
	if !s.cfg.Policy.DeadlineOrdered() {
		s.appendWaiting(e)
		return
	}
	i := sort.Search(len(s.waiting), func(i int) bool { return s.cmpQueued(s.waiting[i], e) > 0 })
	s.noteWake(e)
	s.waiting = slices.Insert(s.waiting, i, e)
}

// sortQueue restores key order if something appended to the queue without
// enqueue since the last pass (Restore keeps the order of its calls).
func (s *Site) sortQueue() {
	if s.inOrder != s.seq {
		slices.SortFunc(s.waiting, s.cmpQueued)
		s.inOrder = s.seq
	}
}

// reserveSoft reserves pl for e with the job's deadline as a target only:
// the reservation's window ends at Forever, so a job that can no longer meet
// its deadline still runs (EDF, LTTR).
func (s *Site) reserveSoft(e *entry, pl Placement, fitted bool) error {
	err := s.plan.reserve(Reservation{ID: e.job.ID, Procs: e.job.Procs, Start: pl.Start, End: pl.End, Release: e.job.Release, Deadline: Forever}, fitted)
	if err == nil {
		e.place = pl
	}
	return err
}
