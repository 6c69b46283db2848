package sim

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/fedsched/fedsched/plan"
)

// LeaseMode is which of the federation study's leasing strategies runs
// (Papaspyrou 2013, §6.3; Fölling et al. 2010c).
type LeaseMode int

const (
	// LeaseBLOS, Basic Leasing on Submission (the study's Fig. 6.20): a
	// new job goes to its site's queue; if it does not start and the
	// site's idle processors are too few for it, the site asks its
	// partners for a lease of the missing processors (space m_j - idle)
	// for the job's estimate (time p̄_j); with a lease, the job starts at
	// once on the idle processors and the leased ones.
	LeaseBLOS LeaseMode = iota + 1
	// LeaseCLOS, Chatty Leasing on Submission: at every submission the
	// same steps for every job of the site's queue, from the head, the
	// new job included.
	LeaseCLOS
)

func (m LeaseMode) String() string {
	switch m {
	case LeaseBLOS:
		return "lease-blos"
	case LeaseCLOS:
		return "lease-clos"
	}
	return fmt.Sprintf("LeaseMode(%d)", int(m))
}

// LeaseConfig configures a federation that leases processors (RunLease).
type LeaseConfig struct {
	Mode LeaseMode
	// Grant is the lender's rule, which the study leaves open: GrantEASY
	// (the default) or GrantIdle.
	Grant LeaseGrant
}

// LeaseGrant is a lender's rule for a lease request.
type LeaseGrant int

const (
	// GrantEASY (the default): grant if the lender's own EASY would start
	// a job of the lease's size and length now, so a lease never delays
	// the lender's queue head as its estimates stand.
	GrantEASY LeaseGrant = iota
	// GrantIdle: grant whenever the lender has the processors idle,
	// whatever its queue (its waiting jobs may then wait longer).
	GrantIdle
)

func (g LeaseGrant) String() string {
	switch g {
	case GrantEASY:
		return "easy"
	case GrantIdle:
		return "idle"
	}
	return fmt.Sprintf("LeaseGrant(%d)", int(g))
}

// RunLease replays a federation under the study's resource leasing (§6.3):
// sites lend each other processors for a bounded time instead of moving
// jobs. Every job runs at the site it was submitted to, which runs EASY on
// its own queue; a job may span two sites, its own and one lender
// (m_j = m_{j|k} + m_{j∤k}).
//
// A lease request carries a number of processors and a time span: the
// processors a queued job lacks beyond its site's idle ones, for the job's
// estimate. It goes to the other sites in site order (the study has no
// location policy for leasing and ran only two sites); the first that
// grants it lends the processors, and the job starts at once on its site's
// idle processors (possibly none, under CLOS) and the leased ones: it is
// prioritised over the site's queue, whose head may then wait longer.
//
// The lender's rule, which the study leaves open (only that it applies its
// own policy to "submission behaviour, current usage and backlog"): by
// default (GrantEASY) a site grants a lease if its EASY would start a job
// of that many processors and that estimate now (canStart: enough idle
// processors, and its queue empty or the lease ending before its head's
// reservation, or using only processors the head leaves spare). So a lease
// never delays the lender's own queue as its estimates stand, and a busy
// site refuses. GrantIdle grants whenever the processors are idle.
//
// For the lease's time the lender's capacity is smaller by the lease: its
// EASY sees the lease as a running job ending at the lease's end (the
// job's start plus its estimate). The borrower gains exactly the leased
// processors, all of them held by the job (the lease is sized to it), so
// no other job and no third site can use them: leased processors are never
// re-granted. A job is killed at its estimate, so it never outlives its
// lease; the lease returns when the job completes (early if it ends before
// its estimate), at both sites at once.
//
// Event order at each time t: ends at every site (jobs and the leases they
// held), then an EASY pass at every site over its queue (site order), then
// submissions (site order, then each site's job order), each followed by
// an EASY pass at its site and its leasing step; repeated at t while jobs
// with a zero runtime end.
func RunLease(ctx context.Context, sites []FedSite, cfg LeaseConfig) (*FedResult, error) {
	if cfg.Mode != LeaseBLOS && cfg.Mode != LeaseCLOS {
		return nil, fmt.Errorf("lease: mode %v: want lease-blos or lease-clos: %w", cfg.Mode, ErrBadConfig)
	}
	if cfg.Grant != GrantEASY && cfg.Grant != GrantIdle {
		return nil, fmt.Errorf("lease: grant %v: want easy or idle: %w", cfg.Grant, ErrBadConfig)
	}
	res, ps, subs, err := studyRecords("lease", sites)
	if err != nil {
		return nil, err
	}
	r := leaseRun{poolRun: poolRun{pol: plan.EASY, res: res, sites: ps}, mode: cfg.Mode, grant: cfg.Grant}
	res.Leasing = make([]LeaseStats, len(sites))
	err = r.replay(ctx, "lease", subs, func(t int64, due []fedSubmit) {
		r.easyLocal(t)
		for _, sub := range due {
			r.submit(t, sub.site, sub.idx)
		}
	})
	if err != nil {
		return nil, err
	}
	res.leaseTotals()
	return res, nil
}

// LeaseStats is what a site of a leasing federation asked for and lent.
type LeaseStats struct {
	// Requests counts the lease requests the site sent (one per partner
	// asked), Refused those refused; Leases counts its jobs that ran with
	// a lease, Lent the leases it granted.
	Requests int `json:"requests"`
	Refused  int `json:"refused"`
	Leases   int `json:"leases"`
	Lent     int `json:"lent"`
	// PeakIn and PeakOut are the most processors the site held leased
	// from others, and had leased to others, at one time.
	PeakIn  int `json:"peak_leased_in_procs"`
	PeakOut int `json:"peak_leased_out_procs"`
	// AreaIn and AreaOut are the squashed area the site ran on leased
	// processors and the others ran on its processors (SA^λ), in
	// processor-seconds.
	AreaIn  float64 `json:"leased_area_in"`
	AreaOut float64 `json:"leased_area_out"`
}

// leaseTotals fills Leasing's counts and peaks from the records.
func (r *FedResult) leaseTotals() {
	type ev struct {
		at int64
		d  int
	}
	in, out := make([][]ev, len(r.Sites)), make([][]ev, len(r.Sites))
	for i := range r.Records {
		f := &r.Records[i]
		if f.Leased == 0 || !f.Started {
			continue
		}
		a := f.leasedArea()
		r.Leasing[f.Exec].Leases++
		r.Leasing[f.Exec].AreaIn += a
		r.Leasing[f.Lender].Lent++
		r.Leasing[f.Lender].AreaOut += a
		in[f.Exec] = append(in[f.Exec], ev{f.Start, f.Leased}, ev{f.End, -f.Leased})
		out[f.Lender] = append(out[f.Lender], ev{f.Start, f.Leased}, ev{f.End, -f.Leased})
	}
	peak := func(evs []ev) int {
		// Ends before starts at one time: a lease returned at t is free
		// for one granted at t.
		slices.SortFunc(evs, func(a, b ev) int {
			if a.at != b.at {
				return cmp.Compare(a.at, b.at)
			}
			return cmp.Compare(a.d, b.d)
		})
		n, top := 0, 0
		for _, e := range evs {
			n += e.d
			top = max(top, n)
		}
		return top
	}
	for k := range r.Sites {
		l := &r.Leasing[k]
		l.PeakIn, l.PeakOut = peak(in[k]), peak(out[k])
	}
}

type leaseRun struct {
	poolRun
	mode  LeaseMode
	grant LeaseGrant
}

// submit enqueues job i at its site k (step 1), lets k's EASY start what it
// starts, then runs the leasing step: for the new job (BLOS) or for every
// queued job from the head (CLOS).
func (r *leaseRun) submit(t int64, k int, i int32) {
	s := &r.sites[k]
	s.local = append(s.local, i)
	if started, _ := r.pass(t, k, s.local); len(started) > 0 {
		s.local = slices.DeleteFunc(s.local, func(x int32) bool { return r.res.Records[x].Started })
	}
	switch r.mode {
	case LeaseBLOS:
		if !r.res.Records[i].Started {
			r.lease(t, k, i)
		}
	case LeaseCLOS:
		for _, q := range slices.Clone(s.local) {
			r.lease(t, k, q)
		}
	}
}

// lease is steps 2-4 for job i queued at site k: if k's idle processors
// suffice, nothing (the job waits for its site's EASY); otherwise a request
// for the missing processors for the job's estimate goes to the other
// sites in site order, and the first grant starts the job. It reports
// whether the job started.
func (r *leaseRun) lease(t int64, k int, i int32) bool {
	f := &r.res.Records[i]
	idle := r.sites[k].free
	if f.Procs <= idle {
		return false
	}
	space := f.Procs - idle
	st := &r.res.Leasing[k]
	for l := range r.sites {
		if l == k {
			continue
		}
		st.Requests++
		if r.grants(t, l, space, f.Estimate) {
			r.startLeased(t, k, i, l, space)
			return true
		}
		st.Refused++
	}
	return false
}

// grants is the lender's decision on a request for space processors for
// est seconds: its EASY would start such a job now (GrantEASY), or it has
// them idle (GrantIdle).
func (r *leaseRun) grants(t int64, l int, space int, est int64) bool {
	if r.grant == GrantIdle {
		return space <= r.sites[l].free
	}
	return space <= r.sites[l].procs && r.canStart(t, l, space, est)
}

// startLeased starts job i at site k on k's idle processors and space
// processors leased from site l, for the job's estimate.
func (r *leaseRun) startLeased(t int64, k int, i int32, l int, space int) {
	s := &r.sites[k]
	s.local = slices.DeleteFunc(s.local, func(x int32) bool { return x == i })
	f := &r.res.Records[i]
	f.Leased, f.Lender = space, l
	r.start(t, k, i)
	// start took all the job's processors from k: k keeps only its own
	// share busy; the lender holds the lease until the job ends.
	s.free += space
	s.running[len(s.running)-1].procs -= space
	lender := &r.sites[l]
	lender.free -= space
	lender.running = append(lender.running, running{rec: i, estEnd: t + f.Estimate, procs: space})
	heap.Push(&r.ends, poolEnd{at: t + min(f.Runtime, f.Estimate), site: l, rec: i, lease: true})
}
