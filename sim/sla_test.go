package sim

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

func slaConfig(st Strategy, pofMax float64) SLAConfig {
	cfg := DefaultSLAConfig(100)
	cfg.Strategy, cfg.Test, cfg.Runs, cfg.JobsPerRun = st, overbook.Threshold{PoFMax: pofMax}, 4, 500
	return cfg
}

func TestSLAExperimentIsDeterministic(t *testing.T) {
	jobs := kth(t)
	for _, st := range []Strategy{HeuristicOverbook, ComprehensiveOverbook} {
		a, err := Experiment(context.Background(), jobs, slaConfig(st, 0.5))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Experiment(context.Background(), jobs, slaConfig(st, 0.5))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%v: two experiments differ", st)
		}
	}
}

// TestOverbookingKeepsFullSLAs checks that overbooking never violates an SLA
// it accepted in full: only jobs placed into short gaps may be cut, and
// every accepted job stays inside its window.
func TestOverbookingKeepsFullSLAs(t *testing.T) {
	jobs := kth(t)
	cfg := slaConfig(HeuristicOverbook, 0.8)
	train, runs, err := Split(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	trained, err := Train(train, cfg.Stats)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []Strategy{HeuristicOverbook, ComprehensiveOverbook, HeuristicPlan, Backfill} {
		cfg.Strategy = st
		out, recs, err := RunSLA(context.Background(), PrepareRun(runs[0], cfg), cfg, trained)
		if err != nil {
			t.Fatal(err)
		}
		if out.Accepted+out.Rejected != len(recs) || out.Met+out.Violated != out.Accepted {
			t.Fatalf("%v: counts do not add up: %+v", st, out)
		}
		if st.Overbooks() && out.Overbooked == 0 {
			t.Fatalf("%v at PoF_max 0.8 overbooked nothing", st)
		}
		for _, r := range recs {
			if !r.Decision.OK() {
				continue
			}
			if r.Start < r.Submit || r.End > r.Deadline {
				t.Fatalf("%v: job %d ran [%d, %d) outside its window [%d, %d)", st, r.ID, r.Start, r.End, r.Submit, r.Deadline)
			}
			cut := r.Killed && r.Ran() < r.Estimate
			if cut && r.Decision.Reason != plan.ReasonOverbooked {
				t.Fatalf("%v: job %d accepted in full was cut after %d of %d s", st, r.ID, r.Ran(), r.Estimate)
			}
		}
	}
}

func TestPrepareRunScalesToLoad(t *testing.T) {
	cfg := slaConfig(HeuristicPlan, 0.1)
	run := kth(t)[5000:6000]
	out := PrepareRun(run, cfg)
	var area float64
	for _, j := range out {
		area += float64(j.Procs) * float64(j.Estimate)
	}
	span := float64(out[len(out)-1].Submit - out[0].Submit)
	if load := area / (100 * span); math.Abs(load-2) > 0.01 {
		t.Fatalf("offered load %.3f, want 2", load)
	}
	for i, j := range out {
		if j.Deadline != j.Submit+2*j.Estimate || j.Fee != float64(j.Procs)*float64(j.Estimate)/3600 || j.Penalty != j.Fee {
			t.Fatalf("job %d: deadline %d fee %v penalty %v", i, j.Deadline, j.Fee, j.Penalty)
		}
	}
	if run[0].Deadline != plan.Forever {
		t.Fatal("PrepareRun modified its input")
	}
}

func TestSplit(t *testing.T) {
	jobs := make([]Job, 100)
	tests := []struct {
		name           string
		runs, per, trn int
		train          int
		first          int
		err            bool
	}{
		{"thesis shape", 4, 20, 0, 20, 20, false},
		{"limited training", 4, 20, 5, 5, 20, false},
		{"one run of the rest", 1, 0, 30, 30, 30, false},
		{"too many", 6, 20, 0, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range jobs {
				jobs[i].ID = int64(i)
			}
			train, runs, err := Split(jobs, SLAConfig{Runs: tc.runs, JobsPerRun: tc.per, TrainJobs: tc.trn})
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			if len(train) != tc.train || runs[0][0].ID != int64(tc.first) {
				t.Fatalf("train %d jobs, first run starts at %d", len(train), runs[0][0].ID)
			}
		})
	}
}

func TestMeanCI95(t *testing.T) {
	// Values 1..5: mean 3, sd sqrt(2.5), t(0.975, 4) = 2.7764.
	m, h := MeanCI95([]float64{1, 2, 3, 4, 5})
	if m != 3 || math.Abs(h-2.7764*math.Sqrt(2.5)/math.Sqrt(5)) > 1e-3 {
		t.Fatalf("MeanCI95 = %v ± %v", m, h)
	}
	if _, h := MeanCI95([]float64{7}); h != 0 {
		t.Fatal("one value has an interval")
	}
}

// TestSLAForecastStats runs the overbooking strategies with forecast
// statistics: deterministic, counts that add up, jobs accepted in full
// never cut, and some overbooking at a loose threshold.
func TestSLAForecastStats(t *testing.T) {
	jobs := kth(t)
	for _, st := range []Strategy{HeuristicOverbook, ComprehensiveOverbook} {
		cfg := slaConfig(st, 0.8)
		cfg.StatsSource, cfg.Runs, cfg.JobsPerRun, cfg.TrainJobs = StatsForecast, 2, 300, 1000
		if raceEnabled {
			cfg.Runs, cfg.JobsPerRun, cfg.TrainJobs = 1, 200, 500
		}
		a, err := Experiment(context.Background(), jobs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Experiment(context.Background(), jobs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%v: two experiments differ", st)
		}
		overbooked := 0
		for _, r := range a {
			if r.Accepted+r.Rejected != cfg.JobsPerRun || r.Met+r.Violated != r.Accepted {
				t.Fatalf("%v: counts do not add up: %+v", st, r)
			}
			overbooked += r.Overbooked
		}
		if overbooked == 0 {
			t.Fatalf("%v with forecast statistics at PoF_max 0.8 overbooked nothing", st)
		}
		train, runs, err := Split(jobs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := RunSLAForecast(context.Background(), PrepareRun(runs[0], cfg), cfg, train)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Decision.OK() && r.Killed && r.Ran() < r.Estimate && r.Decision.Reason != plan.ReasonOverbooked {
				t.Fatalf("%v: job %d accepted in full was cut", st, r.ID)
			}
		}
		if _, _, err := RunSLA(context.Background(), PrepareRun(runs[0], cfg), cfg, nil); !errorsIs(err, ErrBadConfig) {
			t.Fatalf("RunSLA with forecast statistics: %v", err)
		}
	}
	if _, err := ParseStatsSource("forecast"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseStatsSource("oracle"); !errorsIs(err, ErrBadConfig) {
		t.Fatalf("ParseStatsSource(oracle): %v", err)
	}
}

// TestNodeFailures replays runs with frequent processor failures: failures
// cause violations, the counts still add up, jobs restarted after a failure
// run inside their windows, and the replay is deterministic for a seed.
func TestNodeFailures(t *testing.T) {
	jobs := kth(t)
	cfg := slaConfig(HeuristicOverbook, 0.3)
	cfg.Runs, cfg.JobsPerRun = 2, 400
	// Thousands of times the thesis's rate, so that a short run sees many.
	cfg.Failures = overbook.FailureModel{Lambda: 0.02, Mu: 0.5}
	cfg.FailureSeed = 7
	train, runs, err := Split(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	trained, err := Train(train, cfg.Stats)
	if err != nil {
		t.Fatal(err)
	}
	a, recs, err := RunSLA(context.Background(), PrepareRun(runs[0], cfg), cfg, trained)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := RunSLA(context.Background(), PrepareRun(runs[0], cfg), cfg, trained)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two replays with the same failure seed differ")
	}
	if a.FailureViolations == 0 || a.Met+a.Violated != a.Accepted {
		t.Fatalf("failures: %+v", a)
	}
	restarted := 0
	for _, r := range recs {
		if r.Restarts > 0 {
			restarted++
		}
		if r.Started && (r.Start < r.Submit || r.End > r.Deadline) {
			t.Fatalf("job %d ran [%d, %d) outside [%d, %d)", r.ID, r.Start, r.End, r.Submit, r.Deadline)
		}
	}
	if restarted == 0 {
		t.Fatal("no job hit by a failure was restarted")
	}
	t.Logf("%d failure violations, %d restarts, %d met of %d accepted", a.FailureViolations, restarted, a.Met, a.Accepted)
}
