package overbook

import (
	"math/rand/v2"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// uniformStats returns statistics where a job's actual runtime is spread
// evenly over 1..100 % of its estimate: CDFAt(l, x) is about l/x.
func uniformStats(t testing.TB) *Stats {
	t.Helper()
	st, err := NewStats(StatsConfig{Classifier: General})
	if err != nil {
		t.Fatal(err)
	}
	var infos []JobInfo
	var actual []int64
	for i := 1; i <= 100; i++ {
		infos = append(infos, JobInfo{Procs: 1, Estimate: 100})
		actual = append(actual, int64(i))
	}
	if err := st.Train(infos, actual); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAdmissionDecisions(t *testing.T) {
	// A 4-processor site, fully busy over [100, 200) and [290, 400):
	// a 4-wide job released at 0 finds gaps [0, 100) and [200, 290).
	build := func() *plan.Plan {
		p := plan.New(4)
		for i, r := range [][2]int64{{100, 200}, {290, 400}} {
			if err := p.Reserve(plan.Reservation{ID: int64(100 + i), Procs: 4, Start: r[0], End: r[1], Deadline: plan.Forever}); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	tests := []struct {
		name     string
		job      plan.Job
		test     Test
		want     plan.Reason
		start    int64
		end      int64
		wantPoF  float64
		pofDelta float64
	}{
		{"fits in full before the wall", plan.Job{ID: 1, Procs: 4, Estimate: 100, Deadline: 1000}, Threshold{PoFMax: 0.1}, plan.ReasonPlacedInFull, 0, 100, 0, 0},
		{"fits in full after everything", plan.Job{ID: 1, Procs: 4, Estimate: 150, Deadline: 1000}, Threshold{PoFMax: 0.1}, plan.ReasonPlacedInFull, 400, 550, 0, 0},
		// Window [0, 300): gaps [0,100) and [200,290); a 100 s gap of a 120 s
		// job: CDF(83 %) = 0.83 -> PoF 0.17.
		{"overbooked when the test allows", plan.Job{ID: 1, Procs: 4, Estimate: 120, Deadline: 300}, Threshold{PoFMax: 0.2}, plan.ReasonOverbooked, 0, 100, 0.17, 0.011},
		{"rejected for risk", plan.Job{ID: 1, Procs: 4, Estimate: 120, Deadline: 300}, Threshold{PoFMax: 0.1}, plan.ReasonRejectedRisk, 0, 0, 0, 0},
		{"no gap at all", plan.Job{ID: 1, Procs: 4, Estimate: 50, Release: 120, Deadline: 190}, Threshold{PoFMax: 1}, plan.ReasonRejectedNoGap, 0, 0, 0, 0},
		{"too wide", plan.Job{ID: 1, Procs: 5, Estimate: 50, Deadline: 1000}, Threshold{PoFMax: 1}, plan.ReasonRejectedTooWide, 0, 0, 0, 0},
	}
	for _, mode := range []Mode{Heuristic, Comprehensive} {
		for _, tc := range tests {
			t.Run(mode.String()+"/"+tc.name, func(t *testing.T) {
				p := build()
				a := &Admission{Stats: uniformStats(t), Test: tc.test, Mode: mode}
				got := a.Admit(p, &tc.job, 0)
				if got.Reason != tc.want {
					t.Fatalf("reason %v, want %v (%+v)", got.Reason, tc.want, got)
				}
				if got.OK() && (got.Start != tc.start || got.End != tc.end) {
					t.Fatalf("slot [%d, %d), want [%d, %d)", got.Start, got.End, tc.start, tc.end)
				}
				if got.OK() && (got.PoF < tc.wantPoF-tc.pofDelta || got.PoF > tc.wantPoF+tc.pofDelta) {
					t.Fatalf("PoF %v, want %v ± %v", got.PoF, tc.wantPoF, tc.pofDelta)
				}
			})
		}
	}
}

// TestComprehensiveSeesEarlyStarts checks that a gap behind a reservation
// that may end early is less risky under the comprehensive PoF than under
// the heuristic one, which assumes the predecessor uses all its time.
func TestComprehensiveSeesEarlyStarts(t *testing.T) {
	st := uniformStats(t)
	pofs := map[Mode]float64{}
	for _, mode := range []Mode{Heuristic, Comprehensive} {
		p := plan.New(4)
		a := &Admission{Stats: st, Test: Threshold{PoFMax: 1}, Mode: mode}
		// A predecessor admitted through the same admission, so its end
		// distribution is known: 4 procs over [0, 100), estimate 100.
		pred := plan.Job{ID: 1, Procs: 4, Estimate: 100, Deadline: 100}
		pl := a.Admit(p, &pred, 0)
		if err := p.Reserve(plan.Reservation{ID: 1, Procs: 4, Start: pl.Start, End: pl.End, Deadline: 100}); err != nil {
			t.Fatal(err)
		}
		if err := p.Reserve(plan.Reservation{ID: 2, Procs: 4, Start: 150, End: 300, Deadline: plan.Forever, Fixed: true}); err != nil {
			t.Fatal(err)
		}
		// The new job (estimate 100) can only go into [100, 150) in its window.
		j := plan.Job{ID: 3, Procs: 4, Estimate: 100, Deadline: 160}
		got := a.Admit(p, &j, 0)
		if got.Reason != plan.ReasonOverbooked || got.Start != 100 || got.End != 150 {
			t.Fatalf("%v: %+v", mode, got)
		}
		pofs[mode] = got.PoF
	}
	if !(pofs[Comprehensive] < pofs[Heuristic]) {
		t.Fatalf("comprehensive PoF %v not below heuristic %v", pofs[Comprehensive], pofs[Heuristic])
	}
}

// benchAdmissionPlan is a 1,000-processor plan with 1,000 reservations, and
// a job that does not fit in full inside its window, so that every
// admission searches the gaps and computes a PoF for each.
func benchAdmissionPlan(b *testing.B) *plan.Plan {
	rng := rand.New(rand.NewPCG(9, 9))
	p := plan.New(1000)
	for id := int64(1); p.Len() < 1000; id++ {
		q := 1 + rng.IntN(256)
		d := 600 + rng.Int64N(4*3600)
		on := rng.Int64N(2 * 24 * 3600)
		s, ok := p.EarliestFit(q, d, on, plan.Forever)
		if !ok {
			b.Fatal("no fit")
		}
		if err := p.Reserve(plan.Reservation{ID: id, Procs: q, Start: s, End: s + d, Release: on, Deadline: plan.Forever}); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

func benchAdmission(b *testing.B, mode Mode) {
	p := benchAdmissionPlan(b)
	a := &Admission{Stats: uniformStats(b), Test: Threshold{PoFMax: 0.5}, Mode: mode, Failures: ThesisFailures}
	rng := rand.New(rand.NewPCG(1, 1))
	gaps := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rel := rng.Int64N(24 * 3600)
		j := plan.Job{ID: 1 << 40, Procs: 200 + rng.IntN(400), Estimate: 4 * 3600, Release: rel, Deadline: rel + 6*3600}
		a.Admit(p, &j, 0)
		gaps += len(a.gaps)
	}
	b.ReportMetric(float64(gaps)/float64(b.N), "gaps/op")
}

func BenchmarkAdmitHeuristic(b *testing.B)     { benchAdmission(b, Heuristic) }
func BenchmarkAdmitComprehensive(b *testing.B) { benchAdmission(b, Comprehensive) }
