package sim

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// kthDeadlines returns n jobs from the middle of KTH with uniform (f-model)
// deadlines.
func kthDeadlines(t *testing.T, n int) []Job {
	t.Helper()
	m, err := DeadlineModelByName("uniform", nil)
	if err != nil {
		t.Fatal(err)
	}
	return WithDeadlines(kth(t)[5000:5000+n], m, 1)
}

// replayDeadlines replays jobs with soft deadlines under pol; LTTR gets an
// online forecaster.
func replayDeadlines(t *testing.T, jobs []Job, pol plan.Policy) *Result {
	t.Helper()
	cfg := Config{Name: "t", Site: plan.Config{Procs: 100, Policy: pol}, SoftDeadlines: true}
	var fc *OnlineForecast
	if pol == plan.LTTR {
		var err error
		if fc, err = NewOnlineForecast(forecast.DefaultConfig(), nil, false); err != nil {
			t.Fatal(err)
		}
		cfg.Predictor = fc
	}
	res, err := Run(context.Background(), jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fc != nil && fc.Err() != nil {
		t.Fatal(fc.Err())
	}
	return res
}

// TestDeadlinePoliciesKTH replays a KTH slice with deadlines under EDF and
// LTTR (and FCFS, EASY for the deadlines they ignore) and checks the
// schedule's invariants, that every job ran, and that the deadline policies
// meet more deadlines than FCFS.
func TestDeadlinePoliciesKTH(t *testing.T) {
	n := 4000
	if raceEnabled {
		n = 800
	}
	jobs := kthDeadlines(t, n)
	met := map[plan.Policy]float64{}
	for _, pol := range []plan.Policy{plan.FCFS, plan.EASY, plan.EDF, plan.LTTR} {
		t.Run(pol.String(), func(t *testing.T) {
			res := replayDeadlines(t, jobs, pol)
			checkSchedule(t, res, 100)
			dm := ComputeDeadlineMetrics(res.Records)
			if dm == nil || dm.Jobs != len(jobs) {
				t.Fatalf("deadline metrics %+v for %d jobs", dm, len(jobs))
			}
			met[pol] = dm.Met
			forecasts := 0
			for _, r := range res.Records {
				if r.Forecast != 0 {
					forecasts++
				}
				if r.Forecast > r.Estimate {
					t.Fatalf("job %d: forecast %d above its estimate %d", r.ID, r.Forecast, r.Estimate)
				}
			}
			if (pol == plan.LTTR) != (forecasts == len(jobs)) {
				t.Fatalf("%d of %d jobs have a forecast", forecasts, len(jobs))
			}
		})
	}
	if !raceEnabled && (met[plan.EDF] <= met[plan.FCFS] || met[plan.LTTR] <= met[plan.FCFS]) {
		t.Fatalf("deadlines met: %v", met)
	}
}

// TestDeadlineReplayIsDeterministic checks that two LTTR replays with online
// forecasts, and two EDF replays, are identical.
func TestDeadlineReplayIsDeterministic(t *testing.T) {
	n := 2000
	if raceEnabled {
		n = 500
	}
	jobs := kthDeadlines(t, n)
	for _, pol := range []plan.Policy{plan.EDF, plan.LTTR} {
		a, b := replayDeadlines(t, jobs, pol), replayDeadlines(t, jobs, pol)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%v: two replays differ", pol)
		}
	}
}

// TestLTTRNoLookAhead checks that the online forecasts of an LTTR replay
// use no job's future: for random cut times t, altering jobs that complete
// after t (their runtimes, so that they still end after t; and the
// attributes of jobs submitted after t) changes no forecast made at or
// before t and no start at or before t. The same check catches the oracle,
// which reads runtimes.
func TestLTTRNoLookAhead(t *testing.T) {
	n := 1500
	if raceEnabled {
		n = 500
	}
	jobs := kthDeadlines(t, n)
	base := replayDeadlines(t, jobs, plan.LTTR)
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 4; trial++ {
		cut := jobs[len(jobs)/5+rng.IntN(len(jobs)/2)].Submit
		alt := alter(jobs, base, cut, rng)
		got := replayDeadlines(t, alt, plan.LTTR)
		if i, what := firstDifference(base, got, cut); i >= 0 {
			t.Fatalf("cut %d: job %d: %s changed by altering the future", cut, base.Records[i].ID, what)
		}
		// The alteration matters after the cut.
		if i, _ := firstDifference(base, got, plan.Forever); i < 0 {
			t.Fatalf("cut %d: altering the future changed nothing at all", cut)
		}
	}
	// The check has teeth: an oracle's forecasts change.
	oracle := func(jobs []Job) *Result {
		res, err := Run(context.Background(), jobs, Config{Site: plan.Config{Procs: 100, Policy: plan.LTTR}, SoftDeadlines: true, Predictor: Oracle{}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	cut := jobs[len(jobs)/2].Submit
	ob := oracle(jobs)
	if i, _ := firstDifference(ob, oracle(alter(jobs, ob, cut, rng)), cut); i < 0 {
		t.Fatal("altering the future did not change the oracle's forecasts")
	}
}

// alter returns a copy of jobs in which every job that ends after cut in res
// gets a new runtime that still ends after cut, and every job submitted
// after cut new user and group ids. Deadlines stay as they are.
func alter(jobs []Job, res *Result, cut int64, rng *rand.Rand) []Job {
	out := make([]Job, len(jobs))
	copy(out, jobs)
	for i := range out {
		r := res.Records[i]
		if r.End <= cut {
			continue
		}
		lo := int64(0)
		if r.Start <= cut {
			lo = cut - r.Start + 1 // still running at cut: keep it running past it
		}
		out[i].Runtime = lo + rng.Int64N(max(out[i].Estimate, lo+1))
		if out[i].Submit > cut {
			out[i].User, out[i].Group = idString(rng.Int64N(50)), idString(rng.Int64N(10))
		}
	}
	return out
}

// firstDifference returns the index of the first job whose forecast (made
// at or before cut) or start (at or before cut in either replay) differs,
// and what differs; -1 if none.
func firstDifference(a, b *Result, cut int64) (int, string) {
	for i := range a.Records {
		x, y := a.Records[i], b.Records[i]
		if x.Submit <= cut && x.Forecast != y.Forecast {
			return i, "forecast"
		}
		if (x.Start <= cut || y.Start <= cut) && x.Start != y.Start {
			return i, "start"
		}
	}
	return -1, ""
}

func TestWithDeadlines(t *testing.T) {
	jobs := kth(t)[:3000]
	for _, name := range DeadlineModelNames {
		m, err := DeadlineModelByName(name, jobs)
		if err != nil {
			t.Fatal(err)
		}
		a, b := WithDeadlines(jobs, m, 7), WithDeadlines(jobs, m, 7)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: not deterministic", name)
		}
		if reflect.DeepEqual(a, WithDeadlines(jobs, m, 8)) {
			t.Fatalf("%s: the seed changes nothing", name)
		}
		for i, j := range a {
			if j.Deadline < j.Submit+j.Runtime || j.Deadline <= j.Submit {
				t.Fatalf("%s: job %d: deadline %d, submit %d, runtime %d", name, j.ID, j.Deadline, j.Submit, j.Runtime)
			}
			if jobs[i].Deadline != plan.Forever {
				t.Fatal("WithDeadlines modified its input")
			}
		}
	}
	if _, err := DeadlineModelByName("tight", nil); !errorsIs(err, ErrBadConfig) {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestComputeDeadlineMetrics(t *testing.T) {
	rec := func(end, deadline int64, started bool) Record {
		return Record{Job: Job{Deadline: deadline}, Started: started, End: end}
	}
	// Four jobs with deadlines ran: met (end 10 <= 10), met, late by 30,
	// late by 10; one without a deadline and one that never ran do not
	// count. Met 2/4; mean tardiness 40/4 = 10; late mean 40/2 = 20.
	recs := []Record{rec(10, 10, true), rec(5, 50, true), rec(130, 100, true), rec(60, 50, true),
		rec(999, plan.Forever, true), rec(0, 5, false)}
	got := ComputeDeadlineMetrics(recs)
	want := &DeadlineMetrics{Jobs: 4, Met: 0.5, MeanTardiness: 10, LateMeanTardiness: 20, MaxTardiness: 30}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if ComputeDeadlineMetrics(recs[4:]) != nil {
		t.Fatal("metrics without deadlines")
	}
}

// TestOnlineForecastHistogram checks the ratio histogram the adapter fixes
// at a job's submission against samples computed by hand. One partition
// (no search, no chain), the windowed mean only: completions of 100, 100
// and 200 s give one-step errors 0 and (200-100)/100 = 1 and leave the
// window at 2 (halved by the jump), so the forecast is (100+200)/2 = 150
// and the samples of a job of estimate x are 150·(1+0)/x and 150·(1+1)/x.
func TestOnlineForecastHistogram(t *testing.T) {
	cfg := forecast.DefaultConfig()
	cfg.NoSearch, cfg.Predictors = true, []string{forecast.NameMean}
	o, err := NewOnlineForecast(cfg, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, rt := range []int64{100, 100, 200} {
		o.Finished(int64(10*(i+1)), &Record{Job: Job{ID: int64(i + 1), Submit: 0, Runtime: rt, Estimate: 1000, Procs: 1}})
	}
	tests := []struct {
		estimate int64
		forecast int64
		bins     []int
	}{
		{300, 150, []int{50, 100}},  // 0.5, 1.0
		{1000, 150, []int{15, 30}},  // 0.15, 0.3
		{100, 100, []int{100, 100}}, // 1.5, 3.0 clipped; forecast capped at the estimate
		{600, 150, []int{25, 50}},   // 0.25, 0.5
	}
	for i, tc := range tests {
		id := int64(100 + i)
		if f := o.Predict(40, &Job{ID: id, Submit: 40, Estimate: tc.estimate, Procs: 1, Runtime: 1}); f != tc.forecast {
			t.Fatalf("estimate %d: forecast %d, want %d", tc.estimate, f, tc.forecast)
		}
		want := new(overbook.Histogram)
		for _, b := range tc.bins {
			want.AddRatio(float64(b) / 100) //nolint:errcheck // not NaN
		}
		if got := o.Histogram(overbook.JobInfo{ID: id}); !got.Equal(want) {
			t.Fatalf("estimate %d: histogram differs from bins %v", tc.estimate, tc.bins)
		}
	}
	// A finished job's histogram is forgotten; an unknown job gets the
	// empty prior.
	o.Finished(50, &Record{Job: Job{ID: 100, Submit: 40, Runtime: 150, Estimate: 300, Procs: 1}})
	if h := o.Histogram(overbook.JobInfo{ID: 100}); h.N() != 0 {
		t.Fatalf("histogram of a finished job: N = %v", h.N())
	}
	if h := o.Histogram(overbook.JobInfo{ID: 999}); h.N() != 0 || h.CDF(99) != 0 {
		t.Fatal("an unknown job does not get the conservative prior")
	}
	if o.Err() != nil {
		t.Fatal(o.Err())
	}
}

func TestRatioHistogram(t *testing.T) {
	h := RatioHistogram([]float64{0.004, 0.5, 0.505, 0.999, 1, 1.7, -0.2})
	want := map[int]float64{0: 2, 50: 2, 99: 1, 100: 2}
	for i := 0; i < overbook.NumBins; i++ {
		if h.Weight(i) != want[i] {
			t.Fatalf("bin %d: weight %v, want %v", i, h.Weight(i), want[i])
		}
	}
	if RatioHistogram(nil).N() != 0 {
		t.Fatal("no samples, yet a histogram")
	}
}

func TestIDValue(t *testing.T) {
	if idValue("") != -1 || idValue("42") != 42 || idValue("0") != 0 {
		t.Fatal("numbers")
	}
	a, b := idValue("alice"), idValue("bob")
	if a == b || a < 1<<61 || idValue("alice") != a || idValue("-3") < 1<<61 {
		t.Fatalf("names: %d %d", a, b)
	}
}

// BenchmarkReplayKTHDeadlines replays the whole KTH trace with uniform
// deadlines: the core alone (EASY for comparison, EDF, LTTR keyed on the
// estimates), also with arrivals compressed twofold (x2: an overloaded site
// whose queue grows to thousands of jobs), and LTTR with online forecasts
// (core plus forecaster).
func BenchmarkReplayKTHDeadlines(b *testing.B) {
	m, _ := DeadlineModelByName("uniform", nil)
	jobs := WithDeadlines(kth(b), m, 1)
	x2 := make([]Job, len(jobs))
	for i, j := range jobs {
		j.Deadline -= j.Submit - j.Submit/2
		j.Submit /= 2
		x2[i] = j
	}
	for _, load := range []struct {
		name string
		jobs []Job
	}{{"", jobs}, {"-x2", x2}} {
		for _, pol := range []plan.Policy{plan.EASY, plan.EDF, plan.LTTR} {
			b.Run(pol.String()+load.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := Run(context.Background(), load.jobs, Config{Site: plan.Config{Procs: 100, Policy: pol}, SoftDeadlines: true}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("lttr-online", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			fc, err := NewOnlineForecast(forecast.DefaultConfig(), nil, false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Run(context.Background(), jobs, Config{Site: plan.Config{Procs: 100, Policy: plan.LTTR}, SoftDeadlines: true, Predictor: fc}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
