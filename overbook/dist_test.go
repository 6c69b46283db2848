package overbook

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func sliceNear(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return true
}

func TestDefaultStep(t *testing.T) {
	for _, tc := range []struct{ horizon, want int64 }{
		{-5, 1}, {0, 1}, {1024, 1}, {1025, 2}, {2048, 2}, {2049, 3}, {36000, 36}, {2 * 86400, 169},
	} {
		if got := DefaultStep(tc.horizon); got != tc.want {
			t.Errorf("DefaultStep(%d) = %d, want %d", tc.horizon, got, tc.want)
		}
	}
}

func TestEndDistCDFAt(t *testing.T) {
	// Grid 1000, 1050, 1100, 1150 (latest 1130): CDF .1 .4 .7 1.
	d := EndDist{Origin: 1000, Step: 50, Latest: 1130, CDF: []float64{0.1, 0.4, 0.7, 1}}
	for _, tc := range []struct {
		t    int64
		want float64
	}{
		{999, 0}, {1000, 0.1}, {1049, 0.1}, {1050, 0.4}, {1129, 0.7}, {1130, 1}, {1150, 1}, {1 << 50, 1},
	} {
		if got := d.CDFAt(tc.t); got != tc.want {
			t.Errorf("CDFAt(%d) = %v, want %v", tc.t, got, tc.want)
		}
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	var zero EndDist // point mass at 0
	if zero.CDFAt(-1) != 0 || zero.CDFAt(0) != 1 {
		t.Error("zero EndDist is not a point mass at 0")
	}
	f := FixedEnd(77)
	if f.CDFAt(76) != 0 || f.CDFAt(77) != 1 || f.Validate() != nil || f.Mean() != 77 {
		t.Error("FixedEnd")
	}
	bad := []EndDist{
		{Origin: 0, Step: 0, Latest: 0, CDF: []float64{1}},
		{Origin: 0, Step: 1, Latest: 3, CDF: []float64{0, 1}},          // too few bins
		{Origin: 0, Step: 1, Latest: 1, CDF: []float64{0.5, 0.4}},      // not 1 at the end
		{Origin: 0, Step: 1, Latest: 2, CDF: []float64{0.5, 0.4, 1}},   // decreasing
		{Origin: 0, Step: 1, Latest: 1, CDF: []float64{math.NaN(), 1}}, // NaN
		{Origin: 5, Step: 1, Latest: 4, CDF: []float64{1}},             // latest before origin
	}
	for i, b := range bad {
		if err := b.Validate(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("bad[%d].Validate() = %v", i, err)
		}
	}
}

func TestReservationDistHandComputed(t *testing.T) {
	h := h10_50_100(t)
	// Start 1000, x = 200, slot end 1150, step 50: latest = min(1150, 1200),
	// bins at 0, 50, 100, 150 s: F(0) = CDF(0) = 0, F(50) = CDF(25) = .4,
	// F(100) = CDF(50) = .6, then the cap: 1.
	d, err := ReservationDist(h, 1000, 200, 1150, 50)
	if err != nil {
		t.Fatal(err)
	}
	if d.Origin != 1000 || d.Latest != 1150 || !sliceNear(d.CDF, []float64{0, 0.4, 0.6, 1}, 0) {
		t.Errorf("capped at slot end: %+v", d)
	}
	// A long slot: killed at the estimate, latest = 1200: F(150) = CDF(75) = .6.
	d, _ = ReservationDist(h, 1000, 200, 5000, 50)
	if d.Latest != 1200 || !sliceNear(d.CDF, []float64{0, 0.4, 0.6, 0.6, 1}, 0) {
		t.Errorf("capped at estimate: %+v", d)
	}
	// Off-grid cap: slot end 1130 → bins 0..150 s, last one (1150) >= 1130.
	d, _ = ReservationDist(h, 1000, 200, 1130, 50)
	if d.Latest != 1130 || !sliceNear(d.CDF, []float64{0, 0.4, 0.6, 1}, 0) || d.CDFAt(1129) != 0.6 || d.CDFAt(1130) != 1 {
		t.Errorf("off-grid cap: %+v", d)
	}
	// Errors.
	if _, err := ReservationDist(h, 10, 0, 20, 1); !errors.Is(err, ErrBadEstimate) {
		t.Error(err)
	}
	if _, err := ReservationDist(h, 10, 5, 9, 1); !errors.Is(err, ErrBadWindow) {
		t.Error(err)
	}
	if _, err := ReservationDist(h, 10, 5, 20, -1); !errors.Is(err, ErrBadStep) {
		t.Error(err)
	}
}

func TestNewStartDistHandComputed(t *testing.T) {
	p1 := EndDist{Origin: 0, Step: 50, Latest: 100, CDF: []float64{0.2, 0.5, 1}}
	p2 := EndDist{Origin: 25, Step: 25, Latest: 100, CDF: []float64{0.1, 0.4, 0.8, 1}} // at 25, 50, 75, 100
	// Release 0, planned 120, step 50: grid 0, 50, 100, 150.
	//   t=0:   F1 = .2, F2 = 0 (before its origin)  → 0
	//   t=50:  F1 = .5, F2 = .4                      → .2
	//   t=100: F1 = 1,  F2 = 1                       → 1
	//   t=150: planned start passed                  → 1
	s, err := NewStartDist([]EndDist{p1, p2}, 0, 120, 50)
	if err != nil {
		t.Fatal(err)
	}
	if !sliceNear(s.CDF, []float64{0, 0.2, 1, 1}, 1e-15) || s.Latest != 120 {
		t.Errorf("aligned: %+v", s)
	}
	// Release 10, planned 100, step 30 (not aligned with either grid):
	// grid 10, 40, 70, 100.
	//   t=10: F1 = CDF1[0] = .2, F2 = 0                    → 0
	//   t=40: F1 = .2, F2 = CDF2[(40−25)/25 = 0] = .1      → .02
	//   t=70: F1 = CDF1[1] = .5, F2 = CDF2[1] = .4         → .2
	//   t=100: 1
	s, _ = NewStartDist([]EndDist{p1, p2}, 10, 100, 30)
	if !sliceNear(s.CDF, []float64{0, 0.02, 0.2, 1}, 1e-15) {
		t.Errorf("unaligned: %+v", s.CDF)
	}
	// No predecessors: starts at release.
	s, _ = NewStartDist(nil, 10, 100, 30)
	if s.CDF[0] != 1 || s.CDFAt(9) != 0 || s.CDFAt(10) != 1 || s.Mean() != 10 {
		t.Errorf("no predecessors: %+v", s)
	}
	// Planned start = release: a point mass.
	s, _ = NewStartDist([]EndDist{p1}, 40, 40, 7)
	if len(s.CDF) != 1 || s.CDFAt(40) != 1 || s.CDFAt(39) != 0 {
		t.Errorf("point mass: %+v", s)
	}
}

// mulGrid agrees with CDFAt point by point on random grids.
func TestMulGridMatchesCDFAt(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 2000 {
		d := randEnd(t, r, randHist(t, r))
		t0 := r.Int64N(14000) - 2000
		step := 1 + r.Int64N(200)
		dst := make([]float64, r.IntN(300))
		for i := range dst {
			dst[i] = 1
		}
		d.mulGrid(dst, t0, step)
		for k, v := range dst {
			if want := d.CDFAt(t0 + int64(k)*step); v != want {
				t.Fatalf("k %d: mulGrid %v, CDFAt %v (dist %+v t0 %d step %d)", k, v, want, d, t0, step)
			}
		}
	}
}

// cdfGrid agrees with CDFAt point by point, including the slow paths.
func TestCDFGridMatchesCDFAt(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	for trial := range 3000 {
		h := randHist(t, r)
		if trial%10 == 0 {
			h = nil
		}
		est := 1 + r.Int64N(100000)
		if trial%17 == 0 {
			est = math.MaxInt64/100 + r.Int64N(1000) // slow path
		}
		tau0 := r.Int64N(2*est+1) - est
		step := 1 + r.Int64N(est/50+1)
		if trial%13 == 0 {
			step = est + r.Int64N(10) // step >= estimate: slow path
		}
		n := r.IntN(400)
		if trial%17 == 0 {
			n = min(n, 20) // keep the grid within ±MaxTime
		}
		dst := make([]float64, n)
		h.cdfGrid(dst, tau0, step, est)
		for k, v := range dst {
			tau := tau0 + int64(k)*step
			if want := h.CDFAt(tau, est); v != want {
				t.Fatalf("trial %d k %d: cdfGrid %v, CDFAt(%d, %d) %v", trial, k, v, tau, est, want)
			}
		}
	}
}

func TestChainedEndDistHandComputed(t *testing.T) {
	h := h10_50_100(t)
	s := handStart(t) // PMF .2, .3, .5 at 0, 50, 100
	// Runtime on the 50 s grid, x = 200: F(0)=0, F(50)=.4, F(100)=.6,
	// F(150)=.6, F(200)=1 → PMF r = 0, .4, .2, 0, .4.
	// Convolution c = s * r:
	//   c0 = 0
	//   c1 = .2·.4                 = .08
	//   c2 = .2·.2 + .3·.4         = .16
	//   c3 = .3·.2 + .5·.4         = .26
	//   c4 = .2·.4 + .5·.2         = .18
	//   c5 = .3·.4                 = .12
	//   c6 = .5·.4                 = .20
	// Uncapped CDF at 0..300: 0, .08, .24, .5, .68, .8, 1.
	uncapped := []float64{0, 0.08, 0.24, 0.5, 0.68, 0.8, 1}
	e, err := ChainedEndDist(s, h, 200, 400, 50) // slot end past planned start + x
	if err != nil {
		t.Fatal(err)
	}
	if e.Latest != 300 || !sliceNear(e.CDF, uncapped, 1e-15) {
		t.Errorf("uncapped: %+v", e)
	}
	// Slot end 250: the mass .2 past 250 is placed at 250.
	e, _ = ChainedEndDist(s, h, 200, 250, 50)
	if e.Latest != 250 || !sliceNear(e.CDF, []float64{0, 0.08, 0.24, 0.5, 0.68, 1}, 1e-15) {
		t.Errorf("capped at 250: %+v", e)
	}
	// The probability of ending strictly before the cap is the uncapped CDF
	// one bin earlier: .68; and ExecProb at 250 (.8) equals the uncapped
	// CDF at 250 since all times are on the grid.
	if got := ExecProb(s, h, 200, 250); !near(got, uncapped[5], 1e-15) {
		t.Errorf("ExecProb %v, uncapped CDF(250) %v", got, uncapped[5])
	}
	// Regridding: the same start read on a 25 s grid still yields a valid,
	// capped distribution.
	e, err = ChainedEndDist(s, h, 200, 250, 25)
	if err != nil || e.Validate() != nil || e.Step != 25 || e.Latest != 250 {
		t.Errorf("regrid: %+v %v", e, err)
	}
	// Errors.
	if _, err := ChainedEndDist(s, h, 200, 99, 50); !errors.Is(err, ErrBadWindow) {
		t.Errorf("slot end before planned start: %v", err)
	}
	if _, err := ChainedEndDist(s, h, 0, 300, 50); !errors.Is(err, ErrBadEstimate) {
		t.Error(err)
	}
	if _, err := ChainedEndDist(s, h, 200, 300, 0); !errors.Is(err, ErrBadStep) {
		t.Error(err)
	}
}

// Capping puts exactly the mass beyond the cap at the cap: below the cap the
// capped CDF equals the uncapped one.
func TestChainedCapping(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for trial := range 200 {
		h := randHist(t, r)
		release := r.Int64N(1000)
		planned := release + r.Int64N(3000)
		step := 1 + r.Int64N(40)
		x := 1 + r.Int64N(5000)
		var preds []EndDist
		for range 1 + r.IntN(3) {
			preds = append(preds, randEnd(t, r, randHist(t, r)))
		}
		s, _ := NewStartDist(preds, release, planned, step)
		full, err := ChainedEndDist(s, h, x, planned+x, step)
		if err != nil {
			t.Fatal(err)
		}
		slotEnd := planned + r.Int64N(x+1)
		capped, err := ChainedEndDist(s, h, x, slotEnd, step)
		if err != nil {
			t.Fatal(err)
		}
		m := len(capped.CDF) - 1
		for k := range m {
			if !near(capped.CDF[k], full.CDF[k], 1e-12) {
				t.Fatalf("trial %d: bin %d capped %v uncapped %v", trial, k, capped.CDF[k], full.CDF[k])
			}
		}
		if capped.CDF[m] != 1 || capped.CDFAt(slotEnd) != 1 {
			t.Fatalf("trial %d: no mass at the cap", trial)
		}
		// Mass at the cap = what the uncapped distribution had from there on.
		massAtCap := 1 - capped.CDF[max(m-1, 0)]
		if m == 0 {
			massAtCap = 1
		}
		wantMass := 1 - full.CDFAt(capped.Origin+int64(m-1)*step)
		if m == 0 {
			wantMass = 1
		}
		if !near(massAtCap, wantMass, 1e-12) {
			t.Fatalf("trial %d: mass at cap %v, want %v", trial, massAtCap, wantMass)
		}
	}
}

// With no predecessors and a start at the planned start, the chained end
// distribution agrees with the heuristic up to the grid: the uncapped
// P(end <= slot end) lies between F(l − step) and F(l), and equals F(l) on a
// 1 s grid.
func TestChainedMatchesHeuristicUpToGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for range 300 {
		h := randHist(t, r)
		start := r.Int64N(10000)
		x := 1 + r.Int64N(4000)
		l := r.Int64N(x)
		for _, step := range []int64{1, 1 + r.Int64N(50)} {
			s, _ := NewStartDist(nil, start, start, step)
			full, err := ChainedEndDist(s, h, x, start+x, step)
			if err != nil {
				t.Fatal(err)
			}
			got := full.CDFAt(start + l)
			hi, lo := h.CDFAt(l, x), h.CDFAt(l-step, x)
			if step == 1 && got != hi {
				t.Fatalf("1 s grid: chained %v, heuristic %v", got, hi)
			}
			if got > hi+1e-12 || got < lo-1e-12 {
				t.Fatalf("step %d: chained %v outside [%v, %v]", step, got, lo, hi)
			}
		}
	}
}

func TestGiven(t *testing.T) {
	d := EndDist{Origin: 0, Step: 50, Latest: 200, CDF: []float64{0, 0.4, 0.6, 0.6, 1}}
	// Given(60): the bin at 50 has CDF .4; P(E <= t | E > 60) = (F(t) − .4)/.6
	// on the grid from 50: 0, (.6−.4)/.6 = 1/3, 1/3, 1.
	g := d.Given(60)
	if g.Origin != 50 || !sliceNear(g.CDF, []float64{0, 1.0 / 3, 1.0 / 3, 1}, 1e-15) || g.Validate() != nil {
		t.Errorf("Given(60) = %+v", g)
	}
	if g := d.Given(175); g.Origin != 150 || !sliceNear(g.CDF, []float64{0, 1}, 0) {
		t.Errorf("Given(175) = %+v", g)
	}
	if g := d.Given(-5); g.Origin != d.Origin || len(g.CDF) != len(d.CDF) {
		t.Errorf("Given before origin changed the distribution")
	}
	if g := d.Given(200); g.CDFAt(199) != 0 || g.CDFAt(200) != 1 {
		t.Errorf("Given(latest) = %+v", g)
	}
	sure := EndDist{Origin: 0, Step: 10, Latest: 30, CDF: []float64{1, 1, 1, 1}}
	if g := sure.Given(5); g.CDFAt(29) != 0 || g.CDFAt(30) != 1 {
		t.Errorf("Given on a sure end: %+v", g)
	}
}
