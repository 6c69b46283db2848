package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fedsched/fedsched/plan"
)

func TestParseSpan(t *testing.T) {
	tests := []struct {
		in   string
		want int64 // 0: an error
	}{
		{"6h", 6 * 3600},
		{"1h30m", 5400},
		{"90s", 90},
		{"0.5h", 1800},
		{"1d", 86400},
		{"7d", 7 * 86400},
		{"1d12h", 36 * 3600},
		{" 2d ", 2 * 86400},
		{"0d1s", 1},
		{"", 0},
		{"6", 0},
		{"d", 0},
		{"1.5d", 0},
		{"-1d", 0},
		{"-6h", 0},
		{"1d-3h", 0},
		{"0s", 0},
		{"0d", 0},
		{"1dd", 0},
		{"1d1d", 0},
		{"500ms", 0},
		{"1.5s", 0},
		{"99999999999d", 0},
		{"9223372036854775807d", 0},
		{"3000000h", 0}, // past time.Duration's range
		{"h", 0},
		{"1x", 0},
	}
	for _, tc := range tests {
		got, err := ParseSpan(tc.in)
		if tc.want == 0 {
			if err == nil || !errors.Is(err, ErrFixedFlag) {
				t.Errorf("ParseSpan(%q) = %d, %v; want an ErrFixedFlag error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSpan(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestStandingFromFlag(t *testing.T) {
	tests := []struct {
		in    string
		procs int
		every int64
		len   int64
		want  int // reserved processors; 0: an error
	}{
		{"6h,1h", 100, 6 * 3600, 3600, 100},
		{"24h,4h,0.5", 100, 86400, 4 * 3600, 50},
		{"1d,4h,0.5", 100, 86400, 4 * 3600, 50},
		{"1d12h,30m,1/3", 100, 36 * 3600, 1800, 34},
		{"6h,1h,0.07", 100, 6 * 3600, 3600, 7}, // 0.07*100 is 7.000000000000001 in floating point
		{"6h,1h,7%", 100, 6 * 3600, 3600, 7},
		{"6h,1h,0.001", 100, 6 * 3600, 3600, 1}, // ceil: at least one processor
		{"6h,1h,1", 100, 6 * 3600, 3600, 100},
		{"6h,1h,100%", 100, 6 * 3600, 3600, 100},
		{" 6h , 6h , 0.25 ", 10, 6 * 3600, 6 * 3600, 3},
		{"7d,1d", 4, 7 * 86400, 86400, 4},
		{"", 100, 0, 0, 0},
		{"6h", 100, 0, 0, 0},
		{"6h,", 100, 0, 0, 0},
		{",1h", 100, 0, 0, 0},
		{"6h,1h,", 100, 0, 0, 0},
		{"6h,1h,0.5,x", 100, 0, 0, 0},
		{"1h,6h", 100, 0, 0, 0},
		{"6h,0s", 100, 0, 0, 0},
		{"6h,-1h", 100, 0, 0, 0},
		{"x,1h", 100, 0, 0, 0},
		{"6h,1h,0", 100, 0, 0, 0},
		{"6h,1h,-0.5", 100, 0, 0, 0},
		{"6h,1h,1.5", 100, 0, 0, 0},
		{"6h,1h,101%", 100, 0, 0, 0},
		{"6h,1h,abc", 100, 0, 0, 0},
		{"6h,1h,NaN", 100, 0, 0, 0},
		{"6h,1h,Inf", 100, 0, 0, 0},
		{"6h,1h,1e-99999999", 100, 0, 0, 0},
		{"6h,1h,1/0", 100, 0, 0, 0},
		{"6h,1h,%", 100, 0, 0, 0},
		{"6h,1h,0.5", 0, 0, 0, 0},
		{"6h;1h", 100, 0, 0, 0},
	}
	for _, tc := range tests {
		st, err := StandingFromFlag(tc.in, tc.procs, 1000, 0)
		if tc.want == 0 {
			if err == nil || !errors.Is(err, ErrFixedFlag) {
				t.Errorf("StandingFromFlag(%q, %d) = %+v, %v; want an ErrFixedFlag error", tc.in, tc.procs, st, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("StandingFromFlag(%q, %d): %v", tc.in, tc.procs, err)
			continue
		}
		if st.Procs != tc.want || st.Every != tc.every || st.Length != tc.len || st.Start != 1000 || st.Until != 0 {
			t.Errorf("StandingFromFlag(%q, %d) = %+v; want %d procs every %d for %d", tc.in, tc.procs, st, tc.want, tc.every, tc.len)
		}
		if err := st.Validate(); err != nil {
			t.Errorf("%q: %v", tc.in, err)
		}
	}
}

func FuzzStandingFromFlag(f *testing.F) {
	for _, s := range []string{"6h,1h", "24h,4h,0.5", "1d12h,30m,1/3", "6h,1h,7%", "1d,1d,1", ",,", "1e9d,1h", "6h,1h,1e-9"} {
		f.Add(s, 100)
	}
	f.Fuzz(func(t *testing.T, s string, procs int) {
		st, err := StandingFromFlag(s, procs, 0, 0)
		if err != nil {
			if !errors.Is(err, ErrFixedFlag) {
				t.Fatalf("%q: error %v does not wrap ErrFixedFlag", s, err)
			}
			return
		}
		if st.Validate() != nil || st.Procs < 1 || st.Procs > procs {
			t.Fatalf("%q on %d: %+v", s, procs, st)
		}
	})
}

func TestAddStanding(t *testing.T) {
	site, err := plan.NewSite(plan.Config{Procs: 100})
	if err != nil {
		t.Fatal(err)
	}
	st := []plan.Standing{{Name: "maint", Procs: 50, Start: 0, Every: 6 * 3600, Length: 3600}}
	// From 30 min: the first instance is clipped to [1800, 3600).
	area, err := AddStanding(site, st, 1800, 24*3600)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(50 * (1800 + 3*3600)); area != want {
		t.Fatalf("reserved %d proc-seconds, want %d", area, want)
	}
	got := site.Fixed()
	want := []plan.Reservation{
		{ID: -1, Procs: 50, Start: 1800, End: 3600, Release: 1800, Deadline: 3600, Fixed: true},
		{ID: -2, Procs: 50, Start: 6 * 3600, End: 7 * 3600, Release: 6 * 3600, Deadline: 7 * 3600, Fixed: true},
		{ID: -3, Procs: 50, Start: 12 * 3600, End: 13 * 3600, Release: 12 * 3600, Deadline: 13 * 3600, Fixed: true},
		{ID: -4, Procs: 50, Start: 18 * 3600, End: 19 * 3600, Release: 18 * 3600, Deadline: 19 * 3600, Fixed: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("fixed\n got %+v\nwant %+v", got, want)
	}
	if n, _ := site.FixedName(-2); n != "maint" {
		t.Fatalf("name %q", n)
	}
	// A second rule on the same site gets ids below the first's.
	area, err = AddStanding(site, []plan.Standing{{Procs: 50, Start: 0, Every: 86400, Length: 3600}}, 0, 86400)
	if err != nil || area != 50*3600 {
		t.Fatalf("second rule: %d, %v", area, err)
	}
	if r, ok := site.Plan().Get(-5); !ok || r.Start != 0 || !r.Fixed {
		t.Fatalf("second rule's instance: %+v %v", r, ok)
	}
	// A third would over-commit [1800, 3600), where both hold 50.
	if _, err := AddStanding(site, []plan.Standing{{Procs: 1, Start: 1800, Every: 86400, Length: 60}}, 0, 86400); !errors.Is(err, plan.ErrNoFit) {
		t.Fatalf("over-committing rule: %v", err)
	}
	// An invalid rule.
	if _, err := AddStanding(site, []plan.Standing{{Procs: 1, Every: 0, Length: 60}}, 0, 86400); !errors.Is(err, plan.ErrInvalid) {
		t.Fatalf("invalid rule: %v", err)
	}
	// A job in the way.
	busy, _ := plan.NewSite(plan.Config{Procs: 4})
	busy.Submit(0, plan.Job{ID: 1, Procs: 4, Estimate: 100, Deadline: plan.Forever})
	if _, err := AddStanding(busy, []plan.Standing{{Procs: 1, Start: 50, Every: 1000, Length: 10}}, 0, 1000); !errors.Is(err, plan.ErrConflict) {
		t.Fatalf("colliding with a job: %v", err)
	}
}

func TestLayStandingErrors(t *testing.T) {
	jobs := []Job{{ID: 1, Submit: 0, Procs: 1, Estimate: 10, Runtime: 10, Deadline: plan.Forever}}
	if _, err := LayStanding(jobs, []plan.Standing{{Procs: 5, Every: 10, Length: 1}}, 4); !errors.Is(err, plan.ErrExceedsCapacity) {
		t.Fatalf("too wide: %v", err)
	}
	two := []plan.Standing{{Procs: 3, Every: 10, Length: 5}, {Procs: 2, Start: 4, Every: 20, Length: 2}}
	if _, err := LayStanding(jobs, two, 4); !errors.Is(err, plan.ErrNoFit) {
		t.Fatalf("over-committing rules: %v", err)
	}
	if _, err := LayStanding(jobs, []plan.Standing{{Procs: 1, Every: 10, Length: 11}}, 4); !errors.Is(err, plan.ErrInvalid) {
		t.Fatalf("invalid rule: %v", err)
	}
	fp, err := LayStanding(nil, two, 4)
	if err != nil || len(fp.Specs) != 0 {
		t.Fatalf("no jobs: %+v, %v", fp, err)
	}
}

func TestStandingRange(t *testing.T) {
	jobs := []Job{{Submit: 100, Estimate: 50}, {Submit: 400, Estimate: 10}, {Submit: 300, Estimate: 900}}
	st := []plan.Standing{{Every: 6 * 3600}, {Every: 4 * 3600}}
	from, to := StandingRange(jobs, st)
	if from != 100 || to != 400+900+12*3600 {
		t.Fatalf("range [%d, %d)", from, to)
	}
	st = []plan.Standing{{Every: 86400, Weekdays: []time.Weekday{time.Monday}}}
	if _, to := StandingRange(jobs, st); to != 400+900+7*86400 {
		t.Fatalf("weekday rule: to %d", to)
	}
	st = []plan.Standing{{Every: 86400 + 1, Weekdays: []time.Weekday{time.Monday}}}
	if _, to := StandingRange(jobs, st); to != 400+900+28*86400 {
		t.Fatalf("capped cycle: to %d", to)
	}
}

// replayFixed replays jobs with standing reservations the way Run should
// once wired: the instances are fixed reservations of the site from the
// start, and the jobs they exclude are rejected at submission (here: left
// out of the input). It returns the result, the layout and the number of
// excluded jobs.
func replayFixed(tb testing.TB, jobs []Job, st []plan.Standing, cfg plan.Config) (*Result, *FixedPlan, int) {
	tb.Helper()
	fp, err := LayStanding(jobs, st, cfg.Procs)
	if err != nil {
		tb.Fatal(err)
	}
	in := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		if !fp.Excludes(j) {
			in = append(in, j)
		}
	}
	cfg.Fixed = fp.Specs
	res, err := Run(context.Background(), in, Config{Name: "fixed", Site: cfg})
	if err != nil {
		tb.Fatal(err)
	}
	return res, fp, len(jobs) - len(in)
}

// checkFixedWalls asserts that at no time the processors busy with jobs
// plus those held by fixed reservations exceed the site.
func checkFixedWalls(t *testing.T, res *Result, specs []plan.FixedSpec, procs int) {
	t.Helper()
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	for _, r := range res.Records {
		if r.Started && r.Ran() > 0 {
			evs = append(evs, ev{r.Start, r.Procs}, ev{r.End, -r.Procs})
		}
	}
	for _, f := range specs {
		evs = append(evs, ev{f.Start, f.Procs}, ev{f.End, -f.Procs})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.delta - b.delta
	})
	busy := 0
	for _, e := range evs {
		busy += e.delta
		if busy > procs {
			t.Fatalf("at %d: %d processors busy or held on a %d-processor site", e.at, busy, procs)
		}
	}
}

type fixedCase struct {
	name string
	cfg  plan.Config
}

func fixedCases(procs int) []fixedCase {
	var out []fixedCase
	for _, pol := range policies {
		out = append(out, fixedCase{pol.String(), plan.Config{Procs: procs, Policy: pol}})
	}
	out = append(out, fixedCase{"conservative-keep", plan.Config{Procs: procs, KeepUntilEstimate: true}})
	return out
}

// TestFixedNeverOverlappedKTH replays a slice of the KTH trace under every
// policy with two standing reservations, one of them on weekdays only, and
// checks that no job ever runs on processors a fixed reservation holds.
func TestFixedNeverOverlappedKTH(t *testing.T) {
	jobs := kth(t)[:4000]
	start := jobs[0].Submit
	st := []plan.Standing{
		{Name: "maint", Procs: 30, Start: start, Every: 6 * 3600, Length: 3600},
		{Name: "lab", Procs: 50, Start: start + 9*3600, Every: 86400, Length: 4 * 3600,
			Weekdays: []time.Weekday{time.Monday, time.Wednesday, time.Friday}, Epoch: 843480031},
	}
	for _, tc := range fixedCases(100) {
		t.Run(tc.name, func(t *testing.T) {
			res, fp, excluded := replayFixed(t, jobs, st, tc.cfg)
			checkSchedule(t, res, 100)
			checkFixedWalls(t, res, fp.Specs, 100)
			if tc.cfg.Policy == plan.Conservative {
				for _, r := range res.Records {
					if r.Start > r.Decision.Start {
						t.Fatalf("job %d promised %d, started %d", r.ID, r.Decision.Start, r.Start)
					}
				}
			}
			if excluded == 0 {
				t.Fatal("no job excluded: the rules are too mild to test anything")
			}
			if tc.name == "easy" {
				if again, _, _ := replayFixed(t, jobs, st, tc.cfg); !reflect.DeepEqual(res, again) {
					t.Fatal("two replays differ")
				}
			}
			rep := fp.Report(res.Records)
			if rep.Excluded != 0 {
				t.Fatalf("report counts %d excluded among jobs that were kept", rep.Excluded)
			}
			if rep.ReservedProcSeconds <= 0 || rep.ReservedProcSeconds > fp.ReservedProcSeconds {
				t.Fatalf("reserved %d of %d proc-seconds", rep.ReservedProcSeconds, fp.ReservedProcSeconds)
			}
		})
	}
}

// TestFixedNeverOverlappedRandom does the same on random workloads and
// random rules, with jobs killed at their estimate and zero runtimes.
func TestFixedNeverOverlappedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 40; round++ {
		const procs = 16
		var jobs []Job
		var now int64
		for i := 0; i < 150; i++ {
			now += rng.Int64N(60)
			est := 1 + rng.Int64N(400)
			run := rng.Int64N(est + est/2) // some run past their estimate: killed
			jobs = append(jobs, Job{ID: int64(i + 1), Submit: now, Runtime: run, Estimate: est, Procs: 1 + rng.IntN(procs), Deadline: plan.Forever})
		}
		var st []plan.Standing
		left := procs
		for k := 0; k < 1+rng.IntN(2); k++ {
			// Periods from a short list keep the rules' common cycle,
			// and so the laid-out range, short.
			every := []int64{60, 90, 120, 300, 600, 1000, 1800}[rng.IntN(7)]
			p := 1 + rng.IntN(left)
			left -= p
			s := plan.Standing{Procs: p, Start: rng.Int64N(500), Every: every, Length: 1 + rng.Int64N(every)}
			if rng.IntN(3) == 0 {
				s.Until = s.Start + 1 + rng.Int64N(now+1)
			}
			st = append(st, s)
			if left == 0 {
				break
			}
		}
		for _, tc := range fixedCases(procs) {
			res, fp, _ := replayFixed(t, jobs, st, tc.cfg)
			checkSchedule(t, res, procs)
			checkFixedWalls(t, res, fp.Specs, procs)
		}
	}
}

func TestFixedReport(t *testing.T) {
	// 10 processors; the whole site is held for 10 s every 100 s from 0.
	st := []plan.Standing{{Name: "all", Procs: 10, Start: 0, Every: 100, Length: 10}}
	placed := plan.Placement{Reason: plan.ReasonPlacedInFull}
	noGap := plan.Placement{Reason: plan.ReasonRejectedNoGap}
	recs := []Record{
		// A ran [10, 60).
		{Job: Job{ID: 1, Submit: 0, Procs: 1, Estimate: 50, Runtime: 50, Deadline: plan.Forever}, Decision: placed, Started: true, Start: 10, End: 60},
		// B needs 95 s of the whole site: gaps are 90 s long. Excluded, and
		// rejected with a window that overlaps an instance.
		{Job: Job{ID: 2, Submit: 0, Procs: 10, Estimate: 95, Runtime: 95, Deadline: plan.Forever}, Decision: noGap},
		// C fits in [10, 100): not excluded. It ran [10, 95).
		{Job: Job{ID: 3, Submit: 5, Procs: 9, Estimate: 85, Runtime: 85, Deadline: 100}, Decision: placed, Started: true, Start: 10, End: 95},
		// D was rejected for want of a gap in [20, 90), clear of instances.
		{Job: Job{ID: 4, Submit: 20, Procs: 5, Estimate: 60, Runtime: 60, Deadline: 90}, Decision: noGap},
		// E was rejected as too wide: nothing to do with the reservations.
		{Job: Job{ID: 5, Submit: 20, Procs: 11, Estimate: 5, Runtime: 5, Deadline: plan.Forever}, Decision: plan.Placement{Reason: plan.ReasonRejectedTooWide}},
	}
	rep, err := ReportFixed(recs, st, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Range [0, 20+95+100): instances at 0, 100 and 200. Makespan 95: only
	// [0, 10) counts, 10 procs * 10 s.
	want := FixedReport{Rules: 1, Instances: 3, ReservedProcSeconds: 100, ReservedProcHours: 100.0 / 3600, Excluded: 1, RejectedOverlapping: 1}
	if rep != want {
		t.Fatalf("report\n got %+v\nwant %+v", rep, want)
	}
}
