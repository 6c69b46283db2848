package overbook

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// histOf builds a histogram with the given number of samples in each bin
// (samples are ratios bin/100 against an estimate of 100 s).
func histOf(t testing.TB, counts map[int]int) *Histogram {
	t.Helper()
	h := new(Histogram)
	for bin, n := range counts {
		for range n {
			if err := h.Add(int64(bin), 100); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

// h10_50_100 is the histogram used by the hand computations throughout the
// tests: 2 samples in bin 10, 1 in bin 50, 2 in bin 100 (N = 5), so
//
//	CDF(i) = 0 for i < 10, 0.4 for 10 <= i < 50, 0.6 for 50 <= i < 100, 1 at 100.
func h10_50_100(t testing.TB) *Histogram {
	return histOf(t, map[int]int{10: 2, 50: 1, 100: 2})
}

func TestRatioBin(t *testing.T) {
	tests := []struct {
		actual, estimate int64
		want             int
		why              string
	}{
		{0, 100, 0, "0/100 = 0 %"},
		{99, 100, 99, "99 %"},
		{100, 100, 100, "exactly the estimate"},
		{150, 100, 100, "150 % clamped into bin 100"},
		{1, 3, 33, "floor(33.3) = 33"},
		{2, 3, 66, "floor(66.7) = 66, not rounded to 67"},
		{1799, 3600, 49, "floor(49.97) = 49"},
		{1800, 3600, 50, "50 %"},
		{-5, 100, 0, "negative actual in bin 0"},
		{5, 0, 100, "non-positive estimate in bin 100"},
		{math.MaxInt64 - 1, math.MaxInt64, 99, "100·(2^63−2)/(2^63−1) = 99.99…: no overflow"},
		{math.MaxInt64 / 2, math.MaxInt64, 49, "49.99…"},
	}
	for _, tc := range tests {
		if got := RatioBin(tc.actual, tc.estimate); got != tc.want {
			t.Errorf("RatioBin(%d, %d) = %d, want %d (%s)", tc.actual, tc.estimate, got, tc.want, tc.why)
		}
	}
}

func TestHistogramHandComputed(t *testing.T) {
	h := new(Histogram)
	// Estimate 100: actuals 10, 10, 50, 100, 200 → bins 10, 10, 50, 100, 100.
	for _, a := range []int64{10, 10, 50, 100, 200} {
		if err := h.Add(a, 100); err != nil {
			t.Fatal(err)
		}
	}
	eq := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-15 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	eq("N", h.N(), 5)
	eq("PDF(10)", h.PDF(10), 2.0/5)
	eq("PDF(50)", h.PDF(50), 1.0/5)
	eq("PDF(100)", h.PDF(100), 2.0/5)
	eq("PDF(11)", h.PDF(11), 0)
	eq("PDF(-1)", h.PDF(-1), 0)
	eq("PDF(101)", h.PDF(101), 0)
	eq("CDF(-1)", h.CDF(-1), 0)
	eq("CDF(9)", h.CDF(9), 0)
	eq("CDF(10)", h.CDF(10), 0.4)
	eq("CDF(49)", h.CDF(49), 0.4)
	eq("CDF(50)", h.CDF(50), 0.6)
	eq("CDF(99)", h.CDF(99), 0.6)
	eq("CDF(100)", h.CDF(100), 1)
	eq("CDF(500)", h.CDF(500), 1)
	// CDFAt(got, x) = CDF(floor(100·got/x)).
	eq("CDFAt(50,100)", h.CDFAt(50, 100), 0.6)
	eq("CDFAt(49,100)", h.CDFAt(49, 100), 0.4)
	eq("CDFAt(1800,3600)", h.CDFAt(1800, 3600), 0.6) // bin 50
	eq("CDFAt(1799,3600)", h.CDFAt(1799, 3600), 0.4) // bin 49
	eq("CDFAt(3599,3600)", h.CDFAt(3599, 3600), 0.6) // bin 99
	eq("CDFAt(3600,3600)", h.CDFAt(3600, 3600), 1)   // got >= estimate: exactly 1
	eq("CDFAt(9999,3600)", h.CDFAt(9999, 3600), 1)
	eq("CDFAt(0,3600)", h.CDFAt(0, 3600), 0)
	eq("CDFAt(-1,3600)", h.CDFAt(-1, 3600), 0)

	// Ageing: halve, then add one sample in bin 0.
	// Weights: bin 0: 1, bin 10: 1, bin 50: 0.5, bin 100: 1 → N = 3.5.
	if err := h.Age(0.5); err != nil {
		t.Fatal(err)
	}
	if err := h.Add(0, 100); err != nil {
		t.Fatal(err)
	}
	eq("aged N", h.N(), 3.5)
	eq("aged PDF(0)", h.PDF(0), 1/3.5)
	eq("aged CDF(10)", h.CDF(10), 2/3.5)
	eq("aged CDF(50)", h.CDF(50), 2.5/3.5)
	eq("aged Weight(50)", h.Weight(50), 0.5)
}

func TestHistogramErrors(t *testing.T) {
	h := new(Histogram)
	for _, s := range [][2]int64{{-1, 100}, {10, 0}, {10, -5}} {
		if err := h.Add(s[0], s[1]); !errors.Is(err, ErrBadSample) {
			t.Errorf("Add(%d, %d) = %v, want ErrBadSample", s[0], s[1], err)
		}
	}
	if h.N() != 0 {
		t.Errorf("bad samples were recorded: N = %v", h.N())
	}
	for _, f := range []float64{0, -1, 1.5, math.NaN(), math.Inf(1)} {
		if err := h.Age(f); !errors.Is(err, ErrBadFactor) {
			t.Errorf("Age(%v) = %v, want ErrBadFactor", f, err)
		}
	}
	if err := h.Age(1); err != nil {
		t.Errorf("Age(1) = %v", err)
	}
}

// An empty or nil histogram is the prior "every job uses its full estimate".
func TestHistogramEmptyPrior(t *testing.T) {
	for name, h := range map[string]*Histogram{"empty": new(Histogram), "nil": nil} {
		if h.N() != 0 || h.PDF(100) != 1 || h.PDF(0) != 0 || h.CDF(99) != 0 || h.CDF(100) != 1 {
			t.Errorf("%s: N %v PDF(100) %v PDF(0) %v CDF(99) %v CDF(100) %v", name, h.N(), h.PDF(100), h.PDF(0), h.CDF(99), h.CDF(100))
		}
		if h.CDFAt(3599, 3600) != 0 || h.CDFAt(3600, 3600) != 1 {
			t.Errorf("%s: CDFAt wrong", name)
		}
	}
}

func TestHistogramProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		h := new(Histogram)
		n := 1 + r.IntN(300)
		for range n {
			est := 1 + r.Int64N(100000)
			act := r.Int64N(2 * est)
			if err := h.Add(act, est); err != nil {
				t.Fatal(err)
			}
			if r.IntN(50) == 0 {
				if err := h.Age(0.5 + r.Float64()/2); err != nil {
					t.Fatal(err)
				}
			}
		}
		prev, sum := 0.0, 0.0
		for i := -1; i <= NumBins; i++ {
			c := h.CDF(i)
			if c < prev || c < 0 || c > 1 {
				t.Fatalf("trial %d: CDF(%d) = %v after %v", trial, i, c, prev)
			}
			prev = c
			sum += h.PDF(i)
		}
		if h.CDF(100) != 1 || math.Abs(sum-1) > 1e-12 {
			t.Fatalf("trial %d: CDF(100) = %v, ΣPDF = %v", trial, h.CDF(100), sum)
		}
		// CDFAt is monotone in got for a fixed estimate.
		est := 1 + r.Int64N(100000)
		prev = 0
		for got := int64(-10); got <= est+10; got += 1 + est/997 {
			c := h.CDFAt(got, est)
			if c < prev {
				t.Fatalf("trial %d: CDFAt not monotone at %d", trial, got)
			}
			prev = c
		}
	}
}

func TestHistogramJSONRoundTrip(t *testing.T) {
	h := h10_50_100(t)
	_ = h.Age(0.3)
	_ = h.Add(7, 9)
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var g Histogram
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if !g.Equal(h) || g.CDF(50) != h.CDF(50) || g.N() != h.N() {
		t.Errorf("round trip differs: %s", b)
	}
	bad := []string{`null`, `[]`, `[1,2]`, `{}`, `"x"`, `[` + repeat("1,", 100) + `-1]`, `[` + repeat("1e308,", 100) + `1e308]`}
	for _, s := range bad {
		g := *h
		if err := json.Unmarshal([]byte(s), &g); err == nil || (!errors.Is(err, ErrCorrupt) && s != `null`) {
			t.Errorf("Unmarshal(%.40s) = %v, want ErrCorrupt", s, err)
		}
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// A clone is prepared and may be read concurrently (run with -race).
func TestHistogramCloneConcurrentReads(t *testing.T) {
	h := h10_50_100(t).Clone()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				_ = h.CDFAt(int64(i+g), 1000)
				_ = h.PDF(i % NumBins)
				_ = h.N()
			}
		}()
	}
	wg.Wait()
}
