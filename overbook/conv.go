package overbook

import (
	"math/bits"
	"sync"

	"gonum.org/v1/gonum/dsp/fourier"
)

// directMaxWork is the crossover between direct and FFT convolution: inputs
// with la·lb <= directMaxWork (after truncation to the output length), or
// with a side shorter than directMinSide, are convolved directly. Chosen by
// BenchmarkConvolve (see the package tests): on the development machine the
// direct loop costs about 0.9 ns per multiply-add and the pooled real FFT of
// size n about 6·n·log2(n) ns for the three transforms; they meet near
// 128×128 inputs.
var (
	directMaxWork = 128 * 128
	directMinSide = 16
)

// convolve sets dst[i] = Σ_k a[k]·b[i−k] for 0 <= i < len(dst) (the linear
// convolution truncated to len(dst)).
func convolve(dst, a, b []float64) {
	if len(a) > len(dst) {
		a = a[:len(dst)]
	}
	if len(b) > len(dst) {
		b = b[:len(dst)]
	}
	if len(a)*len(b) <= directMaxWork || min(len(a), len(b)) < directMinSide {
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
