package overbook

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randPMF(r *rand.Rand, n int) []float64 {
	p := make([]float64, n)
	var s float64
	for i := range p {
		p[i] = r.Float64()
		if r.IntN(4) == 0 {
			p[i] = 0
		}
		s += p[i]
	}
	if s == 0 {
		p[0], s = 1, 1
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// The direct and the FFT convolution agree to 1e-9 (in fact to ~1e-16).
func TestConvolveDirectEqualsFFT(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	sizes := []int{1, 2, 3, 15, 16, 17, 100, 127, 128, 129, 500, 1025, 3000}
	for _, la := range sizes {
		for _, lb := range sizes {
			a, b := randPMF(r, la), randPMF(r, lb)
			for _, lo := range []int{la + lb - 1, (la + lb) / 2, 1} {
				d1 := make([]float64, lo)
				d2 := make([]float64, lo)
				convolveDirect(d1, a, b)
				aa, bb := a, b
				if len(aa) > lo {
					aa = aa[:lo]
				}
				if len(bb) > lo {
					bb = bb[:lo]
				}
				convolveFFT(d2, aa, bb)
				if !sliceNear(d1, d2, 1e-9) {
					t.Fatalf("la %d lb %d out %d: direct and FFT differ", la, lb, lo)
				}
				d3 := make([]float64, lo)
				convolve(d3, a, b)
				if !sliceNear(d1, d3, 1e-9) {
					t.Fatalf("la %d lb %d out %d: convolve differs", la, lb, lo)
				}
			}
		}
	}
	// Full convolutions of PMFs sum to 1.
	a, b := randPMF(r, 700), randPMF(r, 900)
	d := make([]float64, len(a)+len(b)-1)
	convolveFFT(d, a, b)
	var s float64
	for _, v := range d {
		s += v
	}
	if !near(s, 1, 1e-12) {
		t.Fatalf("FFT convolution sums to %v", s)
	}
}

// ChainedEndDist agrees whichever convolution path it takes.
func TestChainedEndDistPathsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	h := randHist(t, r)
	var preds []EndDist
	for range 3 {
		d, err := ReservationDist(randHist(t, r), r.Int64N(20000), 30000, 40000, 40)
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, d)
	}
	s, err := NewStartDist(preds, 0, 40000, 40) // 1001 bins
	if err != nil {
		t.Fatal(err)
	}
	run := func(ratio float64) EndDist {
		r0 := fftCostRatio
		fftCostRatio = ratio
		defer func() { fftCostRatio = r0 }()
		e, err := ChainedEndDist(s, h, 20000, 55000, 40)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	direct := run(math.Inf(1))
	fft := run(0)
	if !sliceNear(direct.CDF, fft.CDF, 1e-9) || direct.Latest != fft.Latest {
		t.Fatal("direct and FFT chained distributions differ")
	}
	if err := fft.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDirectWork(t *testing.T) {
	for _, tc := range [][3]int{{1, 1, 1}, {3, 4, 6}, {3, 4, 4}, {5, 5, 9}, {5, 5, 3}, {10, 2, 7}, {2, 10, 7}, {7, 7, 7}} {
		la, lb, l := tc[0], tc[1], tc[2]
		la, lb = min(la, l), min(lb, l)
		want := 0
		for k := range la {
			want += min(lb, l-k)
		}
		if got := directWork(la, lb, l); got != float64(want) {
			t.Errorf("directWork(%d, %d, %d) = %v, want %d", la, lb, l, got, want)
		}
	}
}

// BenchmarkConvolve chooses the crossover: compare direct/n and fft/n.
func BenchmarkConvolve(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{16, 64, 128, 192, 256, 320, 384, 448, 512, 1024} {
		x, y := randPMF(r, n), randPMF(r, n)
		dst := make([]float64, 2*n-1)
		b.Run(fmt.Sprintf("direct/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				convolveDirect(dst, x, y)
			}
		})
		b.Run(fmt.Sprintf("fft/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				convolveFFT(dst, x, y)
			}
		})
	}
}
