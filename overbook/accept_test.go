package overbook

import (
	"math"
	"testing"
)

func TestThreshold(t *testing.T) {
	tests := []struct {
		pof, max float64
		want     bool
	}{
		{0.1, 0.13, true},
		{0.13, 0.13, false}, // strict: PoF < PoF_max
		{0.2, 0.13, false},
		{0, 0.05, true},
		{0, 0, false},
		{0.99, 1, true},
		{math.NaN(), 1, false},
	}
	for _, tc := range tests {
		if got := (Threshold{PoFMax: tc.max}).Accept(tc.pof, 123, 456); got != tc.want {
			t.Errorf("Threshold{%v}.Accept(%v) = %v", tc.max, tc.pof, got)
		}
	}
}

func TestRiskHandComputed(t *testing.T) {
	tests := []struct {
		pof, fee, pen, sf float64
		want              bool
		calc              string
	}{
		{0.25, 100, 100, 2, true, "0.75·100 = 75 > 0.25·100·2 = 50"},
		{0.4, 100, 100, 2, false, "0.6·100 = 60 > 0.4·100·2 = 80 is false"},
		{0.5, 100, 100, 1, false, "50 > 50 is false (Algorithm 3.1 at zero profit)"},
		{0.1, 10, 40, 4, false, "0.9·10 = 9 > 0.1·40·4 = 16 is false"},
		{0.05, 10, 40, 4, true, "0.95·10 = 9.5 > 0.05·40·4 = 8"},
		{0, 0, 100, 2, false, "no fee, no opportunity: 0 > 0 is false"},
		{math.NaN(), 100, 100, 2, false, "NaN PoF rejected"},
	}
	for _, tc := range tests {
		if got := (Risk{SecurityFactor: tc.sf}).Accept(tc.pof, tc.fee, tc.pen); got != tc.want {
			t.Errorf("Risk{%v}.Accept(%v, %v, %v) = %v (%s)", tc.sf, tc.pof, tc.fee, tc.pen, got, tc.calc)
		}
	}
}

// The digest's table (§2.6 [note]): with penalty = ratio·fee the risk test
// is PoF < 1/(1 + ratio·SF).
func TestRiskEquivalentThresholdTable(t *testing.T) {
	table := []struct {
		sf    float64
		ratio float64
		want  float64 // as printed in the digest
	}{
		{DefaultSFHeuristic, 0.5, 0.50}, {DefaultSFHeuristic, 1, 0.333}, {DefaultSFHeuristic, 2, 0.20}, {DefaultSFHeuristic, 4, 0.111},
		{DefaultSFComprehensive, 0.5, 0.333}, {DefaultSFComprehensive, 1, 0.20}, {DefaultSFComprehensive, 2, 0.111}, {DefaultSFComprehensive, 4, 0.0588},
	}
	for _, row := range table {
		thr := RiskThreshold(row.ratio, row.sf)
		if math.Abs(thr-row.want) > 0.0005 {
			t.Errorf("SF %v ratio %v: threshold %v, digest %v", row.sf, row.ratio, thr, row.want)
		}
		risk := Risk{SecurityFactor: row.sf}
		thresh := Threshold{PoFMax: thr}
		for _, fee := range []float64{1, 37.5, 1e6} {
			for i := 0; i <= 1000; i++ {
				pof := float64(i) / 1000
				if math.Abs(pof-thr) < 1e-9 {
					continue // at the boundary both reject up to rounding
				}
				if a, b := risk.Accept(pof, fee, row.ratio*fee), thresh.Accept(pof, 0, 0); a != b {
					t.Fatalf("SF %v ratio %v fee %v PoF %v: risk %v threshold %v", row.sf, row.ratio, fee, pof, a, b)
				}
			}
		}
	}
}

// The worked example of the 2008 paper (source 001, §3.1.4), in minutes as
// the paper computes it. The plan is full from 7:00 to 3:00 the next day
// ([7–12, 12–17, 17–21, 21–3]); a job j of d = 5 h is to go into the free
// gap [3:00, 7:00] of 4 h. With maxPoF = 13 %:
//
//	d' = d/(1 + maxPoF) = 300/1.13 = 265.49 ≈ 266 min (4:26)
//	o  = d − d' = 300 − 266 = 34 min
//
// Unmodified: 3:00 + 5:00 = 8:00 > 7:00, rejected. Overbooking j alone:
// 3:00 + 4:26 = 7:26 > 7:00, still infeasible. Overbooking the predecessor
// [21–3] by 34 min as well lets j start at 2:26 and end at 6:52 <= 7:00:
// accepted, with d' = 4:26 and earliest start 2:26.
func TestUniformOverbookingWorkedExample(t *testing.T) {
	const (
		d        = 300      // minutes
		maxPoF   = 0.13     // 13 %
		gapStart = 3 * 60   // 3:00
		gapEnd   = 7 * 60   // 7:00
		predEnd  = gapStart // the reservation [21:00, 3:00] ends at the gap start
	)
	dPrime := UniformOverbookedLength(d, maxPoF)
	o := UniformOverbookable(d, maxPoF)
	if dPrime != 266 || o != 34 {
		t.Fatalf("d' = %d, o = %d; the paper has 266 (4:26) and 34", dPrime, o)
	}
	if gapStart+d <= gapEnd {
		t.Fatal("the unmodified job must not fit (3:00 + 5 h = 8:00 > 7:00)")
	}
	if end := gapStart + dPrime; end <= gapEnd || end != 7*60+26 {
		t.Fatalf("overbooking j alone ends at %d min, the paper has 7:26 > 7:00", end)
	}
	start := predEnd - o // the predecessor is overbooked by o as well
	end := start + dPrime
	if start != 2*60+26 || end != 6*60+52 || end > gapEnd {
		t.Fatalf("with the predecessor overbooked: [%d, %d] min, the paper has [2:26, 6:52] within 7:00", start, end)
	}

	// The same rule in seconds (no rounding to minutes): 18000/1.13 =
	// 15929.2 s, rounded up to 15930 s; o = 2070 s (34.5 min).
	if got := UniformOverbookedLength(5*3600, maxPoF); got != 15930 {
		t.Errorf("seconds: d' = %d, want 15930", got)
	}
	// Exact quotients are not bumped up by floating-point error.
	for _, tc := range []struct {
		d    int64
		p    float64
		want int64
	}{{300, 0.2, 250}, {120, 0.5, 80}, {100, 1, 50}, {7, 0, 7}, {7, -0.5, 7}, {0, 0.1, 0}, {-3, 0.1, -3}, {1, 0.13, 1}, {math.MaxInt64, 1e-18, math.MaxInt64}} {
		if got := UniformOverbookedLength(tc.d, tc.p); got != tc.want {
			t.Errorf("UniformOverbookedLength(%d, %v) = %d, want %d", tc.d, tc.p, got, tc.want)
		}
	}
}
