package sim

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// RunPool replays a federation whose sites share one central, passive job
// pool: the federation study's P-FCFS, P-EASY and P-LIST (Papaspyrou 2013,
// §5.1, Algorithm 1). Each site runs the same queue policy pol (FCFS, EASY
// or LIST) and, at every event:
//
//  1. applies pol to its own local queue and starts what pol starts;
//  2. moves every job that pass considered but could not start (the
//     FCFS head, EASY's head and its backfilling candidates, every LIST job
//     that did not fit) from the local queue to the pool;
//  3. if it started no local job, applies pol to the pool, restricted to the
//     pool's jobs it is wide enough for, and starts what pol starts there.
//
// The pool is ordered by local submission time (then origin site, then the
// job's place in its site's trace) and has lower priority than every local
// queue. A job runs for its runtime, or is killed at its estimate.
//
// Event order at each time t: ends at every site, then submissions (site
// order, then each site's job order), then steps 1 and 2 at every site in
// site order, then step 3 at every site that started no local job, in site
// order. Which site takes a pool job when several could is therefore decided
// by site order; the study does not say.
func RunPool(ctx context.Context, sites []FedSite, pol plan.Policy) (*FedResult, error) {
	switch pol {
	case plan.FCFS, plan.EASY, plan.LIST:
	default:
		return nil, fmt.Errorf("pool: policy %s: want fcfs, easy or list: %w", pol, ErrBadConfig)
	}
	res, ps, subs, err := studyRecords("pool", sites)
	if err != nil {
		return nil, err
	}
	r := poolRun{pol: pol, res: res, sites: ps, hopReason: "taken from the pool"}
	next, events := 0, 0
	for next < len(subs) || len(r.ends) > 0 {
		t := plan.Forever
		if next < len(subs) {
			t = subs[next].at
		}
		if len(r.ends) > 0 {
			t = min(t, r.ends[0].at)
		}
		if events++; events&0x3ff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("pool: %w", err)
			}
		}
		r.endDue(t)
		for next < len(subs) && subs[next].at == t {
			s := subs[next]
			next++
			ps[s.site].local = append(ps[s.site].local, s.idx)
		}
		// A job with a zero runtime ends at the time it starts: end it and
		// schedule again until nothing more starts that ends at t.
		for r.schedule(t) && len(r.ends) > 0 && r.ends[0].at == t {
			r.endDue(t)
		}
	}
	return res, nil
}

// replay is the event loop of the study's strategies that run EASY at
// every site (Shaking-G, leasing): at each event time t, the ends due at t,
// then round(t, due) with the submissions due at t in replay order; then,
// while jobs that started at t with a zero runtime end at t, their ends and
// round(t, nil) again.
func (r *poolRun) replay(ctx context.Context, what string, subs []fedSubmit, round func(t int64, due []fedSubmit)) error {
	next, events := 0, 0
	for next < len(subs) || len(r.ends) > 0 {
		t := plan.Forever
		if next < len(subs) {
			t = subs[next].at
		}
		if len(r.ends) > 0 {
			t = min(t, r.ends[0].at)
		}
		if events++; events&0x3ff == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		r.endDue(t)
		from := next
		for next < len(subs) && subs[next].at == t {
			next++
		}
		due := subs[from:next]
		for {
			round(t, due)
			due = nil
			if len(r.ends) == 0 || r.ends[0].at != t {
				break
			}
			r.endDue(t)
		}
	}
	return nil
}

// studyRecords checks the sites of one of the study's simulator-only
// strategies (every job runnable at its own site, submissions sorted) and
// returns the records, one idle site state per site, and the submissions
// in replay order.
func studyRecords(what string, sites []FedSite) (*FedResult, []poolSite, []fedSubmit, error) {
	res := &FedResult{Sites: sites}
	var subs []fedSubmit
	ps := make([]poolSite, len(sites))
	for k, s := range sites {
		if s.Procs <= 0 {
			return nil, nil, nil, fmt.Errorf("%s: site %s: %d processors: %w", what, s.Name, s.Procs, ErrBadConfig)
		}
		ps[k] = poolSite{procs: s.Procs, free: s.Procs}
		for i, j := range s.Jobs {
			if i > 0 && j.Submit < s.Jobs[i-1].Submit {
				return nil, nil, nil, fmt.Errorf("%s: site %s: job %d: %w", what, s.Name, j.ID, ErrUnsorted)
			}
			if j.Procs <= 0 || j.Procs > s.Procs || j.Estimate <= 0 || j.Runtime < 0 {
				return nil, nil, nil, fmt.Errorf("%s: site %s: job %d (%d procs, estimate %d s): not runnable at its own site: %w",
					what, s.Name, j.ID, j.Procs, j.Estimate, ErrBadConfig)
			}
			idx := int32(len(res.Records))
			res.Records = append(res.Records, FedRecord{Record: Record{Job: j}, Origin: k, Exec: k,
				Route: delegation.Route{{Site: s.Name, Action: delegation.ActionSubmitted, At: j.Submit}}})
			subs = append(subs, fedSubmit{at: j.Submit, site: k, idx: idx})
		}
	}
	sortSubmits(subs)
	return res, ps, subs, nil
}

// poolSite is one site of a pooled replay.
type poolSite struct {
	procs, free int
	local       []int32   // the local queue: record indices, in submission order
	running     []running // started and not yet ended
	started     bool      // the last local pass started a job
}

type running struct {
	rec    int32
	estEnd int64 // start + estimate: what EASY's shadow time is computed from
	procs  int
}

type poolEnd struct {
	at   int64
	site int
	rec  int32
	// lease: the end of the processors site leased to job rec's site for
	// it (RunLease), not of a job.
	lease bool
}

// poolEnds is a min-heap of running jobs by end time (then record index,
// so that equal ends are handled in a fixed order).
type poolEnds []poolEnd

func (h poolEnds) Len() int { return len(h) }
func (h poolEnds) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	if h[i].rec != h[j].rec {
		return h[i].rec < h[j].rec
	}
	return !h[i].lease && h[j].lease
}
func (h poolEnds) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *poolEnds) Push(x any)   { *h = append(*h, x.(poolEnd)) }
func (h *poolEnds) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type poolRun struct {
	pol   plan.Policy
	res   *FedResult
	sites []poolSite
	pool  []int32 // ordered by poolBefore
	ends  poolEnds
	cands []int32 // scratch
	// hopReason, if set, is the reason of the hop start adds to the route
	// of a job that starts away from its origin; empty when the strategy
	// records its migrations itself.
	hopReason string
	// onEnd, if set, is called for every job that ends, after its record
	// has its end.
	onEnd func(rec int32)
}

// poolBefore orders the pool: local submission time, then origin site, then
// the job's place in its trace (record indices grow in that order).
func (r *poolRun) poolBefore(a, b int32) int {
	ra, rb := &r.res.Records[a], &r.res.Records[b]
	if c := cmp.Compare(ra.Submit, rb.Submit); c != 0 {
		return c
	}
	if c := cmp.Compare(ra.Origin, rb.Origin); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// endDue ends every job due at t, and returns the processors leased for
// it.
func (r *poolRun) endDue(t int64) {
	for len(r.ends) > 0 && r.ends[0].at == t {
		e := heap.Pop(&r.ends).(poolEnd)
		s := &r.sites[e.site]
		i := slices.IndexFunc(s.running, func(x running) bool { return x.rec == e.rec })
		s.free += s.running[i].procs
		s.running = slices.Delete(s.running, i, i+1)
		if e.lease {
			continue // the lender has its processors back
		}
		r.res.Records[e.rec].ended(t)
		if r.onEnd != nil {
			r.onEnd(e.rec)
		}
	}
}

// schedule runs Algorithm 1 at every site and reports whether any job
// started.
func (r *poolRun) schedule(t int64) bool {
	startedAny := false
	for k := range r.sites {
		s := &r.sites[k]
		started, left := r.pass(t, k, s.local)
		s.started = len(started) > 0
		startedAny = startedAny || s.started
		if len(started) == 0 && len(left) == 0 {
			continue
		}
		// Every job the pass looked at either started or goes to the pool.
		// What it looked at is a prefix of the queue (FCFS stops at the
		// first job that does not fit; EASY and LIST look at every job),
		// so the rest stays local, in order.
		for _, i := range left {
			at, _ := slices.BinarySearchFunc(r.pool, i, r.poolBefore)
			r.pool = slices.Insert(r.pool, at, i)
		}
		s.local = slices.Delete(s.local, 0, len(started)+len(left))
	}
	for k := range r.sites {
		s := &r.sites[k]
		if s.started || len(r.pool) == 0 || s.free == 0 {
			continue
		}
		r.cands = r.cands[:0]
		for _, i := range r.pool {
			if r.res.Records[i].Procs <= s.procs {
				r.cands = append(r.cands, i)
			}
		}
		started, _ := r.pass(t, k, r.cands)
		if len(started) == 0 {
			continue
		}
		startedAny = true
		r.pool = slices.DeleteFunc(r.pool, func(i int32) bool { return slices.Contains(started, i) })
	}
	return startedAny
}

// pass applies the queue policy at site k to queue (in priority order) at
// time t: it starts the jobs the policy starts and returns them, with the
// jobs it considered but could not start.
func (r *poolRun) pass(t int64, k int, queue []int32) (started, left []int32) {
	s := &r.sites[k]
	recs := r.res.Records
	switch r.pol {
	case plan.FCFS:
		for _, i := range queue {
			if recs[i].Procs > s.free {
				return started, append(left, i)
			}
			r.start(t, k, i)
			started = append(started, i)
		}
	case plan.LIST:
		for _, i := range queue {
			if recs[i].Procs > s.free {
				left = append(left, i)
				continue
			}
			r.start(t, k, i)
			started = append(started, i)
		}
	case plan.EASY:
		h := 0
		for h < len(queue) && recs[queue[h]].Procs <= s.free {
			r.start(t, k, queue[h])
			started = append(started, queue[h])
			h++
		}
		if h == len(queue) {
			return started, nil
		}
		head := queue[h]
		left = append(left, head)
		shadow, extra := s.shadow(recs[head].Procs)
		for _, i := range queue[h+1:] {
			j := &recs[i]
			short := t+j.Estimate <= shadow
			if j.Procs <= s.free && (short || j.Procs <= extra) {
				r.start(t, k, i)
				started = append(started, i)
				if !short {
					extra -= j.Procs
				}
				continue
			}
			left = append(left, i)
		}
	}
	return started, left
}

// shadow is EASY's reservation for a job of procs processors that cannot
// start now: the earliest time enough processors are free, going by the
// running jobs' estimates, and how many processors are spare at that time.
func (s *poolSite) shadow(procs int) (at int64, extra int) {
	byEnd := slices.Clone(s.running)
	slices.SortFunc(byEnd, func(a, b running) int { return cmp.Compare(a.estEnd, b.estEnd) })
	free := s.free
	for i, x := range byEnd {
		free += x.procs
		// Every job ending at the same time frees its processors then.
		if free >= procs && (i+1 == len(byEnd) || byEnd[i+1].estEnd > x.estEnd) {
			return x.estEnd, free - procs
		}
	}
	// Unreachable for a job no wider than the site: every processor is free
	// once every running job has ended.
	return plan.Forever, 0
}

func (r *poolRun) start(t int64, k int, i int32) {
	s := &r.sites[k]
	f := &r.res.Records[i]
	f.Exec = k
	f.Started = true
	f.Start = t
	f.Reserved = f.Estimate
	f.Decision = plan.Placement{Start: t, End: t + f.Estimate, Reason: plan.ReasonQueued}
	if k != f.Origin && r.hopReason != "" {
		f.Route = f.Route.With(delegation.Hop{Site: r.res.Sites[k].Name, Action: delegation.ActionDelegated, At: t,
			Reason: r.hopReason})
	}
	s.free -= f.Procs
	s.running = append(s.running, running{rec: i, estEnd: t + f.Estimate, procs: f.Procs})
	heap.Push(&r.ends, poolEnd{at: t + min(f.Runtime, f.Estimate), site: k, rec: i})
}
