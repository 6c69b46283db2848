package overbook

import (
	"fmt"
	"math"
)

// Limits of the time-grid distributions.
const (
	// MaxTime bounds every time argument of the distribution functions in
	// absolute value (about 73 billion years in seconds), so grid arithmetic
	// can never overflow int64.
	MaxTime int64 = 1 << 61
	// MaxStep bounds a grid step (about 34,800 years).
	MaxStep int64 = 1 << 40
	// MaxDistBins bounds the number of bins of one distribution; exceeding
	// it returns ErrTooManyBins.
	MaxDistBins = 1 << 20
	// DefaultMaxBins is the bin budget DefaultStep aims for.
	DefaultMaxBins = 1024
)

// DefaultStep returns the grid step for distributions that span horizon
// seconds: max(1, ceil(horizon/DefaultMaxBins)). Use as horizon the span the
// whole chain of one job covers, deadline − release: its start distribution
// (release..planned start), its runtime (estimate) and its end distribution
// (release..slot end) all fit in it, so none has more than 1025 bins and a
// chained convolution costs at most about 2·1025 inputs.
func DefaultStep(horizon int64) int64 {
	if horizon <= DefaultMaxBins {
		return 1
	}
	return ceilDiv(horizon, DefaultMaxBins)
}

// ceilDiv is ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 {
	return a/b + boolInt(a%b != 0)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func checkTimes(ts ...int64) error {
	for _, t := range ts {
		if t > MaxTime || t < -MaxTime {
			return fmt.Errorf("%w: time %d beyond ±MaxTime", ErrBadWindow, t)
		}
	}
	return nil
}

func checkStep(step int64) error {
	if step <= 0 || step > MaxStep {
		return fmt.Errorf("%w: %d", ErrBadStep, step)
	}
	return nil
}

// gridBins returns the number of bins m+1 of a grid from origin with the
// given step whose last point origin+m·step is the first one >= latest.
func gridBins(origin, latest, step int64) (int, error) {
	m := ceilDiv(latest-origin, step)
	if m+1 > MaxDistBins {
		return 0, fmt.Errorf("%w: %d bins (span %d s, step %d s)", ErrTooManyBins, m+1, latest-origin, step)
	}
	return int(m) + 1, nil
}

// EndDist is the discrete distribution of the END time of a reservation on a
// time grid: CDF[k] = P(end <= Origin + k·Step). The end is never later than
// Latest, the reservation's planned end, where the job is killed if it is
// still running: all probability mass beyond Latest is placed AT Latest. So
// the last grid point, Origin + (len(CDF)−1)·Step, is the first one at or
// after Latest, and its CDF is 1.
//
// Between grid points the CDF is read at the grid point below (a step
// function), which understates P(end <= t) and so errs towards "still
// running" (conservative for a successor).
//
// The zero value is a point mass at time 0.
type EndDist struct {
	Origin int64     `json:"origin"` // time of bin 0
	Step   int64     `json:"step"`   // seconds per bin
	Latest int64     `json:"latest"` // planned end: P(end <= Latest) = 1
	CDF    []float64 `json:"cdf"`    // non-decreasing, last element 1
}

// FixedEnd is the distribution of a reservation that ends exactly at t (a
// fixed reservation that is not overbooked, or a job whose end is known).
func FixedEnd(t int64) EndDist {
	return EndDist{Origin: t, Step: 1, Latest: t, CDF: []float64{1}}
}

// gridCDFAt is the CDF of a grid distribution at time t: 0 before origin, 1
// at or after latest or the last bin, else the bin at or below t.
func gridCDFAt(origin, step, latest int64, cdf []float64, t int64) float64 {
	if t < origin {
		return 0
	}
	if t >= latest || step <= 0 || len(cdf) <= 1 {
		return 1
	}
	k := uint64(t-origin) / uint64(step)
	if k >= uint64(len(cdf)-1) {
		return 1
	}
	return cdf[k]
}

// CDFAt is P(end <= t): 0 before Origin, 1 at or after Latest or the last
// bin, else the CDF of the bin at or below t. O(1).
func (d EndDist) CDFAt(t int64) float64 {
	return gridCDFAt(d.Origin, d.Step, d.Latest, d.CDF, t)
}

// Validate checks the invariants: positive step, Origin <= Latest, a CDF
// that is non-decreasing in [0, 1] with last element 1 and exactly enough
// bins to reach Latest. It returns ErrCorrupt wrapped with the reason.
func (d EndDist) Validate() error {
	return validateGrid(d.Origin, d.Step, d.Latest, d.CDF)
}

func validateGrid(origin, step, latest int64, cdf []float64) error {
	if step <= 0 || latest < origin || len(cdf) == 0 {
		return fmt.Errorf("%w: distribution grid origin %d step %d latest %d bins %d", ErrCorrupt, origin, step, latest, len(cdf))
	}
	if n, err := gridBins(origin, latest, step); err != nil || n != len(cdf) {
		return fmt.Errorf("%w: distribution has %d bins, its span needs %d", ErrCorrupt, len(cdf), n)
	}
	prev := 0.0
	for i, p := range cdf {
		if !(p >= prev && p <= 1) {
			return fmt.Errorf("%w: CDF[%d] = %v after %v", ErrCorrupt, i, p, prev)
		}
		prev = p
	}
	if cdf[len(cdf)-1] != 1 {
		return fmt.Errorf("%w: CDF ends at %v, not 1", ErrCorrupt, cdf[len(cdf)-1])
	}
	return nil
}

// Mean is the expected end time, computed on the grid (each bin's mass at its
// grid point, the last bin's at Latest).
func (d EndDist) Mean() float64 {
	return gridMean(d.Origin, d.Step, d.Latest, d.CDF)
}

func gridMean(origin, step, latest int64, cdf []float64) float64 {
	if len(cdf) <= 1 || step <= 0 {
		return float64(origin)
	}
	var m, prev float64
	last := len(cdf) - 1
	for k := 0; k < last; k++ {
		m += (cdf[k] - prev) * float64(int64(k)*step)
		prev = cdf[k]
	}
	m += (1 - prev) * float64(latest-origin)
	return float64(origin) + m
}

// Given returns the distribution conditioned on the reservation still
// running at now: P(end <= t | end > now). Use it for a predecessor that has
// started and not yet ended. The grid is kept (bins wholly before now are
// dropped). If the distribution says the job must have ended by now (CDF 1)
// it is taken to run to Latest; if now >= Latest the result is a point mass
// at now.
func (d EndDist) Given(now int64) EndDist {
	if now < d.Origin {
		return d
	}
	if now >= d.Latest {
		return FixedEnd(now)
	}
	if d.Step <= 0 || len(d.CDF) <= 1 {
		return FixedEnd(d.Latest)
	}
	j := (now - d.Origin) / d.Step
	if j >= int64(len(d.CDF)-1) {
		return FixedEnd(d.Latest)
	}
	p := d.CDF[j]
	if p >= 1 {
		return FixedEnd(d.Latest)
	}
	out := EndDist{
		Origin: d.Origin + j*d.Step,
		Step:   d.Step,
		Latest: d.Latest,
		CDF:    make([]float64, len(d.CDF)-int(j)),
	}
	for k := 1; k < len(out.CDF); k++ {
		out.CDF[k] = math.Max(out.CDF[k-1], math.Min(1, (d.CDF[int(j)+k]-p)/(1-p)))
	}
	out.CDF[len(out.CDF)-1] = 1
	return out
}

// mulGrid multiplies dst[k] by d.CDFAt(t0 + k·step) for every k, walking
// the grid without divisions.
func (d EndDist) mulGrid(dst []float64, t0, step int64) {
	k, t := 0, t0
	for ; k < len(dst) && t < d.Origin; k++ {
		dst[k] = 0
		t += step
	}
	if k == len(dst) || d.Step <= 0 || len(d.CDF) <= 1 {
		return // the rest is at or after a point mass: factor 1
	}
	off := t - d.Origin
	q, r := off/d.Step, off%d.Step
	dq, dr := step/d.Step, step%d.Step
	last := int64(len(d.CDF) - 1)
	for ; k < len(dst) && q < last && t < d.Latest; k++ {
		dst[k] *= d.CDF[q]
		t += step
		q += dq
		r += dr
		if r >= d.Step {
			r -= d.Step
			q++
		}
	}
}

// ReservationDist is the end-time distribution of a job that starts exactly
// at start (a known start: the job is running or is first on its nodes),
// whose runtime ratio follows h, with the given estimate, in a slot that
// ends at slotEnd. The job ends at min(start + actual, start + estimate,
// slotEnd): it is killed at its estimate or at the slot end. The grid starts
// at start with the given step.
//
// CDF[k] = h.CDFAt(k·step, estimate) for grid points before the end of the
// reservation and 1 from there on.
func ReservationDist(h *Histogram, start, estimate, slotEnd, step int64) (EndDist, error) {
	if err := checkStep(step); err != nil {
		return EndDist{}, err
	}
	if estimate <= 0 {
		return EndDist{}, fmt.Errorf("%w: %d", ErrBadEstimate, estimate)
	}
	if err := checkTimes(start, slotEnd, estimate); err != nil {
		return EndDist{}, err
	}
	if slotEnd < start {
		return EndDist{}, fmt.Errorf("%w: slot end %d before start %d", ErrBadWindow, slotEnd, start)
	}
	latest := min(slotEnd, start+estimate)
	n, err := gridBins(start, latest, step)
	if err != nil {
		return EndDist{}, err
	}
	cdf := make([]float64, n)
	h.cdfGrid(cdf[:n-1], 0, step, estimate)
	cdf[n-1] = 1
	return EndDist{Origin: start, Step: step, Latest: latest, CDF: cdf}, nil
}

// StartDist is the discrete distribution of the START time of a job planned
// after some predecessors (comprehensive overbooking): CDF[k] =
// P(start <= Origin + k·Step), with Origin the release time and Latest the
// planned start. Same conventions as EndDist.
type StartDist struct {
	Origin int64     `json:"origin"` // release: the earliest start, time of bin 0
	Step   int64     `json:"step"`   // seconds per bin
	Latest int64     `json:"latest"` // planned start: P(start <= Latest) = 1
	CDF    []float64 `json:"cdf"`
}

// CDFAt is P(start <= t); see EndDist.CDFAt.
func (s StartDist) CDFAt(t int64) float64 {
	return gridCDFAt(s.Origin, s.Step, s.Latest, s.CDF, t)
}

// Validate checks the invariants; see EndDist.Validate.
func (s StartDist) Validate() error {
	return validateGrid(s.Origin, s.Step, s.Latest, s.CDF)
}

// Mean is the expected start time on the grid.
func (s StartDist) Mean() float64 {
	return gridMean(s.Origin, s.Step, s.Latest, s.CDF)
}

// NewStartDist is the start-time distribution of a job released at release
// and planned to start at plannedStart on nodes whose last reservations
// before it end with the distributions preds (thesis §3.2.2; digest
// "implementation-exact form"). The job starts as soon as all of them have
// ended, but not before release and not after plannedStart:
//
//	F_S(t) = 0                 for t < release
//	F_S(t) = Π_i F_{E_i}(t)    for release <= t < plannedStart
//	F_S(t) = 1                 for t >= plannedStart
//
// The predecessors' ends are taken as independent. The CALLER must pass each
// distinct predecessor reservation once: a predecessor that occupies several
// of the job's nodes is one factor, not one per node (the thesis multiplies
// per node, which double-counts). Only the last reservation before the job
// on each node matters; its EndDist already contains its own predecessors.
// With no predecessors the job starts at release.
func NewStartDist(preds []EndDist, release, plannedStart, step int64) (StartDist, error) {
	if err := checkStep(step); err != nil {
		return StartDist{}, err
	}
	if err := checkTimes(release, plannedStart); err != nil {
		return StartDist{}, err
	}
	if plannedStart < release {
		return StartDist{}, fmt.Errorf("%w: planned start %d before release %d", ErrBadWindow, plannedStart, release)
	}
	n, err := gridBins(release, plannedStart, step)
	if err != nil {
		return StartDist{}, err
	}
	cdf := make([]float64, n)
	for k := range cdf {
		cdf[k] = 1
	}
	for _, p := range preds {
		p.mulGrid(cdf[:n-1], release, step)
	}
	cdf[n-1] = 1
	for k := 1; k < n; k++ { // guard against non-monotone inputs
		if cdf[k] < cdf[k-1] {
			cdf[k] = cdf[k-1]
		}
	}
	return StartDist{Origin: release, Step: step, Latest: plannedStart, CDF: cdf}, nil
}

// regrid returns s on a grid with a different step (same origin and latest),
// reading s at the new grid points.
func (s StartDist) regrid(step int64) (StartDist, error) {
	n, err := gridBins(s.Origin, s.Latest, step)
	if err != nil {
		return StartDist{}, err
	}
	cdf := make([]float64, n)
	for k := range n - 1 {
		cdf[k] = s.CDFAt(s.Origin + int64(k)*step)
	}
	cdf[n-1] = 1
	return StartDist{Origin: s.Origin, Step: step, Latest: s.Latest, CDF: cdf}, nil
}

// pmf writes the bin masses of a CDF into dst (len(cdf)), the last one being
// 1 − CDF[len−2].
func pmf(dst, cdf []float64) {
	prev := 0.0
	for k, c := range cdf[:len(cdf)-1] {
		dst[k] = c - prev
		prev = c
	}
	dst[len(cdf)-1] = 1 - prev
}

// ChainedEndDist is the end-time distribution of a job whose start follows
// start and whose runtime ratio follows h (thesis §3.2.3): the convolution
// of the start-time PMF with the runtime PMF, with the end capped at
//
//	Latest = min(slotEnd, start.Latest + estimate)
//
// (the job is killed at the slot end, and after running its estimate).
// Mass beyond the cap is placed at the cap. The result is on a grid from
// start.Origin with the given step; if step differs from start.Step the
// start distribution is first read onto the new grid.
//
// The runtime is discretised on the grid rounding up (the PMF of runtime
// bin j is F(j·step) − F((j−1)·step) with F = h.CDFAt(·, estimate)), so the
// result errs late by at most one step per convolution. The convolution is
// direct for small inputs and FFT-based (gonum dsp/fourier) for large ones;
// see convolve.
//
// Store the result as this reservation's EndDist so that later jobs can
// chain on it. For the admission decision itself use ExecProb or
// ComprehensivePoF, which need no convolution.
func ChainedEndDist(start StartDist, h *Histogram, estimate, slotEnd, step int64) (EndDist, error) {
	if err := checkStep(step); err != nil {
		return EndDist{}, err
	}
	if estimate <= 0 {
		return EndDist{}, fmt.Errorf("%w: %d", ErrBadEstimate, estimate)
	}
	if err := checkTimes(start.Origin, start.Latest, slotEnd, estimate); err != nil {
		return EndDist{}, err
	}
	if start.Latest < start.Origin || slotEnd < start.Latest {
		return EndDist{}, fmt.Errorf("%w: release %d, planned start %d, slot end %d", ErrBadWindow, start.Origin, start.Latest, slotEnd)
	}
	if start.Step != step || len(start.CDF) == 0 {
		var err error
		if start, err = start.regrid(step); err != nil {
			return EndDist{}, err
		}
	}
	latest := min(slotEnd, start.Latest+estimate)
	n, err := gridBins(start.Origin, latest, step)
	if err != nil {
		return EndDist{}, err
	}
	// Runtime CDF on the grid: F(j·step) for j = 0..J, F(J·step) = 1.
	nj, err := gridBins(0, estimate, step)
	if err != nil {
		return EndDist{}, err
	}
	ns := len(start.CDF)
	buf := make([]float64, ns+2*nj+n)
	sp, rc, rp, out := buf[:ns], buf[ns:ns+nj], buf[ns+nj:ns+2*nj], buf[ns+2*nj:]
	pmf(sp, start.CDF)
	h.cdfGrid(rc[:nj-1], 0, step, estimate)
	rc[nj-1] = 1
	pmf(rp, rc)
	convolve(out, sp, rp)
	// Prefix sums; mass past the cap stays implicit and lands at the cap.
	s := 0.0
	for k := range out {
		s += out[k]
		c := math.Min(1, math.Max(s, 0))
		if k > 0 && c < out[k-1] {
			c = out[k-1]
		}
		out[k] = c
	}
	out[n-1] = 1
	return EndDist{Origin: start.Origin, Step: step, Latest: latest, CDF: out}, nil
}

// cdfGrid fills dst[k] = h.CDFAt(tau0 + k·step, estimate), walking the grid
// with one division at the start instead of one per point. step > 0; the
// arguments are bounded as checked by the exported callers.
func (h *Histogram) cdfGrid(dst []float64, tau0, step, estimate int64) {
	k, tau := 0, tau0
	for ; k < len(dst) && tau < 0; k++ {
		dst[k] = 0
		tau += step
	}
	if h == nil {
		for ; k < len(dst) && tau < estimate; k++ {
			dst[k] = 0
			tau += step
		}
	} else if estimate <= math.MaxInt64/200 && step < estimate {
		h.prepare()
		if tau < estimate {
			num, d := 100*tau, 100*step
			q, r := num/estimate, num%estimate
			dq, dr := d/estimate, d%estimate
			for ; k < len(dst) && q < NumBins-1; k++ {
				dst[k] = h.cdf[q]
				q += dq
				r += dr
				if r >= estimate {
					r -= estimate
					q++
				}
			}
		}
	} else {
		for ; k < len(dst) && tau < estimate; k++ {
			dst[k] = h.CDFAt(tau, estimate)
			tau += step
		}
	}
	for ; k < len(dst); k++ {
		dst[k] = 1
	}
}
