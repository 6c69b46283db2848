package sim

import (
	"context"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

func TestComputeStartAccuracy(t *testing.T) {
	recs := []Record{
		{Started: true, Start: 100, Planned: 100, Promised: true},   // on time
		{Started: true, Start: 130, Planned: 100, Promised: true},   // 30 s late: within a minute
		{Started: true, Start: 100, Planned: 4000, Promised: true},  // early
		{Started: true, Start: 8000, Planned: 1000, Promised: true}, // over an hour late
		{Started: false, Planned: 50, Promised: true},               // never started: left out
		{Started: true, Start: 10},                                  // no promise: left out
	}
	a := ComputeStartAccuracy(recs)
	if a == nil || a.Jobs != 4 || a.OnTime != 0.25 || a.Within1m != 0.5 || a.Early != 0.25 || a.Late1h != 0.25 {
		t.Fatalf("accuracy %+v", a)
	}
	if a.P10 != -3900 || a.P99 != 7000 || a.MeanAbs != (0+30+3900+7000)/4.0 {
		t.Errorf("percentiles %+v", a)
	}
	if ComputeStartAccuracy(nil) != nil {
		t.Error("no jobs: want nil")
	}
}

// TestConservativeNeverStartsLate: conservative backfilling's promise is an
// upper bound (reservations only move earlier), so no job starts after the
// start planned at its submission; EASY promises nothing and is late.
func TestConservativeNeverStartsLate(t *testing.T) {
	var jobs []Job
	for i := range 200 {
		jobs = append(jobs, Job{ID: int64(i + 1), Submit: int64(i * 30), Procs: 1 + (i*7)%8, Estimate: 600 + int64(i%5)*300,
			Runtime: 100 + int64(i%7)*150, Deadline: plan.Forever})
	}
	for _, pol := range []plan.Policy{plan.Conservative, plan.EASY} {
		res, err := Run(context.Background(), jobs, Config{Name: "t", Site: plan.Config{Procs: 8, Policy: pol}})
		if err != nil {
			t.Fatal(err)
		}
		errs := StartErrors(res.Records)
		if len(errs) != len(jobs) {
			t.Fatalf("%v: %d jobs with a promise, want %d", pol, len(errs), len(jobs))
		}
		late := errs[len(errs)-1]
		if pol == plan.Conservative && late > 0 {
			t.Errorf("conservative: a job started %d s after its promise", late)
		}
		if pol == plan.EASY && late <= 0 {
			t.Errorf("easy: no job started late (max error %d); the test workload is too light", late)
		}
	}
}
