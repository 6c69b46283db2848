package overbook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
)

// NumBins is the number of bins of a Histogram: integer percentages 0..100
// of the ratio actual/estimated runtime.
const NumBins = 101

// RatioBin is the histogram bin of a job that ran actual seconds against an
// estimate of estimate seconds: floor(100·actual/estimate), capped at 100.
// Bin i therefore holds ratios in [i %, (i+1) %) for i < 100, and bin 100
// holds every ratio >= 100 % (the job used its full estimate, or would have
// run longer and was killed at it). The thesis does not specify the rounding;
// this package uses floor everywhere. A negative actual maps to bin 0 and a
// non-positive estimate to bin 100. The arithmetic is exact integer
// arithmetic (no overflow for any int64 input).
func RatioBin(actual, estimate int64) int {
	if actual >= estimate {
		return NumBins - 1
	}
	if actual <= 0 {
		return 0
	}
	// 0 < actual < estimate.
	if actual <= math.MaxInt64/100 {
		return int(actual * 100 / estimate)
	}
	hi, lo := bits.Mul64(uint64(actual), 100)
	q, _ := bits.Div64(hi, lo, uint64(estimate)) // hi < estimate since actual < estimate
	return int(q)
}

// Histogram is the empirical distribution of the ratio actual/estimated
// runtime in NumBins integer-percent bins (see RatioBin). Counts are float64
// weights so that old samples can be aged (Age).
//
// The zero value is an empty histogram, ready to use. An empty (or nil)
// histogram is read as the conservative prior "every job uses its full
// estimate": all mass in bin 100, so CDF(i) = 0 for i < 100 and overbooking
// is never judged safe.
//
// Concurrency: the cumulative array is computed lazily by the first read
// after a change, so a Histogram is not safe for concurrent use while it is
// being changed or before it has been read once. Clone returns a prepared
// copy that any number of goroutines may read; Stats.Histogram returns such
// copies.
//
// Right-censored samples (AddCensored: a job stopped after some time before
// it ended by itself, so it needed more) enter the distribution through the
// Kaplan-Meier estimator over the bins: a job cut in bin b is taken to need
// a bin above b; it counts among the jobs still running up to bin b and no
// further, and the probability it leaves is shared among the bins above b in
// proportion to the mass there (Efron's redistribution to the right). With
// no censored samples the estimate is exactly the empirical CDF.
type Histogram struct {
	w     [NumBins]float64 // weights of jobs whose ratio bin is known
	c     [NumBins]float64 // weights of jobs cut in bin i (their bin is above i)
	cdf   [NumBins]float64 // normalised cumulative weights, valid iff ready
	n     float64          // total weight, valid iff ready
	ready bool
}

// Add records one finished job that ran actual seconds against an estimate
// of estimate seconds, with weight 1. It returns ErrBadSample (and records
// nothing) when estimate <= 0 or actual < 0.
func (h *Histogram) Add(actual, estimate int64) error {
	if estimate <= 0 || actual < 0 {
		return fmt.Errorf("%w: actual %d, estimate %d", ErrBadSample, actual, estimate)
	}
	h.w[RatioBin(actual, estimate)]++
	h.ready = false
	return nil
}

// AddCensored records one job, with weight 1, that ran ran seconds against
// an estimate of estimate seconds and was stopped before it ended by itself
// (cut at the end of an overbooked reservation, cancelled while running):
// it would have needed more than ran. A job cut in bin 99 or later would
// have needed at least its estimate and is recorded in bin 100, like Add. It
// returns ErrBadSample (and records nothing) when estimate <= 0 or ran < 0.
func (h *Histogram) AddCensored(ran, estimate int64) error {
	if estimate <= 0 || ran < 0 {
		return fmt.Errorf("%w: censored at %d, estimate %d", ErrBadSample, ran, estimate)
	}
	if b := RatioBin(ran, estimate); b < NumBins-2 {
		h.c[b]++
	} else {
		h.w[NumBins-1]++
	}
	h.ready = false
	return nil
}

// AddRatio records one sample of the ratio actual/estimate itself, with
// weight 1, into the bin RatioBin would give it: floor(100·ratio) for a
// ratio in [0, 1), bin 100 for every ratio >= 1 (clipped: the job would use
// its full estimate), bin 0 for a negative ratio. It serves distributions
// that come as ratio samples rather than runtimes (forecast errors). It
// returns ErrBadSample (and records nothing) for NaN. The ratio is first
// rounded to a multiple of 1e-9, so that a decimal ratio such as 0.29 lands
// in its bin (29) although 100·0.29 is 28.999… in binary floating point.
func (h *Histogram) AddRatio(ratio float64) error {
	if math.IsNaN(ratio) {
		return fmt.Errorf("%w: ratio NaN", ErrBadSample)
	}
	bin := NumBins - 1
	if ratio < 1 {
		nano := int64(math.Round(max(ratio, 0) * 1e9)) // in [0, 1e9]
		bin = min(NumBins-2, int(nano/10_000_000))     // just below 1 stays in bin 99
	}
	h.w[bin]++
	h.ready = false
	return nil
}

// Age multiplies every weight by factor, which must be in (0, 1]; it is the
// exponential ageing of old samples (a later Add counts 1/factor times as
// much as the samples present now). It returns ErrBadFactor otherwise.
func (h *Histogram) Age(factor float64) error {
	if !(factor > 0 && factor <= 1) {
		return fmt.Errorf("%w: %v", ErrBadFactor, factor)
	}
	if factor == 1 {
		return nil
	}
	for i := range h.w {
		h.w[i] *= factor
		h.c[i] *= factor
	}
	h.ready = false
	return nil
}

// prepare recomputes the cumulative array if a change made it stale.
func (h *Histogram) prepare() {
	if h.ready {
		return
	}
	var s, cens float64
	for i, w := range h.w {
		s += w
		h.cdf[i] = s
		cens += h.c[i]
	}
	h.n = s + cens
	switch {
	case cens > 0:
		h.kaplanMeier()
	case s > 0:
		for i := range h.cdf {
			h.cdf[i] /= s
		}
	default:
		clear(h.cdf[:])
	}
	h.cdf[NumBins-1] = 1 // exact, also for the empty prior
	h.ready = true
}

// kaplanMeier fills cdf with 1 − S, S the product-limit survival over the
// bins: at bin i, of the weight r still at risk (every job whose bin, known
// or censored, is i or above), the share w[i]/r ends there; jobs cut in bin
// i leave the risk set after it. Mass left when the bins run out (the
// longest samples are censored) is bin 100's.
func (h *Histogram) kaplanMeier() {
	r, surv := h.n, 1.0
	for i := 0; i < NumBins-1; i++ {
		if r > 0 {
			surv *= max(0, 1-h.w[i]/r)
		}
		h.cdf[i] = 1 - surv
		r -= h.w[i] + h.c[i]
		if r < 1e-12*h.n {
			r = 0
		}
	}
}

// N is the total (aged) weight of the samples, censored ones included: the
// number of samples when no ageing has happened. It is 0 for a nil or empty
// histogram.
func (h *Histogram) N() float64 {
	if h == nil {
		return 0
	}
	h.prepare()
	return h.n
}

// Weight is the raw (aged) weight of the samples known to be in bin i; 0
// outside 0..100.
func (h *Histogram) Weight(i int) float64 {
	if h == nil || i < 0 || i >= NumBins {
		return 0
	}
	return h.w[i]
}

// CensoredWeight is the raw (aged) weight of the samples cut in bin i
// (AddCensored); 0 outside 0..100.
func (h *Histogram) CensoredWeight(i int) float64 {
	if h == nil || i < 0 || i >= NumBins {
		return 0
	}
	return h.c[i]
}

// PDF is the probability of bin i: Weight(i)/N without censored samples,
// CDF(i) − CDF(i−1) in general. Outside 0..100 it is 0. For an empty
// histogram it is the prior: 1 for bin 100, else 0.
func (h *Histogram) PDF(i int) float64 {
	if i < 0 || i >= NumBins {
		return 0
	}
	if h.N() == 0 {
		if i == NumBins-1 {
			return 1
		}
		return 0
	}
	if h.c != ([NumBins]float64{}) {
		return h.CDF(i) - h.CDF(i-1)
	}
	return h.w[i] / h.n
}

// CDF is the probability that the ratio bin is <= i: the sum of PDF(0..i).
// It is 0 for i < 0 and exactly 1 for i >= 100.
func (h *Histogram) CDF(i int) float64 {
	if i < 0 {
		return 0
	}
	if i >= NumBins-1 {
		return 1
	}
	if h == nil {
		return 0
	}
	h.prepare()
	return h.cdf[i]
}

// CDFAt is P(actual <= got) for a job with this runtime-ratio distribution
// and the given estimate: CDF(floor(100·got/estimate)). It is exactly 1 when
// got >= estimate (a job given its full estimate never fails by the
// provider's fault) and 0 when got < 0. O(1).
//
// Evaluating the CDF at the bin that contains got counts that whole bin as
// finished, so the result overstates the true P(actual <= got) by at most
// the mass of one bin; this is the thesis's formula and is kept as is.
func (h *Histogram) CDFAt(got, estimate int64) float64 {
	if got >= estimate {
		return 1
	}
	if got < 0 || h == nil {
		return 0
	}
	h.prepare()
	return h.cdf[RatioBin(got, estimate)]
}

// Clone returns a deep copy whose cumulative array is already computed, so
// the copy may be read by many goroutines at once (as long as nobody calls
// Add or Age on it). A nil receiver clones to an empty histogram.
func (h *Histogram) Clone() *Histogram {
	c := new(Histogram)
	if h != nil {
		c.w, c.c = h.w, h.c
	}
	c.prepare()
	return c
}

// Equal reports whether two histograms hold bit-identical weights, known
// and censored.
func (h *Histogram) Equal(o *Histogram) bool {
	var a, b, ac, bc [NumBins]float64
	if h != nil {
		a, ac = h.w, h.c
	}
	if o != nil {
		b, bc = o.w, o.c
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) || math.Float64bits(ac[i]) != math.Float64bits(bc[i]) {
			return false
		}
	}
	return true
}

// censoredJSON is the encoding of a histogram with censored samples; one
// without is a plain array of its NumBins weights (the original format, which
// UnmarshalJSON still reads).
type censoredJSON struct {
	Known    []float64 `json:"known"`
	Censored []float64 `json:"censored"`
}

// MarshalJSON encodes the histogram as a JSON array of its NumBins weights,
// or, if it holds censored samples, as {"known": [...], "censored": [...]}.
// Finite float64 values round-trip exactly through encoding/json.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	if h.c == ([NumBins]float64{}) {
		return json.Marshal(h.w[:])
	}
	return json.Marshal(censoredJSON{Known: h.w[:], Censored: h.c[:]})
}

// UnmarshalJSON decodes what MarshalJSON produced. Anything else (a wrong
// number of bins, a negative or non-finite weight, a total that overflows,
// unknown fields) returns an error wrapping ErrCorrupt and leaves h
// unchanged.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return fmt.Errorf("%w: null histogram", ErrCorrupt)
	}
	var in censoredJSON
	if len(b) > 0 && b[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return fmt.Errorf("%w: histogram: %v", ErrCorrupt, err)
		}
	} else if err := json.Unmarshal(b, &in.Known); err != nil {
		return fmt.Errorf("%w: histogram: %v", ErrCorrupt, err)
	}
	if in.Censored == nil {
		in.Censored = make([]float64, NumBins)
	}
	var s float64
	for name, w := range map[string][]float64{"known": in.Known, "censored": in.Censored} {
		if len(w) != NumBins {
			return fmt.Errorf("%w: histogram %s has %d bins, want %d", ErrCorrupt, name, len(w), NumBins)
		}
		for i, x := range w {
			if !(x >= 0) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: histogram %s bin %d weight %v", ErrCorrupt, name, i, x)
			}
			s += x
		}
	}
	if math.IsInf(s, 0) {
		return fmt.Errorf("%w: histogram total weight overflows", ErrCorrupt)
	}
	*h = Histogram{}
	copy(h.w[:], in.Known)
	copy(h.c[:], in.Censored)
	return nil
}
