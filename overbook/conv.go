package overbook

import (
	"math/bits"
	"sync"

	"gonum.org/v1/gonum/dsp/fourier"
)

// fftCostRatio is the crossover between direct and FFT convolution, as a
// cost model: the FFT path is taken iff the direct path's multiply-adds W
// (after truncation to the output length) exceed fftCostRatio·N·log2(N),
// N being the FFT size. Chosen with BenchmarkConvolve on the development
// machine (2-core AMD EPYC, shared and noisy): the direct loop costs about
// 0.3–0.45 ns per multiply-add and the three pooled real FFTs of size N
// about 4.5 ns·N·log2(N) (45 µs at N = 1024, 92 µs at N = 2048), a ratio
// of about 12. So square inputs switch to FFT between 320 and 384 bins
// (W ≈ 128k at N = 1024) and never below 256 bins (N <= 512), and the
// typical chained case (~900 start bins × ~500 runtime bins, N = 2048) uses
// the FFT, about 2–3× faster than direct.
var fftCostRatio = 12.0

// directWork is the number of multiply-adds of the direct convolution of
// lengths la and lb truncated to l outputs (la, lb <= l).
func directWork(la, lb, l int) float64 {
	// Rows k < k1 contribute lb each; rows k >= k1 contribute l − k.
	k1 := min(max(l-lb+1, 0), la)
	w := float64(k1) * float64(lb)
	n := float64(la - k1)
	w += n*float64(l) - (float64(k1)+float64(la-1))*n/2
	return w
}

// convolve sets dst[i] = Σ_k a[k]·b[i−k] for 0 <= i < len(dst) (the linear
// convolution truncated to len(dst)), directly or by FFT (see fftCostRatio).
func convolve(dst, a, b []float64) {
	if len(a) > len(dst) {
		a = a[:len(dst)]
	}
	if len(b) > len(dst) {
		b = b[:len(dst)]
	}
	if len(a) == 0 || len(b) == 0 {
		clear(dst)
		return
	}
	e := bits.Len(uint(len(a) + len(b) - 2))
	n := float64(int(1) << e)
	if directWork(len(a), len(b), len(dst)) <= fftCostRatio*n*float64(e) {
		convolveDirect(dst, a, b)
		return
	}
	convolveFFT(dst, a, b)
}

// convolveDirect is the O(len(a)·len(b)) truncated convolution.
func convolveDirect(dst, a, b []float64) {
	clear(dst)
	if len(a) > len(b) {
		a, b = b, a // the outer loop runs over the shorter input
	}
	for k, ak := range a {
		if k >= len(dst) {
			break
		}
		if ak == 0 {
			continue
		}
		d := dst[k:]
		bb := b
		if len(bb) > len(d) {
			bb = bb[:len(d)]
		}
		d = d[:len(bb)]
		for j, bj := range bb {
			d[j] += ak * bj
		}
	}
}

// fftWork is the reusable state of one FFT size.
type fftWork struct {
	fft    *fourier.FFT
	x, y   []float64
	cx, cy []complex128
}

// fftPools[e] holds fftWork of size 1<<e.
var fftPools [40]sync.Pool

// convolveFFT is the truncated linear convolution via a real FFT of the
// next power of two >= len(a)+len(b)−1 (zero padding makes the circular
// convolution linear).
func convolveFFT(dst, a, b []float64) {
	if len(a) == 0 || len(b) == 0 {
		clear(dst)
		return
	}
	need := len(a) + len(b) - 1
	e := bits.Len(uint(need - 1))
	n := 1 << e
	w, _ := fftPools[e].Get().(*fftWork)
	if w == nil {
		w = &fftWork{
			fft: fourier.NewFFT(n),
			x:   make([]float64, n),
			y:   make([]float64, n),
			cx:  make([]complex128, n/2+1),
			cy:  make([]complex128, n/2+1),
		}
	}
	copy(w.x, a)
	clear(w.x[len(a):])
	copy(w.y, b)
	clear(w.y[len(b):])
	w.fft.Coefficients(w.cx, w.x)
	w.fft.Coefficients(w.cy, w.y)
	for i := range w.cx {
		w.cx[i] *= w.cy[i]
	}
	w.fft.Sequence(w.x, w.cx)
	inv := 1 / float64(n)
	m := min(len(dst), need)
	for i := range m {
		dst[i] = w.x[i] * inv
	}
	clear(dst[m:])
	fftPools[e].Put(w)
}
