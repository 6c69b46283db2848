package forecast

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedsched/fedsched/traces"
)

// TestNoLookAhead is the property test of the no-look-ahead guarantee: on a
// slice of the real KTH trace, every prediction made at a time <= t (the
// forecast, the predictor and partition that made it, and the ratio
// samples) is unchanged when the jobs that complete after t are altered at
// random — their runtimes, and for jobs not yet submitted at t everything
// else too. The partition search runs (it starts after 200 completions), so
// the test also covers the search seeing only the past.
func TestNoLookAhead(t *testing.T) {
	all, epoch := loadTrace(t, traces.KTH)
	base := all[3000:5000] // a slice from the middle: users and partitions already mixed
	cfg := DefaultEvalConfig()
	cfg.Forecaster.Search.Epoch = epoch
	cfg.KeepJobs = true
	orig, err := Evaluate(base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2008, 7))
	trials := 6
	if raceEnabled {
		trials = 2
	}
	for trial := range trials {
		cut := base[200+r.IntN(len(base)-400)].Submit
		alt := slices.Clone(base)
		changed := 0
		for i := range alt {
			j := &alt[i]
			if j.End <= cut || r.IntN(2) == 0 {
				continue
			}
			changed++
			// Any runtime that still completes after cut.
			start := j.End - max(j.Runtime, 0)
			j.Runtime = max(1, cut-start+1, int64(r.ExpFloat64()*float64(max(j.Runtime, 60))))
			j.End = start + j.Runtime
			if j.Submit > cut {
				j.User = int64(r.IntN(300))
				j.Group = int64(r.IntN(300))
				j.Procs = 1 + int64(r.IntN(100))
				j.Estimate = []int64{-1, 60, 3600, 86400}[r.IntN(4)]
				shift := int64(r.IntN(5000))
				j.Submit += shift
				j.End += shift
			}
		}
		if changed == 0 {
			t.Fatalf("trial %d altered nothing", trial)
		}
		got, err := Evaluate(alt, cfg)
		if err != nil {
			t.Fatal(err)
		}
		after := map[int64]JobResult{}
		for _, jr := range got.PerJob {
			after[jr.ID] = jr
		}
		compared := 0
		for _, want := range orig.PerJob {
			if want.Submit > cut {
				continue
			}
			compared++
			g, ok := after[want.ID]
			if !ok {
				t.Fatalf("trial %d: job %d (submitted %d <= cut %d) no longer evaluated", trial, want.ID, want.Submit, cut)
			}
			if g.Forecast != want.Forecast || g.Predictor != want.Predictor || g.Partition != want.Partition ||
				g.ColdStart != want.ColdStart || !slices.Equal(g.Ratios, want.Ratios) {
				t.Fatalf("trial %d, cut %d: job %d submitted at %d changed: %+v, was %+v", trial, cut, want.ID, want.Submit, g, want)
			}
		}
		if compared < 100 {
			t.Fatalf("trial %d compared only %d jobs", trial, compared)
		}
		t.Logf("trial %d: cut %d, %d jobs altered, %d predictions compared", trial, cut, changed, compared)
	}
}

// TestForecasterSeesOnlyThePast drives a Forecaster directly: a prediction
// at t made after feeding only the completions <= t equals the one made when
// the future completions have different runtimes.
func TestForecasterSeesOnlyThePast(t *testing.T) {
	all, epoch := loadTrace(t, traces.HPC2N)
	done := completionOrder(all)
	r := rand.New(rand.NewPCG(1, 2))
	trials := 3
	if raceEnabled {
		trials = 1
	}
	for range trials {
		k := 300 + r.IntN(len(done)-600)
		now := done[k].End
		predictAt := func(hist []Job) []Prediction {
			f, err := New(testConfig(epoch))
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range hist {
				if j.End > now {
					break
				}
				if err := f.Observe(j); err != nil {
					t.Fatal(err)
				}
			}
			var out []Prediction
			for _, j := range all[:200] {
				p, err := f.Predict(j, now)
				if err != nil && !errors.Is(err, ErrNoHistory) {
					t.Fatal(err)
				}
				out = append(out, p)
			}
			return out
		}
		want := predictAt(done)
		alt := slices.Clone(done)
		for i := range alt {
			if alt[i].End > now {
				alt[i].Runtime = 1 + int64(r.IntN(100000))
			}
		}
		if got := predictAt(alt); !slices.Equal(got, want) {
			t.Fatalf("predictions at %d depend on later completions", now)
		}
	}
}

func TestEventOrder(t *testing.T) {
	jobs := []Job{
		{ID: 1, Submit: 10, End: 10, Runtime: 0},  // zero-length: completes after its own submission
		{ID: 2, Submit: 0, End: 10, Runtime: 10},  // completes at 10
		{ID: 3, Submit: 10, End: 20, Runtime: 10}, // submitted at 10: sees job 2
	}
	ev := events(jobs)
	type step struct {
		idx  int32
		rank int8
	}
	var got []step
	for _, e := range ev {
		got = append(got, step{e.idx, e.rank})
	}
	want := []step{{1, 1}, {1, 0}, {0, 1}, {2, 1}, {0, 2}, {2, 0}}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestEvaluateSmall(t *testing.T) {
	jobs := []Job{
		{ID: 1, Submit: 0, End: 100, Runtime: 100, Estimate: 1000, User: 1},
		{ID: 2, Submit: 50, End: 50, Runtime: 0, Estimate: 1000, User: 1},  // failed: skipped, still history
		{ID: 3, Submit: 60, End: 300, Runtime: 200, Estimate: -1, User: 1}, // no estimate: skipped
		{ID: 4, Submit: 150, End: 400, Runtime: 250, Estimate: 500, User: 1},
		{ID: 5, Submit: 500, End: 900, Runtime: 400, Estimate: 400, User: 1},
	}
	cfg := DefaultEvalConfig()
	cfg.KeepJobs = true
	cfg.MinPartitionJobs = 1
	rep, err := Evaluate(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 5 || rep.Skipped.NoRuntime != 1 || rep.Skipped.NoEstimate != 1 || rep.Forecast.Jobs != 3 {
		t.Fatalf("counts: %+v", rep)
	}
	// Job 1: cold start, forecast = estimate 1000, APE 9.
	// Job 4 at 150: history {2 (0 s → 1 s), 1 (100 s)}; the root predicts.
	// Job 5 at 500: history adds 3 (200) and 4 (250).
	if !rep.PerJob[0].ColdStart || rep.PerJob[0].Forecast != 1000 || rep.ColdStarts != 1 {
		t.Errorf("job 1: %+v", rep.PerJob[0])
	}
	if rep.PerJob[1].ColdStart || rep.PerJob[1].Partition != "all" {
		t.Errorf("job 4: %+v", rep.PerJob[1])
	}
	// User estimate APEs: 9, 1, 0 → median 1.
	if rep.UserEstimate.P50 != 1 || rep.UserEstimate.Jobs != 3 {
		t.Errorf("user estimate %+v", rep.UserEstimate)
	}
	for name, ps := range rep.Predictors {
		if math.IsNaN(ps.MdAPE) || math.IsNaN(ps.PercentBest) {
			t.Errorf("%s: NaN in %+v", name, ps)
		}
	}
}

func TestEvaluateNoEstimates(t *testing.T) {
	jobs, _ := loadTrace(t, traces.NASA)
	if _, err := Evaluate(jobs[:500], DefaultEvalConfig()); !errors.Is(err, ErrNoJobs) {
		t.Errorf("trace without estimates: err %v, want ErrNoJobs", err)
	}
	bad := DefaultEvalConfig()
	bad.MinPartitionJobs = 0
	if _, err := Evaluate(jobs, bad); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad config: %v", err)
	}
}

// TestEvaluateHPC2N runs the whole HPC2N excerpt: the forecast must beat the
// users' estimates and the unpartitioned forecast, and the report must be
// complete and consistent.
func TestEvaluateHPC2N(t *testing.T) {
	jobs, epoch := loadTrace(t, traces.HPC2N)
	cfg := DefaultEvalConfig()
	cfg.Forecaster.Search.Epoch = epoch
	rep, err := Evaluate(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep)
	t.Logf("HPC2N: forecast %.3f/%.3f/%.3f, estimate %.3f, unpartitioned %.3f (%s), chain %v",
		rep.Forecast.P25, rep.Forecast.P50, rep.Forecast.P75, rep.UserEstimate.P50, rep.Unpartitioned.P50, rep.Unpartitioned.Predictor, rep.Chain)
}

// TestEvaluateKTHSlice runs the first 8,000 KTH jobs (3,000 under the race
// detector).
func TestEvaluateKTHSlice(t *testing.T) {
	jobs, epoch := loadTrace(t, traces.KTH)
	cfg := DefaultEvalConfig()
	cfg.Forecaster.Search.Epoch = epoch
	n := 8000
	if raceEnabled {
		n = 3000
	}
	rep, err := Evaluate(jobs[:n], cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep)
	t.Logf("KTH[:%d]: forecast %.3f/%.3f/%.3f, estimate %.3f, unpartitioned %.3f (%s), chain %v",
		n, rep.Forecast.P25, rep.Forecast.P50, rep.Forecast.P75, rep.UserEstimate.P50, rep.Unpartitioned.P50, rep.Unpartitioned.Predictor, rep.Chain)
}

func checkReport(t *testing.T, rep *Report) {
	t.Helper()
	if rep.Forecast.Jobs != rep.UserEstimate.Jobs || rep.Forecast.Jobs != rep.Unpartitioned.Jobs ||
		rep.Forecast.Jobs+rep.Skipped.NoRuntime+rep.Skipped.NoEstimate != rep.Jobs {
		t.Errorf("job counts disagree: %+v %+v %+v %+v", rep.Forecast, rep.UserEstimate, rep.Unpartitioned.Quartiles, rep.Skipped)
	}
	if !(rep.Forecast.P25 <= rep.Forecast.P50 && rep.Forecast.P50 <= rep.Forecast.P75) {
		t.Errorf("quartiles out of order: %+v", rep.Forecast)
	}
	if rep.Forecast.P50 >= rep.UserEstimate.P50 {
		t.Errorf("forecast MdAPE %.3f does not beat the users' estimates %.3f", rep.Forecast.P50, rep.UserEstimate.P50)
	}
	if rep.Forecast.P50 >= rep.Unpartitioned.P50 {
		t.Errorf("forecast MdAPE %.3f does not beat the unpartitioned %.3f", rep.Forecast.P50, rep.Unpartitioned.P50)
	}
	var best, chosen float64
	for _, name := range PredictorNames() {
		ps, ok := rep.Predictors[name]
		if !ok {
			t.Fatalf("predictor %s missing", name)
		}
		best += ps.PercentBest
		chosen += ps.PercentChosen
	}
	cold := 100 * float64(rep.ColdStarts) / float64(rep.Forecast.Jobs)
	if math.Abs(best-100) > 1e-6 || math.Abs(chosen+cold-100) > 1e-6 {
		t.Errorf("percent best sums to %v, chosen+cold to %v", best, chosen+cold)
	}
	if rep.Partitions.Sequences == 0 || rep.Searches == 0 {
		t.Errorf("no sequences (%d) or no search (%d)", rep.Partitions.Sequences, rep.Searches)
	}
}

// TestRatioSamplesCalibrated checks the distribution extension on the whole
// HPC2N excerpt: the actual ratio actual/estimate of each job falls below
// the median of its samples about half of the time, and outside their
// 10-90% range not much more often than the nominal 20%. It also checks the
// report's figures against the per-job samples.
func TestRatioSamplesCalibrated(t *testing.T) {
	jobs, epoch := loadTrace(t, traces.HPC2N)
	cfg := DefaultEvalConfig()
	cfg.Forecaster.Search.Epoch = epoch
	cfg.KeepJobs = true
	rep, err := Evaluate(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var n, below50, outside int
	for _, jr := range rep.PerJob {
		if len(jr.Ratios) == 0 {
			continue
		}
		s := sortedCopy(jr.Ratios)
		a := float64(jr.Actual) / float64(jr.Estimate)
		n++
		if a < quantile(s, 0.5) {
			below50++
		}
		if a < quantile(s, 0.1) || a > quantile(s, 0.9) {
			outside++
		}
	}
	if n < len(rep.PerJob)-10 {
		t.Fatalf("only %d of %d jobs have ratio samples", n, len(rep.PerJob))
	}
	b, o := float64(below50)/float64(n), float64(outside)/float64(n)
	r := rep.Ratios
	if r.Jobs != n || !near(r.BelowP50, b) || !near(r.BelowP10+r.AboveP90, o) {
		t.Errorf("report %+v disagrees with the samples: %d jobs, %.3f below the median, %.3f outside", r, n, b, o)
	}
	if math.Abs(b-0.5) > 0.05 || o > 0.35 {
		t.Errorf("below the median %.3f (want ≈ 0.5), outside 10-90%% %.3f (want ≈ 0.2)", b, o)
	}
	t.Logf("HPC2N: %d jobs, %.3f below the sample median, %.3f outside the 10-90%% range", n, b, o)
}
