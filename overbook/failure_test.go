package overbook

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestFailureHandComputed(t *testing.T) {
	// λ = 1/h, μ = 3/h: per-node availability 3/(1+3) = 0.75; 2 nodes 0.5625.
	fm := FailureModel{Lambda: 1, Mu: 3}
	if got := fm.Availability(1); !near(got, 0.75, 1e-15) {
		t.Errorf("Availability(1) = %v, want 0.75", got)
	}
	if got := fm.Availability(2); !near(got, 0.5625, 1e-15) {
		t.Errorf("Availability(2) = %v, want 0.5625", got)
	}
	// λ = 0.1/h, 2 nodes, 5 h = 18000 s: exp(−0.1·5·2) = e^−1.
	fm2 := FailureModel{Lambda: 0.1, Mu: 1}
	if got := fm2.Survival(2, 18000); !near(got, math.Exp(-1), 1e-15) {
		t.Errorf("Survival(2, 18000) = %v, want e^-1", got)
	}
	// Reliability = Availability · Survival.
	for _, n := range []int{1, 7, 300} {
		for _, s := range []int64{0, 60, 36000} {
			want := fm.Availability(n) * fm.Survival(n, s)
			if got := fm.Reliability(n, s); !near(got, want, 1e-12*want) {
				t.Errorf("Reliability(%d, %d) = %v, want %v", n, s, got, want)
			}
		}
	}
}

// The digest's magnitudes (§2.2 [note]) for the thesis's λ and μ: per-node
// availability 0.99970; for a 10-hour job availability × survival is 0.998
// on 1 node, 0.903 on 64, 0.816 on 128 and 0.197 on 1024.
//
//	A = 0.4333/(0.4333 + 1.2904e-4) = 0.9997023
//	A^n·exp(−1.2904e-4·10·n): n=1 0.99841, n=64 0.90335, n=128 0.81605, n=1024 0.19666
func TestFailureThesisMagnitudes(t *testing.T) {
	fm := ThesisFailures
	if a := fm.Availability(1); !near(a, 0.99970, 5e-6) {
		t.Errorf("per-node availability %v, want 0.99970", a)
	}
	const tenHours = 10 * 3600
	for _, tc := range []struct {
		n    int
		want float64
	}{{1, 0.998}, {64, 0.903}, {128, 0.816}, {1024, 0.197}} {
		got := fm.Availability(tc.n) * fm.Survival(tc.n, tenHours)
		if !near(got, tc.want, 0.0005) {
			t.Errorf("n=%d: availability·survival = %.5f, want %.3f", tc.n, got, tc.want)
		}
		if r := fm.Reliability(tc.n, tenHours); !near(r, got, 1e-12) {
			t.Errorf("n=%d: Reliability %v != product %v", tc.n, r, got)
		}
	}
	// The thesis's printed form 1 − e^{−λt} is the failure CDF: it would make
	// a 1-node 10-hour job almost surely fail. The survival must be ~1.
	if s := fm.Survival(1, tenHours); s < 0.99 {
		t.Errorf("Survival(1, 10 h) = %v: the failure CDF, not the survival", s)
	}
}

func TestFailureEdgeCases(t *testing.T) {
	var zero FailureModel
	if zero.Availability(1000) != 1 || zero.Survival(1000, 1<<40) != 1 || zero.Reliability(1000, 1<<40) != 1 {
		t.Error("zero model is not failure-free")
	}
	fm := ThesisFailures
	if fm.Availability(0) != 1 || fm.Survival(0, 100) != 1 || fm.Survival(5, 0) != 1 || fm.Survival(5, -7) != 1 || fm.Reliability(0, 9) != 1 {
		t.Error("no nodes or no time must give 1")
	}
	noRepair := FailureModel{Lambda: 1}
	if noRepair.Availability(1) != 0 || noRepair.Reliability(3, 10) != 0 {
		t.Error("μ = 0 < λ: a node is eventually down forever, availability 0")
	}
	for _, bad := range []FailureModel{{Lambda: -1}, {Mu: math.NaN()}, {Lambda: math.Inf(1)}} {
		if err := bad.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("Validate(%+v) = %v", bad, err)
		}
	}
	if err := fm.Validate(); err != nil {
		t.Error(err)
	}
}

func TestFailureSampler(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	fm := FailureModel{Lambda: 1, Mu: 4} // mean 3600 s to failure, 900 s to repair
	const n = 200000
	var sf, sr float64
	for range n {
		f, rp := fm.NextFailure(r), fm.RepairTime(r)
		if f < 1 || rp < 1 {
			t.Fatalf("non-positive draw %d %d", f, rp)
		}
		sf += float64(f)
		sr += float64(rp)
	}
	// Standard error of the mean: 3600/√n ≈ 8 s and 900/√n ≈ 2 s; rounding up
	// adds 0.5 s on average.
	if m := sf / n; !near(m, 3600.5, 50) {
		t.Errorf("mean time to failure %v, want ≈ 3600", m)
	}
	if m := sr / n; !near(m, 900.5, 12) {
		t.Errorf("mean repair time %v, want ≈ 900", m)
	}
	var zero FailureModel
	if zero.NextFailure(r) != Never || zero.RepairTime(r) != Never {
		t.Error("zero model must never fail or repair")
	}
	// Deterministic for a given seed.
	a := rand.New(rand.NewPCG(1, 1))
	b := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		if ThesisFailures.NextFailure(a) != ThesisFailures.NextFailure(b) {
			t.Fatal("sampler not deterministic")
		}
	}
}
