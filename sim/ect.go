package sim

import (
	"cmp"
	"slices"
)

// vsched is a site's virtual schedule (the study's \bar S_k, §5.3): a
// shadow copy of its schedule with every queued job placed first come,
// first served by its estimate. It answers the expected-completion-time
// query for one more job appended to the queue.
type vsched struct {
	at   int64  // when the last queued job starts: no later job starts before
	ends []vend // the jobs still running then, by estimated end
	free []int  // free[i]: processors free once ends[:i] have ended
}

type vend struct {
	at    int64
	procs int
}

// virtual builds site s's virtual schedule at time t for queue (record
// indices in queue order) and returns it with the expected completion time
// of every queued job, in queue order.
func (s *poolSite) virtual(t int64, recs []FedRecord, queue []int32) (vsched, []int64) {
	ends := make([]vend, 0, len(s.running)+len(queue))
	for _, x := range s.running {
		ends = append(ends, vend{at: max(x.estEnd, t), procs: x.procs})
	}
	slices.SortFunc(ends, func(a, b vend) int { return cmp.Compare(a.at, b.at) })
	at, free := t, s.free
	var ects []int64
	if len(queue) > 0 {
		ects = make([]int64, len(queue))
	}
	for q, i := range queue {
		m, est := recs[i].Procs, recs[i].Estimate
		n := 0
		for free < m {
			free += ends[n].procs
			at = max(at, ends[n].at)
			n++
		}
		ends = ends[n:]
		free -= m
		ects[q] = at + est
		// Keep ends sorted: insert the new end in place (queues are short
		// next to the trace, and this keeps the query a binary search).
		e := vend{at: at + est, procs: m}
		p, _ := slices.BinarySearchFunc(ends, e, func(a, b vend) int { return cmp.Compare(a.at, b.at) })
		ends = slices.Insert(ends, p, e)
	}
	v := vsched{at: at, ends: ends, free: make([]int, len(ends)+1)}
	v.free[0] = free
	for n, e := range ends {
		v.free[n+1] = v.free[n] + e.procs
	}
	return v, ects
}

// ect is the expected completion time of a job of procs processors and
// estimate est appended to the queue the schedule was built for.
func (v vsched) ect(procs int, est int64) int64 {
	n, _ := slices.BinarySearch(v.free, procs)
	// free[n] >= procs: the first n running jobs must end first.
	// (n <= len(ends) for a job no wider than the site.)
	if n == 0 {
		return v.at + est
	}
	return max(v.at, v.ends[n-1].at) + est
}

// canStartNow reports whether site l's EASY would start job i at t without
// delaying its queue: the processors are free and either the queue is
// empty or the job backfills (ends before the queue head's shadow time, or
// uses only processors the head leaves spare then).
func (r *poolRun) canStartNow(t int64, l int, i int32) bool {
	f := &r.res.Records[i]
	return r.canStart(t, l, f.Procs, f.Estimate)
}

// canStart is canStartNow for a job of procs processors and estimate est
// (a lease, for instance) that is not a record.
func (r *poolRun) canStart(t int64, l int, procs int, est int64) bool {
	s := &r.sites[l]
	if procs > s.free {
		return false
	}
	if len(s.local) == 0 {
		return true
	}
	head := &r.res.Records[s.local[0]]
	if head.Procs <= s.free {
		// The head starts at the next pass: it comes first.
		return procs <= s.free-head.Procs
	}
	shadow, extra := s.shadow(head.Procs)
	return t+est <= shadow || procs <= extra
}

// easyLocal runs EASY at every site over its own queue.
func (r *poolRun) easyLocal(t int64) {
	for k := range r.sites {
		s := &r.sites[k]
		if len(s.local) == 0 || s.free == 0 {
			continue
		}
		started, _ := r.pass(t, k, s.local)
		if len(started) > 0 {
			s.local = slices.DeleteFunc(s.local, func(i int32) bool { return r.res.Records[i].Started })
		}
	}
}
