package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// TestRunPoolSmall checks hand-worked cases of Algorithm 1.
func TestRunPoolSmall(t *testing.T) {
	// Site a (2 procs) is busy until 100 with job 1; job 2 (2 procs) cannot
	// start there, goes to the pool, and idle site b (4 procs) takes it at
	// once, at the same time step. Job 3 at b starts locally first.
	sites := func() []FedSite {
		return []FedSite{
			{Name: "a", Procs: 2, Jobs: []Job{
				{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 2},
				{ID: 2, Submit: 10, Runtime: 50, Estimate: 60, Procs: 2},
			}},
			{Name: "b", Procs: 4, Jobs: []Job{
				{ID: 3, Submit: 10, Runtime: 30, Estimate: 30, Procs: 3},
			}},
		}
	}
	type want struct {
		start int64
		exec  int
	}
	for _, tc := range []struct {
		pol  plan.Policy
		want []want // by record: job 1, 2, 3
	}{
		// b's local job 3 starts first (local before pool), leaving 1
		// processor: job 2 waits in the pool until b frees at 40.
		{plan.FCFS, []want{{0, 0}, {40, 1}, {10, 1}}},
		{plan.EASY, []want{{0, 0}, {40, 1}, {10, 1}}},
		{plan.LIST, []want{{0, 0}, {40, 1}, {10, 1}}},
	} {
		t.Run(tc.pol.String(), func(t *testing.T) {
			res, err := RunPool(context.Background(), sites(), tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				f := res.Records[i]
				if !f.Started || f.Start != w.start || f.Exec != w.exec {
					t.Errorf("job %d: started %v at %d on site %d, want %d on site %d", f.ID, f.Started, f.Start, f.Exec, w.start, w.exec)
				}
			}
		})
	}

	// Without b's local job, job 2 goes to b at once: the pool is consulted
	// by a site that started nothing locally.
	s := sites()
	s[1].Jobs = nil
	res, err := RunPool(context.Background(), s, plan.EASY)
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Records[1]; f.Start != 10 || f.Exec != 1 || len(f.Route) != 2 {
		t.Errorf("job 2: start %d on site %d route %v, want 10 on site 1 via the pool", f.Start, f.Exec, f.Route)
	}
	if mn, _ := res.Migrations(); mn[0][1] != 0.5 {
		t.Errorf("M_n[a][b] = %v, want 0.5", mn[0][1])
	}
}

// TestRunPoolEASYBackfillsFromPool: a pool pass is EASY over the pool: the
// pool's head gets the shadow time, shorter jobs backfill before it.
func TestRunPoolEASYBackfillsFromPool(t *testing.T) {
	sites := []FedSite{
		{Name: "a", Procs: 4, Jobs: []Job{
			{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 3},
			{ID: 2, Submit: 1, Runtime: 50, Estimate: 50, Procs: 4},
			{ID: 3, Submit: 2, Runtime: 200, Estimate: 200, Procs: 1},
			{ID: 4, Submit: 3, Runtime: 90, Estimate: 90, Procs: 1},
		}},
	}
	res, err := RunPool(context.Background(), sites, plan.EASY)
	if err != nil {
		t.Fatal(err)
	}
	got := []int64{}
	for _, f := range res.Records {
		got = append(got, f.Start)
	}
	// Job 2 cannot start at 1 and goes to the pool. Job 3 is the head of
	// the local queue at 2 and fits: it starts, ahead of the pool's job 2
	// (the pool has the lower priority). Job 4 finds no processor at 3 and
	// goes to the pool too. At 100 job 1 ends: the pool's head, job 2,
	// still cannot start (3 free, job 3 holds one until 202), so its shadow
	// time is 202 and job 4 (ends by 190) backfills from the pool. Job 2
	// starts at 202.
	want := []int64{0, 202, 2, 100}
	if !slices.Equal(got, want) {
		t.Errorf("starts %v, want %v", got, want)
	}
}

func TestRunPoolRefuses(t *testing.T) {
	ok := []FedSite{{Name: "a", Procs: 2, Jobs: []Job{{ID: 1, Runtime: 1, Estimate: 1, Procs: 1}}}}
	if _, err := RunPool(context.Background(), ok, plan.Conservative); !errors.Is(err, ErrBadConfig) {
		t.Errorf("conservative: err %v, want ErrBadConfig", err)
	}
	wide := []FedSite{{Name: "a", Procs: 2, Jobs: []Job{{ID: 1, Runtime: 1, Estimate: 1, Procs: 3}}}}
	if _, err := RunPool(context.Background(), wide, plan.EASY); !errors.Is(err, ErrBadConfig) {
		t.Errorf("too wide: err %v, want ErrBadConfig", err)
	}
	unsorted := []FedSite{{Name: "a", Procs: 2, Jobs: []Job{{ID: 1, Submit: 5, Runtime: 1, Estimate: 1, Procs: 1}, {ID: 2, Submit: 4, Runtime: 1, Estimate: 1, Procs: 1}}}}
	if _, err := RunPool(context.Background(), unsorted, plan.EASY); !errors.Is(err, ErrUnsorted) {
		t.Errorf("unsorted: err %v, want ErrUnsorted", err)
	}
}

// TestRunPoolMatchesReference replays random federations through RunPool
// and through refPool, a direct transcription of Algorithm 1 that recomputes
// everything from the records at every event, and checks every job's start
// and site, and the invariants: each job runs once, never before its
// submission, only where it fits, and no site is ever over-committed.
func TestRunPoolMatchesReference(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(3)
		sites := make([]FedSite, n)
		for k := range sites {
			procs := 1 + rng.IntN(8)
			sites[k] = FedSite{Name: string(rune('a' + k)), Procs: procs}
			var at int64
			for i := range 5 + rng.IntN(30) {
				at += int64(rng.IntN(20))
				est := int64(1 + rng.IntN(60))
				run := int64(rng.IntN(int(est) + 10)) // some run past their estimate: killed
				sites[k].Jobs = append(sites[k].Jobs, Job{ID: int64(100*k + i), Submit: at, Runtime: run, Estimate: est, Procs: 1 + rng.IntN(procs)})
			}
		}
		for _, pol := range []plan.Policy{plan.FCFS, plan.EASY, plan.LIST} {
			res, err := RunPool(context.Background(), sites, pol)
			if err != nil {
				t.Fatal(err)
			}
			ref := refPool(sites, pol)
			for i, f := range res.Records {
				if !f.Started || f.Start != ref[i].start || f.Exec != ref[i].exec {
					t.Fatalf("seed %d %s: job %d started %v at %d on %d; reference: %d on %d", seed, pol, f.ID, f.Started, f.Start, f.Exec, ref[i].start, ref[i].exec)
				}
				if f.Start < f.Submit || f.Procs > sites[f.Exec].Procs || f.End != f.Start+min(f.Runtime, f.Estimate) {
					t.Fatalf("seed %d %s: job %d: %+v", seed, pol, f.ID, f)
				}
			}
			checkNoOvercommit(t, res)
		}
	}
}

// checkNoOvercommit sweeps every site's start and end events and checks that
// the processors in use never exceed the site's. A job that runs on
// processors leased from another site holds its own part at its site and
// the leased part at the lender.
func checkNoOvercommit(t *testing.T, res *FedResult) {
	t.Helper()
	type ev struct {
		at int64
		d  int
	}
	evs := make([][]ev, len(res.Sites))
	for _, f := range res.Records {
		if f.End > f.Start {
			own := f.Procs - f.Leased
			evs[f.Exec] = append(evs[f.Exec], ev{f.Start, own}, ev{f.End, -own})
			if f.Leased > 0 {
				evs[f.Lender] = append(evs[f.Lender], ev{f.Start, f.Leased}, ev{f.End, -f.Leased})
			}
		}
	}
	for k, e := range evs {
		sort.Slice(e, func(i, j int) bool { return e[i].at < e[j].at || e[i].at == e[j].at && e[i].d < e[j].d })
		used := 0
		for _, x := range e {
			if used += x.d; used > res.Sites[k].Procs {
				t.Fatalf("site %d: %d processors in use at %d, has %d", k, used, x.at, res.Sites[k].Procs)
			}
		}
	}
}

type refStart struct {
	start int64
	exec  int
}

// refPool is Algorithm 1 written as plainly as possible: at every event time
// it recomputes each site's free processors and running jobs from the
// records, and sorts the pool afresh.
func refPool(sites []FedSite, pol plan.Policy) []refStart {
	type job struct {
		Job
		origin, order int
		started       bool
		ended         bool
		start, end    int64
		exec          int
		inPool        bool
	}
	var jobs []*job
	for k, s := range sites {
		for _, j := range s.Jobs {
			jobs = append(jobs, &job{Job: j, origin: k, order: len(jobs)})
		}
	}
	times := map[int64]bool{}
	for _, j := range jobs {
		times[j.Submit] = true
	}
	running := func(k int, t int64) []*job {
		var out []*job
		for _, j := range jobs {
			if j.started && !j.ended && j.exec == k {
				out = append(out, j)
			}
		}
		return out
	}
	free := func(k int, t int64) int {
		f := sites[k].Procs
		for _, j := range running(k, t) {
			f -= j.Procs
		}
		return f
	}
	start := func(j *job, k int, t int64) {
		j.started, j.start, j.exec, j.inPool = true, t, k, false
		j.end = t + min(j.Runtime, j.Estimate)
		if j.end > t { // a zero runtime ends in the same step (again, below)
			times[j.end] = true
		}
	}
	// apply runs the policy over queue at site k; it returns the started
	// jobs and the looked-at jobs that did not start.
	apply := func(k int, t int64, queue []*job) (started, left []*job) {
		for h, j := range queue {
			if j.Procs <= free(k, t) {
				start(j, k, t)
				started = append(started, j)
				continue
			}
			switch pol {
			case plan.FCFS:
				return started, []*job{j}
			case plan.LIST:
				left = append(left, j)
				continue
			}
			// EASY: j is the head that cannot start.
			run := running(k, t)
			sort.SliceStable(run, func(a, b int) bool { return run[a].start+run[a].Estimate < run[b].start+run[b].Estimate })
			f, shadow, extra := free(k, t), int64(0), 0
			for _, r := range run {
				if f += r.Procs; f >= j.Procs && shadow == 0 {
					shadow = r.start + r.Estimate
				}
			}
			// Everything that ends by the shadow time is free then.
			f = free(k, t)
			for _, r := range run {
				if r.start+r.Estimate <= shadow {
					f += r.Procs
				}
			}
			extra = f - j.Procs
			left = append(left, j)
			for _, b := range queue[h+1:] {
				short := t+b.Estimate <= shadow
				if b.Procs <= free(k, t) && (short || b.Procs <= extra) {
					start(b, k, t)
					started = append(started, b)
					if !short {
						extra -= b.Procs
					}
				} else {
					left = append(left, b)
				}
			}
			return started, left
		}
		return started, left
	}
	for {
		t := plan.Forever
		for at := range times {
			t = min(t, at)
		}
		if t == plan.Forever {
			break
		}
		delete(times, t)
		for again := true; again; {
			again = false
			// Jobs end before the step's passes; a job started with a
			// zero runtime holds its processors until the next round.
			for _, j := range jobs {
				if j.started && j.end <= t {
					j.ended = true
				}
			}
			startedLocal := make([]bool, len(sites))
			for k := range sites {
				var local []*job
				for _, j := range jobs {
					if j.origin == k && !j.started && !j.inPool && j.Submit <= t {
						local = append(local, j)
					}
				}
				started, left := apply(k, t, local)
				startedLocal[k] = len(started) > 0
				for _, j := range left {
					j.inPool = true
				}
				for _, j := range started {
					again = again || j.end == t
				}
			}
			for k := range sites {
				if startedLocal[k] {
					continue
				}
				var pool []*job
				for _, j := range jobs {
					if j.inPool && j.Procs <= sites[k].Procs {
						pool = append(pool, j)
					}
				}
				sort.SliceStable(pool, func(a, b int) bool {
					if pool[a].Submit != pool[b].Submit {
						return pool[a].Submit < pool[b].Submit
					}
					if pool[a].origin != pool[b].origin {
						return pool[a].origin < pool[b].origin
					}
					return pool[a].order < pool[b].order
				})
				started, _ := apply(k, t, pool)
				for _, j := range started {
					again = again || j.end == t
				}
			}
		}
	}
	out := make([]refStart, len(jobs))
	for i, j := range jobs {
		out[i] = refStart{j.start, j.exec}
	}
	return out
}
