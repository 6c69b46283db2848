package sim

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

var policies = []plan.Policy{plan.Conservative, plan.EASY, plan.FCFS, plan.LIST}

var kthOnce = sync.OnceValues(func() ([]Job, error) {
	rc, err := traces.Open(traces.KTH)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr, err := swf.Read(rc, traces.KTH, swf.Options{})
	if err != nil {
		return nil, err
	}
	jobs, _ := tr.Sanitize(swf.DefaultSanitizeOptions())
	return FromSWF(jobs), nil
})

// kth returns the sanitised KTH trace (100 processors).
func kth(tb testing.TB) []Job {
	tb.Helper()
	jobs, err := kthOnce()
	if err != nil {
		tb.Fatal(err)
	}
	return jobs
}

func replay(tb testing.TB, jobs []Job, procs int, pol plan.Policy) *Result {
	tb.Helper()
	res, err := Run(context.Background(), jobs, Config{Name: "t", Site: plan.Config{Procs: procs, Policy: pol}})
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// checkSchedule asserts the invariants of any schedule: every job starts at
// or after its submission, runs no longer than its estimate, and no time has
// more processors busy than the site has.
func checkSchedule(t *testing.T, res *Result, procs int) {
	t.Helper()
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	for _, r := range res.Records {
		if !r.Started {
			t.Fatalf("job %d never started", r.ID)
		}
		if r.Start < r.Submit {
			t.Fatalf("job %d started at %d before its submission at %d", r.ID, r.Start, r.Submit)
		}
		if r.Ran() > r.Estimate || r.Ran() > r.Runtime {
			t.Fatalf("job %d ran %d s; estimate %d, runtime %d", r.ID, r.Ran(), r.Estimate, r.Runtime)
		}
		if r.Ran() > 0 {
			evs = append(evs, ev{r.Start, r.Procs}, ev{r.End, -r.Procs})
		}
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta // ends before starts at the same time
	})
	busy := 0
	for _, e := range evs {
		busy += e.delta
		if busy > procs {
			t.Fatalf("at %d: %d processors busy on a %d-processor site", e.at, busy, procs)
		}
	}
}

func TestAgainstReference(t *testing.T) {
	jobs := kth(t)[:1200]
	for _, pol := range policies {
		t.Run(pol.String(), func(t *testing.T) {
			res := replay(t, jobs, 100, pol)
			want := refSim{procs: 100, jobs: jobs}.run(pol)
			for i, r := range res.Records {
				if r.Start != want[i] {
					t.Fatalf("job %d (#%d): start %d, reference %d", r.ID, i, r.Start, want[i])
				}
			}
			checkSchedule(t, res, 100)
		})
	}
}

func TestKTHReplayEveryPolicy(t *testing.T) {
	jobs := kth(t)
	for _, pol := range policies {
		t.Run(pol.String(), func(t *testing.T) {
			res := replay(t, jobs, 100, pol)
			checkSchedule(t, res, 100)
			m := ComputeMetrics(res.Records, 100)
			if m.Jobs != len(jobs) {
				t.Fatalf("%d jobs ran, want %d", m.Jobs, len(jobs))
			}
			// Every policy runs the same work, so the squashed area is the
			// same; only the waits differ.
			var area float64
			for _, j := range jobs {
				area += float64(j.Procs) * float64(min(j.Runtime, j.Estimate))
			}
			if m.SquashedArea != area {
				t.Fatalf("squashed area %.0f, want %.0f", m.SquashedArea, area)
			}
			if m.Utilization <= 0 || m.Utilization > 1 {
				t.Fatalf("utilisation %v out of (0, 1]", m.Utilization)
			}
		})
	}
}

func TestReplayIsDeterministic(t *testing.T) {
	jobs := kth(t)[:5000]
	for _, pol := range policies {
		a := replay(t, jobs, 100, pol)
		b := replay(t, jobs, 100, pol)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%v: two replays differ", pol)
		}
	}
}

// TestConservativeNeverDelays checks that under conservative backfilling no
// job starts later than the reservation it was given at submission.
func TestConservativeNeverDelays(t *testing.T) {
	jobs := kth(t)[:8000]
	res := replay(t, jobs, 100, plan.Conservative)
	for _, r := range res.Records {
		if r.Start > r.Decision.Start {
			t.Fatalf("job %d promised %d, started %d", r.ID, r.Decision.Start, r.Start)
		}
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		jobs []Job
		want error
	}{
		{"unsorted", []Job{{ID: 1, Submit: 5, Procs: 1, Estimate: 1, Deadline: plan.Forever}, {ID: 2, Submit: 4, Procs: 1, Estimate: 1, Deadline: plan.Forever}}, ErrUnsorted},
		{"duplicate", []Job{{ID: 1, Procs: 1, Estimate: 1, Deadline: plan.Forever}, {ID: 1, Procs: 1, Estimate: 1, Deadline: plan.Forever}}, ErrDuplicateJob},
		{"duplicate, sparse ids", []Job{{ID: -1 << 62, Procs: 1, Estimate: 1, Deadline: plan.Forever}, {ID: 1 << 62, Procs: 1, Estimate: 1, Deadline: plan.Forever},
			{ID: -1 << 62, Procs: 1, Estimate: 1, Deadline: plan.Forever}}, ErrDuplicateJob},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.jobs, Config{Site: plan.Config{Procs: 4}})
			if !errorsIs(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestSparseIDsReplayAlike checks that a replay does not depend on how its
// jobs are numbered: ids spread far apart (indexed by a map) and ids 1..n
// (indexed by a slice) give the same records.
func TestSparseIDsReplayAlike(t *testing.T) {
	dense := kth(t)[:3000]
	sparse := slices.Clone(dense)
	for i := range sparse {
		sparse[i].ID = int64(i)*1_000_003 - 1<<40
	}
	for _, pol := range []plan.Policy{plan.EASY, plan.Conservative} {
		a, b := replay(t, dense, 100, pol), replay(t, sparse, 100, pol)
		for i := range a.Records {
			ra, rb := a.Records[i], b.Records[i]
			ra.ID, rb.ID = 0, 0
			if fmt.Sprint(ra) != fmt.Sprint(rb) {
				t.Fatalf("%v: job %d: dense ids %+v, sparse ids %+v", pol, i, ra, rb)
			}
		}
	}
}

func TestMetricsHandComputed(t *testing.T) {
	// Two jobs on 4 processors: A (2 procs) submitted 0, ran 0-10;
	// B (4 procs) submitted 0, ran 10-15.
	// SA: A 20, B 20. AWRT = (20*10 + 20*15)/40 = 12.5; AWWT = (0 + 20*10)/40 = 5.
	// Span 0..15, utilisation 40/(4*15) = 0.6667. Bounded slowdowns:
	// A max(1, 10/10) = 1; B (10+5)/max(5,10) = 1.5; mean 1.25.
	recs := []Record{
		{Job: Job{ID: 1, Procs: 2, Runtime: 10, Estimate: 10}, Decision: plan.Placement{Reason: plan.ReasonPlacedInFull}, Started: true, Start: 0, End: 10},
		{Job: Job{ID: 2, Procs: 4, Runtime: 5, Estimate: 5}, Decision: plan.Placement{Reason: plan.ReasonPlacedInFull}, Started: true, Start: 10, End: 15},
		{Job: Job{ID: 3, Procs: 8}, Decision: plan.Placement{Reason: plan.ReasonRejectedTooWide}},
	}
	m := ComputeMetrics(recs, 4)
	want := Metrics{Jobs: 2, Rejected: 1, AWRT: 12.5, AWWT: 5, Utilization: 40.0 / 60, Makespan: 15, SquashedArea: 40,
		BoundedSlowdown: 1.25, WaitP50: 0, WaitP90: 10, WaitP99: 10, MeanWait: 5}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("metrics\n got %+v\nwant %+v", m, want)
	}
}

func BenchmarkReplayKTH(b *testing.B) {
	jobs := kth(b)
	for _, pol := range policies {
		b.Run(pol.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				replay(b, jobs, 100, pol)
			}
		})
	}
}
