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

type wantRun struct {
	start int64
	exec  int
}

func checkRuns(t *testing.T, res *FedResult, want []wantRun) {
	t.Helper()
	for i, w := range want {
		f := res.Records[i]
		if !f.Started || f.Start != w.start || f.Exec != w.exec {
			t.Errorf("job %d: started %v at %d on site %d, want %d on site %d (route %v)", f.ID, f.Started, f.Start, f.Exec, w.start, w.exec, f.Route)
		}
	}
}

// TestRunCentralFullBestFit: full control sends a job to the site where it
// leaves the fewest processors idle, among those that can start it now; if
// none can, to the one that completes it first.
func TestRunCentralFullBestFit(t *testing.T) {
	sites := []FedSite{
		{Name: "a", Procs: 8, Jobs: []Job{
			{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 2},
			{ID: 2, Submit: 5, Runtime: 50, Estimate: 50, Procs: 4},
			{ID: 3, Submit: 6, Runtime: 10, Estimate: 10, Procs: 4},
			{ID: 4, Submit: 7, Runtime: 10, Estimate: 10, Procs: 6},
		}},
		{Name: "b", Procs: 6, Jobs: []Job{
			{ID: 10, Submit: 0, Runtime: 100, Estimate: 100, Procs: 4},
		}},
		{Name: "c", Procs: 5},
	}
	// At 0, job 1 (origin a) is placed first: a leaves 6, b 4, c 3 -> c.
	// Job 10 (origin b): a leaves 4, b 2, c (3 free) cannot -> b.
	// Job 2 (4 procs) at 5: a 8 free leaves 4; b 2 free, c 3 free: a.
	// Job 3 (4 procs) at 6: a 4 free leaves 0: a.
	// Job 4 (6 procs) at 7: a has 0 free, b 2, c 3: no site now. ECT at a:
	// jobs 2 (ends 55) and 3 (ends 16) -> 6 procs free at 55: 65. b: job
	// 10 ends 100: 110. c is too small. -> a, starts 55.
	res, err := RunCentral(context.Background(), sites, CentralConfig{Mode: CentralFull})
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, res, []wantRun{{0, 2}, {5, 0}, {6, 0}, {55, 0}, {0, 1}})
	if got := res.Records[0].Route; len(got) != 2 || got[1].Site != "c" {
		t.Errorf("job 1 route %v, want submitted at a then delegated to c", got)
	}
	if got := res.Records[1].Route; len(got) != 1 {
		t.Errorf("job 2 stayed at its origin, route %v, want one hop", got)
	}
}

// TestRunCentralSERF: a job its site cannot start now goes to the
// coordinator's buffer, which offers it to the sites in ascending AWWT^d
// order; the first that can start it now takes it.
func TestRunCentralSERF(t *testing.T) {
	sites := []FedSite{
		{Name: "a", Procs: 4, Jobs: []Job{
			{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 4},
			{ID: 2, Submit: 1, Runtime: 10, Estimate: 10, Procs: 2},
			{ID: 3, Submit: 2, Runtime: 10, Estimate: 10, Procs: 3},
		}},
		{Name: "b", Procs: 4, Jobs: []Job{
			{ID: 10, Submit: 0, Runtime: 50, Estimate: 50, Procs: 2},
		}},
	}
	res, err := RunCentral(context.Background(), sites, CentralConfig{Mode: CentralSERF})
	if err != nil {
		t.Fatal(err)
	}
	// Job 1 fills a. Job 2 (2 procs) at 1: a is full, so it goes to the
	// buffer, and b (2 free beside job 10) takes it at once. Job 3 (3
	// procs) at 2: a full, b full: it waits in the buffer. At 11 job 2 ends:
	// b has 2 free, too few. At 50 job 10 ends: b has 4 and takes it (a is
	// busy until 100).
	checkRuns(t, res, []wantRun{{0, 0}, {1, 1}, {50, 1}, {0, 1}})
	if r := res.Records[2].Route; len(r) != 3 || r[1].Site != "coordinator" || r[2].Site != "b" {
		t.Errorf("job 3 route %v, want a, coordinator, b", r)
	}
}

// TestRunCentralSERFLearns: AWWT^d orders the sites: once the coordinator
// has seen its jobs from a wait at b, it offers a's next job to c first.
func TestRunCentralSERFLearns(t *testing.T) {
	c := centralRun{poolRun: poolRun{res: &FedResult{Sites: make([]FedSite, 3)}, sites: make([]poolSite, 3)},
		wwt: [][]float64{{0, 50, 10}, {0, 0, 0}, {0, 0, 0}}, wsa: [][]float64{{0, 1, 1}, {0, 0, 0}, {0, 0, 0}}}
	if got := c.serfOrder(0); got[0] != 0 || got[1] != 2 || got[2] != 1 {
		t.Errorf("order %v, want [0 2 1]: a (unknown: 0), c (10), b (50)", got)
	}
	c.wwt[0][0], c.wsa[0][0] = 100, 1
	if got := c.serfOrder(0); got[0] != 2 || got[1] != 1 || got[2] != 0 {
		t.Errorf("order %v, want [2 1 0]", got)
	}
}

func TestRunCentralRefuses(t *testing.T) {
	ok := []FedSite{{Name: "a", Procs: 2, Jobs: []Job{{ID: 1, Runtime: 1, Estimate: 1, Procs: 1}}}}
	if _, err := RunCentral(context.Background(), ok, CentralConfig{}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("no mode: err %v, want ErrBadConfig", err)
	}
	wide := []FedSite{{Name: "a", Procs: 2, Jobs: []Job{{ID: 1, Runtime: 1, Estimate: 1, Procs: 3}}}}
	if _, err := RunCentral(context.Background(), wide, CentralConfig{Mode: CentralSERF}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("too wide: err %v, want ErrBadConfig", err)
	}
	if _, err := RunShaking(context.Background(), wide, ShakingConfig{Depth: 2}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("shaking, too wide: err %v, want ErrBadConfig", err)
	}
}

// randomFederation is a small random federation: sites of 1 to 8
// processors, jobs that fit their own site, some running past their
// estimate (killed).
func randomFederation(seed uint64) []FedSite {
	rng := rand.New(rand.NewPCG(seed, 7))
	n := 1 + rng.IntN(4)
	sites := make([]FedSite, n)
	for k := range sites {
		procs := 1 + rng.IntN(8)
		sites[k] = FedSite{Name: string(rune('a' + k)), Procs: procs}
		var at int64
		for i := range 5 + rng.IntN(30) {
			at += int64(rng.IntN(20))
			est := int64(1 + rng.IntN(60))
			run := int64(rng.IntN(int(est) + 10))
			sites[k].Jobs = append(sites[k].Jobs, Job{ID: int64(100*k + i), Submit: at, Runtime: run, Estimate: est, Procs: 1 + rng.IntN(procs)})
		}
	}
	return sites
}

// TestStudyStrategiesInvariants replays random federations under the
// coordinator and Shaking-G and checks what every schedule must satisfy:
// each job runs once, never before its submission, for its runtime or
// until its estimate, only where it fits; no site is ever over-committed;
// a job that moved has a route that says where to; and the replay is
// deterministic.
func TestStudyStrategiesInvariants(t *testing.T) {
	runs := map[string]func([]FedSite) (*FedResult, error){
		"central-full": func(s []FedSite) (*FedResult, error) {
			return RunCentral(context.Background(), s, CentralConfig{Mode: CentralFull})
		},
		"serf": func(s []FedSite) (*FedResult, error) {
			return RunCentral(context.Background(), s, CentralConfig{Mode: CentralSERF})
		},
		"shaking-g": func(s []FedSite) (*FedResult, error) {
			return RunShaking(context.Background(), s, ShakingConfig{Depth: 2})
		},
	}
	for name, run := range runs {
		for seed := range uint64(80) {
			sites := randomFederation(seed)
			res, err := run(sites)
			if err != nil {
				t.Fatalf("%s seed %d: %v", name, seed, err)
			}
			again, _ := run(sites)
			for i, f := range res.Records {
				if !f.Started || f.Start < f.Submit || f.Procs > sites[f.Exec].Procs || f.End != f.Start+min(f.Runtime, f.Estimate) {
					t.Fatalf("%s seed %d: job %d: %+v", name, seed, f.ID, f)
				}
				if last := f.Route[len(f.Route)-1].Site; f.Exec != f.Origin && last != sites[f.Exec].Name {
					t.Fatalf("%s seed %d: job %d ran at %s, route %v", name, seed, f.ID, sites[f.Exec].Name, f.Route)
				}
				if g := again.Records[i]; g.Start != f.Start || g.Exec != f.Exec {
					t.Fatalf("%s seed %d: job %d: %d on %d, then %d on %d", name, seed, f.ID, f.Start, f.Exec, g.Start, g.Exec)
				}
			}
			checkNoOvercommit(t, res)
		}
	}
}

// TestVirtualScheduleMatchesReference checks the ECT query against a
// plain FCFS placement on a processor profile, on random sites.
func TestVirtualScheduleMatchesReference(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		procs := 1 + rng.IntN(10)
		now := int64(100)
		s := poolSite{procs: procs, free: procs}
		var recs []FedRecord
		for s.free > 0 && rng.IntN(4) > 0 {
			m := 1 + rng.IntN(s.free)
			s.running = append(s.running, running{rec: -1, estEnd: now + int64(rng.IntN(50)), procs: m})
			s.free -= m
		}
		var queue []int32
		for range rng.IntN(8) {
			recs = append(recs, FedRecord{Record: Record{Job: Job{Procs: 1 + rng.IntN(procs), Estimate: int64(1 + rng.IntN(40))}}})
			queue = append(queue, int32(len(recs)-1))
		}
		v, ects := s.virtual(now, recs, queue)
		extra := Job{Procs: 1 + rng.IntN(procs), Estimate: int64(1 + rng.IntN(40))}
		recs = append(recs, FedRecord{Record: Record{Job: extra}})
		ref := refECT(now, s, recs, append(queue, int32(len(recs)-1)))
		for q := range queue {
			if ects[q] != ref[q] {
				t.Fatalf("seed %d: queued job %d: ECT %d, reference %d", seed, q, ects[q], ref[q])
			}
		}
		if got := v.ect(extra.Procs, extra.Estimate); got != ref[len(queue)] {
			t.Fatalf("seed %d: appended job: ECT %d, reference %d", seed, got, ref[len(queue)])
		}
	}
}

// refECT places the queue first come first served (no job starts before
// the one ahead of it) on a processor profile by estimates, checking every
// second: the plainest form of the study's virtual schedule.
func refECT(now int64, s poolSite, recs []FedRecord, queue []int32) []int64 {
	type iv struct {
		from, to int64
		procs    int
	}
	var busy []iv
	for _, r := range s.running {
		busy = append(busy, iv{now, max(r.estEnd, now), r.procs})
	}
	used := func(at int64) int {
		u := 0
		for _, b := range busy {
			if b.from <= at && at < b.to {
				u += b.procs
			}
		}
		return u
	}
	var out []int64
	prev := now
	for _, i := range queue {
		j := recs[i]
		for st := prev; ; st++ {
			fits := true
			for x := st; x < st+j.Estimate; x++ {
				if used(x)+j.Procs > s.procs {
					fits = false
					break
				}
			}
			if fits {
				busy = append(busy, iv{st, st + j.Estimate, j.Procs})
				out = append(out, st+j.Estimate)
				prev = st
				break
			}
		}
	}
	return out
}

// TestRunCentralMatchesReference replays random federations through
// RunCentral and through refCentral, a plain transcription of §5.2 as
// RunCentral documents it that recomputes every site's state from the
// records at every step, and checks every job's start and site.
func TestRunCentralMatchesReference(t *testing.T) {
	for seed := range uint64(150) {
		sites := randomFederation(seed)
		for _, mode := range []CentralMode{CentralFull, CentralSERF} {
			res, err := RunCentral(context.Background(), sites, CentralConfig{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			ref := refCentral(sites, mode)
			for i, f := range res.Records {
				if !f.Started || f.Start != ref[i].start || f.Exec != ref[i].exec {
					t.Fatalf("seed %d %v: job %d started %v at %d on %d; reference: %d on %d", seed, mode, f.ID, f.Started, f.Start, f.Exec, ref[i].start, ref[i].exec)
				}
			}
		}
	}
}

func refCentral(sites []FedSite, mode CentralMode) []refStart {
	type job struct {
		Job
		origin     int
		started    bool
		start, end int64
		exec       int
		placed     bool // by the coordinator
	}
	var jobs []*job
	for k, s := range sites {
		for _, j := range s.Jobs {
			jobs = append(jobs, &job{Job: j, origin: k, exec: -1})
		}
	}
	queues := make([][]*job, len(sites))
	var buffer []*job
	times := map[int64]bool{}
	for _, j := range jobs {
		times[j.Submit] = true
	}
	runningAt := func(k int, t int64) []*job {
		var out []*job
		for _, j := range jobs {
			if j.started && j.exec == k && (j.end > t || j.end == t && j.start == t) {
				out = append(out, j)
			}
		}
		return out
	}
	ended := map[*job]bool{}
	free := func(k int, t int64) int {
		f := sites[k].Procs
		for _, j := range runningAt(k, t) {
			if !ended[j] {
				f -= j.Procs
			}
		}
		return f
	}
	live := func(k int, t int64) []*job {
		var out []*job
		for _, j := range runningAt(k, t) {
			if !ended[j] {
				out = append(out, j)
			}
		}
		return out
	}
	start := func(j *job, k int, t int64) {
		j.started, j.start, j.exec = true, t, k
		j.end = t + min(j.Runtime, j.Estimate)
		if j.end > t { // a zero runtime ends in the same step (again, below)
			times[j.end] = true
		}
	}
	// shadow: the earliest time enough processors are free for m, going
	// by estimates, and the processors spare then.
	shadow := func(k int, t int64, m int) (int64, int) {
		run := live(k, t)
		sort.SliceStable(run, func(a, b int) bool { return run[a].start+run[a].Estimate < run[b].start+run[b].Estimate })
		f := free(k, t)
		var at int64 = -1
		for _, r := range run {
			if f += r.Procs; f >= m {
				at = r.start + r.Estimate
				break
			}
		}
		f = free(k, t)
		for _, r := range run {
			if r.start+r.Estimate <= at {
				f += r.Procs
			}
		}
		return at, f - m
	}
	canStart := func(k int, t int64, j *job) bool {
		f := free(k, t)
		if j.Procs > f {
			return false
		}
		if len(queues[k]) == 0 {
			return true
		}
		h := queues[k][0]
		if h.Procs <= f {
			return j.Procs <= f-h.Procs
		}
		at, extra := shadow(k, t, h.Procs)
		return t+j.Estimate <= at || j.Procs <= extra
	}
	easy := func(k int, t int64) {
		q := queues[k]
		var left []*job
		for len(q) > 0 && q[0].Procs <= free(k, t) {
			start(q[0], k, t)
			q = q[1:]
		}
		if len(q) > 0 {
			at, extra := shadow(k, t, q[0].Procs)
			left = append(left, q[0])
			for _, b := range q[1:] {
				short := t+b.Estimate <= at
				if b.Procs <= free(k, t) && (short || b.Procs <= extra) {
					start(b, k, t)
					if !short {
						extra -= b.Procs
					}
					continue
				}
				left = append(left, b)
			}
		}
		queues[k] = left
	}
	originFirst := func(k int) []int {
		out := []int{k}
		for l := range sites {
			if l != k {
				out = append(out, l)
			}
		}
		return out
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
		first := true
		for {
			for _, j := range jobs {
				if j.started && j.end <= t {
					ended[j] = true
				}
			}
			for k := range sites {
				easy(k, t)
			}
			for k := range sites {
				for _, j := range jobs {
					if !first || j.origin != k || j.Submit != t {
						continue
					}
					if mode == CentralSERF {
						if canStart(k, t, j) {
							start(j, k, t)
						} else {
							buffer = append(buffer, j)
						}
						continue
					}
					best, idle := -1, 0
					for _, l := range originFirst(k) {
						if sites[l].Procs >= j.Procs && canStart(l, t, j) && (best < 0 || free(l, t)-j.Procs < idle) {
							best, idle = l, free(l, t)-j.Procs
						}
					}
					if best >= 0 {
						start(j, best, t)
						continue
					}
					var bestECT int64
					for _, l := range originFirst(k) {
						if sites[l].Procs < j.Procs {
							continue
						}
						s := poolSite{procs: sites[l].Procs, free: free(l, t)}
						var recs []FedRecord
						var q []int32
						for _, r := range live(l, t) {
							s.running = append(s.running, running{estEnd: r.start + r.Estimate, procs: r.Procs})
						}
						for _, x := range append(slices.Clone(queues[l]), j) {
							recs = append(recs, FedRecord{Record: Record{Job: x.Job}})
							q = append(q, int32(len(recs)-1))
						}
						ects := refECT(t, s, recs, q)
						if e := ects[len(ects)-1]; best < 0 || e < bestECT {
							best, bestECT = l, e
						}
					}
					queues[best] = append(queues[best], j)
				}
			}
			first = false
			var kept []*job
			for _, j := range buffer {
				order := originFirst(j.origin)
				awwt := func(l int) float64 {
					var w, a float64
					for _, x := range jobs {
						if x.placed && ended[x] && x.origin == j.origin && x.exec == l {
							sa := float64(x.Procs) * float64(x.end-x.start)
							w += sa * float64(x.start-x.Submit)
							a += sa
						}
					}
					if a == 0 {
						return 0
					}
					return w / a
				}
				sort.SliceStable(order, func(a, b int) bool { return awwt(order[a]) < awwt(order[b]) })
				done := false
				for _, l := range order {
					if sites[l].Procs >= j.Procs && canStart(l, t, j) {
						j.placed = true
						start(j, l, t)
						done = true
						break
					}
				}
				if !done {
					kept = append(kept, j)
				}
			}
			buffer = kept
			again := false
			for _, j := range jobs {
				if j.started && j.end == t && !ended[j] {
					again = true
				}
			}
			if !again {
				break
			}
		}
	}
	out := make([]refStart, len(jobs))
	for i, j := range jobs {
		out[i] = refStart{j.start, j.exec}
	}
	return out
}
