package overbook

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestHeuristicPoFHandComputed(t *testing.T) {
	h := h10_50_100(t) // CDF: .4 on [10,50), .6 on [50,100), 1 at 100
	var none FailureModel
	fm := FailureModel{Lambda: 1, Mu: 3} // A(2) = 0.5625
	tests := []struct {
		name        string
		fm          FailureModel
		procs       int
		est, slot   int64
		want        float64
		computation string
	}{
		{"half gap", none, 2, 3600, 1800, 0.4, "1 − CDF(50) = 1 − 0.6"},
		{"just under half", none, 2, 3600, 1799, 0.6, "1 − CDF(49) = 1 − 0.4"},
		{"full gap", none, 2, 3600, 3600, 0, "l >= x: CDFAt = 1, no failures"},
		{"longer gap", none, 2, 3600, 7200, 0, "l > x"},
		{"zero gap", none, 2, 3600, 0, 1, "CDF(0) = 0"},
		{"negative gap", none, 2, 3600, -5, 1, "CDFAt(−5) = 0"},
		{"with failures", fm, 2, 3600, 1800, 0.8758406886046383,
			"1 − 0.5625·0.6·exp(−1·0.5 h·2) = 1 − 0.5625·0.6·0.3678794"},
		{"failures only", fm, 2, 3600, 3600, 1 - 0.5625*math.Exp(-2),
			"1 − 0.5625·1·exp(−1·1 h·2)"},
	}
	for _, tc := range tests {
		got := HeuristicPoF(h, tc.fm, tc.procs, tc.est, tc.slot)
		if !near(got, tc.want, 1e-12) {
			t.Errorf("%s: PoF = %.15f, want %.15f (%s)", tc.name, got, tc.want, tc.computation)
		}
	}
	// Empty statistics: overbooking always fails, a full slot only by failures.
	if HeuristicPoF(nil, none, 1, 3600, 3599) != 1 || HeuristicPoF(nil, none, 1, 3600, 3600) != 0 {
		t.Error("nil histogram")
	}
}

// Hand-computed comprehensive case used by several tests:
//
//	predecessor E: grid 0, 50, 100 with CDF .2, .5, 1 (planned end 100)
//	start S (release 0, planned 100, step 50): CDF .2, .5, 1; PMF .2, .3, .5
//	job: estimate x = 200, runtime histogram h10_50_100
func handStart(t testing.TB) StartDist {
	pred := EndDist{Origin: 0, Step: 50, Latest: 100, CDF: []float64{0.2, 0.5, 1}}
	s, err := NewStartDist([]EndDist{pred}, 0, 100, 50)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExecProbHandComputed(t *testing.T) {
	h := h10_50_100(t)
	s := handStart(t)
	tests := []struct {
		slotEnd int64
		want    float64
		calc    string
	}{
		// F(τ) = CDFAt(τ, 200): F(250) = F(200) = 1, F(150) = CDF(75) = .6.
		{250, 0.8, ".2·F(250) + .3·F(200) + .5·F(150) = .2 + .3 + .5·.6"},
		// F(160) = CDF(80) = .6, F(110) = CDF(55) = .6, F(60) = CDF(30) = .4.
		{160, 0.5, ".2·.6 + .3·.6 + .5·.4"},
		{300, 1, "l = 200 >= x: the thesis's P_exec = 1"},
		// F(100) = CDF(50) = .6, F(50) = CDF(25) = .4, F(0) = CDF(0) = 0.
		{100, 0.24, ".2·.6 + .3·.4 + .5·0"},
	}
	for _, tc := range tests {
		if got := ExecProb(s, h, 200, tc.slotEnd); !near(got, tc.want, 1e-15) {
			t.Errorf("ExecProb(slotEnd %d) = %v, want %v (%s)", tc.slotEnd, got, tc.want, tc.calc)
		}
	}
	// ComprehensivePoF at slotEnd 250 with λ=1, μ=3, 2 nodes:
	// t = min(200, 250−100) = 150 s; 1 − 0.5625·0.8·exp(−150/3600·2) = 0.58598001.
	fm := FailureModel{Lambda: 1, Mu: 3}
	if got := ComprehensivePoF(s, h, fm, 2, 200, 250); !near(got, 0.5859800134168045, 1e-12) {
		t.Errorf("ComprehensivePoF = %v, want 0.58598", got)
	}
	// The heuristic for the same slot (l = 150) is more pessimistic:
	// 1 − 0.5625·CDF(75)·exp(...) with CDF(75) = .6 < .8.
	if hp, cp := HeuristicPoF(h, fm, 2, 200, 150), ComprehensivePoF(s, h, fm, 2, 200, 250); hp <= cp {
		t.Errorf("heuristic %v should exceed comprehensive %v here", hp, cp)
	}
}

// bruteExecProb is the digest's formula evaluated point by point with CDFAt.
func bruteExecProb(s StartDist, h *Histogram, x, slotEnd int64) float64 {
	if slotEnd-s.Latest >= x {
		return 1
	}
	p, prev := 0.0, 0.0
	for k, c := range s.CDF {
		tk := s.Origin + int64(k)*s.Step
		if k == len(s.CDF)-1 {
			c, tk = 1, s.Latest
		}
		p += (c - prev) * h.CDFAt(slotEnd-tk, x)
		prev = c
	}
	return p
}

// randHist is a random histogram (sometimes empty) with a skew to
// overestimation.
func randHist(t testing.TB, r *rand.Rand) *Histogram {
	h := new(Histogram)
	n := r.IntN(200)
	for range n {
		est := int64(1000)
		act := int64(float64(est) * math.Pow(r.Float64(), 1+3*r.Float64()) * 1.3)
		if err := h.Add(act, est); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// randEnd is a random reservation end distribution.
func randEnd(t testing.TB, r *rand.Rand, h *Histogram) EndDist {
	start := r.Int64N(5000)
	est := 1 + r.Int64N(8000)
	slotEnd := start + r.Int64N(est+2000)
	d, err := ReservationDist(h, start, est, slotEnd, 1+r.Int64N(97))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Random checks of the mathematically true properties.
func TestComprehensiveProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fm := ThesisFailures
	for trial := range 300 {
		h := randHist(t, r)
		release := r.Int64N(3000)
		planned := release + r.Int64N(6000)
		step := 1 + r.Int64N(60)
		x := 1 + r.Int64N(9000)
		slotEnd := planned + r.Int64N(x+500)
		var preds []EndDist
		for range r.IntN(5) {
			preds = append(preds, randEnd(t, r, randHist(t, r)))
		}
		s, err := NewStartDist(preds, release, planned, step)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("trial %d: start dist invalid: %v", trial, err)
		}
		pe := ExecProb(s, h, x, slotEnd)
		// The walker agrees with the point-by-point formula.
		if b := bruteExecProb(s, h, x, slotEnd); !near(pe, b, 1e-12) {
			t.Fatalf("trial %d: ExecProb %v, brute force %v", trial, pe, b)
		}
		// The start is never after the planned start, so P_exec is at least
		// the heuristic's CDFAt(l, x).
		l := slotEnd - planned
		if heur := h.CDFAt(l, x); pe < heur-1e-12 {
			t.Fatalf("trial %d: P_exec %v below heuristic %v", trial, pe, heur)
		}
		if HeuristicPoF(h, fm, 8, x, l) < ComprehensivePoF(s, h, fm, 8, x, slotEnd)-1e-12 {
			t.Fatalf("trial %d: comprehensive PoF above heuristic", trial)
		}
		// One more predecessor never raises P_exec (F_S only gets smaller).
		more, err := NewStartDist(append(preds, randEnd(t, r, randHist(t, r))), release, planned, step)
		if err != nil {
			t.Fatal(err)
		}
		for k := range more.CDF {
			if more.CDF[k] > s.CDF[k]+1e-15 {
				t.Fatalf("trial %d: start CDF rose with a predecessor", trial)
			}
		}
		if pm := ExecProb(more, h, x, slotEnd); pm > pe+1e-12 {
			t.Fatalf("trial %d: P_exec rose from %v to %v with a predecessor", trial, pe, pm)
		}
		// A slot holding the full estimate: P_exec = 1.
		if ExecProb(s, h, x, planned+x) != 1 {
			t.Fatalf("trial %d: full slot P_exec != 1", trial)
		}
		// The chained end distribution is a valid distribution, capped.
		e, err := ChainedEndDist(s, h, x, slotEnd, step)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("trial %d: chained: %v", trial, err)
		}
		if e.Latest != min(slotEnd, planned+x) || e.CDFAt(e.Latest) != 1 || e.CDFAt(e.Origin-1) != 0 {
			t.Fatalf("trial %d: chained latest %d, want %d", trial, e.Latest, min(slotEnd, planned+x))
		}
		if m := e.Mean(); m < float64(release) || m > float64(e.Latest) {
			t.Fatalf("trial %d: mean end %v outside [%d, %d]", trial, m, release, e.Latest)
		}
	}
}

// With no predecessors and the job starting at its planned start (release
// = planned start) the comprehensive PoF is the heuristic one, exactly.
func TestComprehensiveEqualsHeuristicWithoutPredecessors(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		h := randHist(t, r)
		start := r.Int64N(100000)
		x := 1 + r.Int64N(50000)
		l := r.Int64N(x + 100)
		procs := 1 + r.IntN(512)
		s, err := NewStartDist(nil, start, start, DefaultStep(2*x))
		if err != nil {
			t.Fatal(err)
		}
		hp := HeuristicPoF(h, ThesisFailures, procs, x, l)
		cp := ComprehensivePoF(s, h, ThesisFailures, procs, x, start+l)
		if hp != cp {
			t.Fatalf("x %d l %d: heuristic %v comprehensive %v", x, l, hp, cp)
		}
	}
	// Without predecessors but released earlier, the job starts at release:
	// the whole window is usable.
	h := h10_50_100(t)
	s, _ := NewStartDist(nil, 0, 100, 10)
	if got := ExecProb(s, h, 200, 250); got != 1 { // 250 − 0 >= 200
		t.Errorf("no predecessors, early release: P_exec %v, want 1", got)
	}
}

func TestStartDistErrors(t *testing.T) {
	if _, err := NewStartDist(nil, 10, 5, 1); !errors.Is(err, ErrBadWindow) {
		t.Errorf("planned before release: %v", err)
	}
	if _, err := NewStartDist(nil, 0, 5, 0); !errors.Is(err, ErrBadStep) {
		t.Errorf("step 0: %v", err)
	}
	if _, err := NewStartDist(nil, 0, 1<<30, 1); !errors.Is(err, ErrTooManyBins) {
		t.Errorf("too many bins: %v", err)
	}
	if _, err := NewStartDist(nil, 0, MaxTime+1, 1<<30); !errors.Is(err, ErrBadWindow) {
		t.Errorf("beyond MaxTime: %v", err)
	}
}
