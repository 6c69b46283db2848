package forecast

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// AR is the autoregressive predictor AR(p), Eqs 5.4-5.5:
// X(t) = c + Σ_{i=1..p} φ_i·X(t−i) + ε(t), with c = (1 − Σφ_i)·μ.
//
// It is refitted on the last FitWindow observations, every
// min(RefitEvery, 1 + n/8) observations for a series of n (every observation
// while it is short):
//   - μ is the window mean;
//   - the order p is the last lag, up to min(MaxLag, N/4), at which the
//     partial autocorrelation (Durbin-Levinson on the sample
//     autocorrelation) exceeds the 95% band ±2/√N, as in the thesis; p = 0
//     (no significant lag) makes the forecast the window mean;
//   - φ is the forward-backward ("modified covariance") least-squares fit,
//     solved by QR with gonum.
//
// The forecast is clamped to the range of values seen, so that an unstable
// fit cannot forecast a runtime the partition has never produced. With
// LogSpace the series modelled is log(max(runtime, 1)).
type AR struct {
	cfg     PredictorConfig
	hist    ring // transformed values
	n       int  // observations so far
	since   int  // observations since the last fit
	mu      float64
	phi     []float64
	lo, hi  float64 // range of transformed values seen in the fit window and since
	fc      float64 // forecast, transformed space
	ok      bool
	scratch []float64
}

// NewAR returns an AR predictor.
func NewAR(cfg PredictorConfig) *AR {
	return &AR{cfg: cfg, hist: newRing(cfg.FitWindow)}
}

// Name implements Predictor.
func (p *AR) Name() string { return NameAR }

// Order is the AR order of the current fit (0: the window mean).
func (p *AR) Order() int { return len(p.phi) }

// Coefficients returns a copy of φ_1..φ_p of the current fit.
func (p *AR) Coefficients() []float64 { return slices.Clone(p.phi) }

// Observe implements Predictor.
func (p *AR) Observe(x float64) {
	v := transform(x, p.cfg.LogSpace)
	p.hist.push(v)
	p.n++
	p.since++
	if !p.ok {
		p.lo, p.hi = v, v
	}
	p.lo, p.hi = math.Min(p.lo, v), math.Max(p.hi, v)
	if p.since >= min(p.cfg.RefitEvery, 1+p.n/8) {
		p.fit()
	}
	f := p.mu
	for i, c := range p.phi {
		f += c * (p.hist.last(i+1) - p.mu)
	}
	p.fc = clamp(f, p.lo, p.hi)
	p.ok = true
}

// Forecast implements Predictor.
func (p *AR) Forecast() (float64, bool) {
	if !p.ok {
		return 0, false
	}
	return untransform(p.fc, p.cfg.LogSpace), true
}

// fit refits μ, p and φ on the window.
func (p *AR) fit() {
	p.since = 0
	y := p.hist.tail(p.scratch[:0], p.hist.n)
	p.scratch = y
	p.mu, p.lo, p.hi = demean(y)
	p.phi = p.phi[:0]
	order, _ := pacfOrder(y, p.cfg.MaxLag)
	if order == 0 {
		return
	}
	phi, ok := fitARForwardBackward(y, order)
	if ok {
		p.phi = append(p.phi, phi...)
	}
}

// ARMA is the ARMA(p,q) predictor, Eq. 5.6:
// X(t) = ε(t) + Σ_{i=1..p} φ_i·X(t−i) + Σ_{j=1..q} θ_j·ε(t−j) (around the mean).
//
// As in the thesis the orders are p = q = the PACF-derived AR order (at
// least 1 here, so that ARMA never degenerates into the mean), and when the
// fit fails the fallback is MA order 2 (ARMA(0,2)), then the mean. The thesis
// used MATLAB's iterative prediction-error minimisation with a robustified
// criterion; we do the same in spirit: start from the Hannan-Rissanen
// estimate (a long Yule-Walker AR for the innovations, then least squares on
// lagged values and innovations) and minimise the Huber loss of the one-step
// residuals by Levenberg-Marquardt-damped Gauss-Newton steps (at most 10,
// each a gonum Cholesky solve of the weighted normal equations). A fit fails
// when the residuals are not finite or blow up (mean square above 4 times
// the series'), or the MA part is not invertible (step-down test).
// Windowing, refitting, clamping and LogSpace are as for AR.
type ARMA struct {
	cfg     PredictorConfig
	hist    ring // transformed values
	resid   ring // one-step residuals aligned with hist
	n       int
	since   int
	mu      float64
	phi     []float64
	theta   []float64
	warm    []float64 // previous coefficients, to warm-start the next fit
	lo, hi  float64
	raw     float64 // unclamped demeaned forecast
	fc      float64 // clamped forecast, transformed space
	ok      bool
	scratch []float64
}

// NewARMA returns an ARMA predictor.
func NewARMA(cfg PredictorConfig) *ARMA {
	return &ARMA{cfg: cfg, hist: newRing(cfg.FitWindow), resid: newRing(cfg.FitWindow)}
}

// Name implements Predictor.
func (p *ARMA) Name() string { return NameARMA }

// Orders returns (p, q) of the current fit; (0, 0) is the mean.
func (p *ARMA) Orders() (int, int) { return len(p.phi), len(p.theta) }

// Observe implements Predictor.
func (p *ARMA) Observe(x float64) {
	v := transform(x, p.cfg.LogSpace)
	e := 0.0
	if p.ok {
		e = (v - p.mu) - p.raw
	}
	p.hist.push(v)
	p.resid.push(e)
	p.n++
	p.since++
	if !p.ok {
		p.lo, p.hi = v, v
	}
	p.lo, p.hi = math.Min(p.lo, v), math.Max(p.hi, v)
	if p.since >= min(p.cfg.RefitEvery, 1+p.n/8) {
		p.fit()
	}
	f := 0.0
	for i, c := range p.phi {
		f += c * (p.hist.last(i+1) - p.mu)
	}
	for j, c := range p.theta {
		f += c * p.resid.last(j+1)
	}
	p.raw = f
	p.fc = clamp(p.mu+f, p.lo, p.hi)
	p.ok = true
}

// Forecast implements Predictor.
func (p *ARMA) Forecast() (float64, bool) {
	if !p.ok {
		return 0, false
	}
	return untransform(p.fc, p.cfg.LogSpace), true
}

// fit refits μ, the orders and the coefficients on the window and
// recomputes the residuals.
func (p *ARMA) fit() {
	p.since = 0
	y := p.hist.tail(p.scratch[:0], p.hist.n)
	p.scratch = y
	p.mu, p.lo, p.hi = demean(y)
	prevP, prevQ := len(p.phi), len(p.theta)
	p.warm = append(append(p.warm[:0], p.phi...), p.theta...)
	var phi, theta []float64
	ok := false
	if len(y) >= 16 {
		order, yw := pacfOrder(y, p.cfg.MaxLag)
		if yw != nil {
			order = max(order, 1)
			var warm []float64
			if prevP == order && prevQ == order {
				warm = p.warm
			}
			phi, theta, ok = fitARMA(y, order, order, yw, warm)
			if !ok {
				warm = nil
				if prevP == 0 && prevQ == 2 {
					warm = p.warm
				}
				phi, theta, ok = fitARMA(y, 0, 2, yw, warm)
			}
		}
	}
	p.phi, p.theta = p.phi[:0], p.theta[:0]
	if ok {
		p.phi = append(p.phi, phi...)
		p.theta = append(p.theta, theta...)
	}
	// Rebuild the residual ring for the window under the new model.
	eps := armaResiduals(y, p.phi, p.theta, nil)
	p.resid = newRing(len(p.resid.buf))
	for _, e := range eps {
		p.resid.push(e)
	}
}

// transform maps a runtime to the modelled space.
func transform(x float64, logSpace bool) float64 {
	if logSpace {
		return math.Log(math.Max(x, 1))
	}
	return x
}

// untransform is the inverse of transform.
func untransform(v float64, logSpace bool) float64 {
	if logSpace {
		return math.Exp(v)
	}
	return v
}

func clamp(x, lo, hi float64) float64 {
	if !(x >= lo) { // also catches NaN
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

// demean subtracts the mean from y in place and returns the mean and the
// range of the original values.
func demean(y []float64) (mu, lo, hi float64) {
	if len(y) == 0 {
		return 0, 0, 0
	}
	mu, lo, hi = mean(y), y[0], y[0]
	for i, v := range y {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
		y[i] = v - mu
	}
	return mu, lo, hi
}

// autocorrelation returns the biased sample autocorrelation r[0..maxLag] of
// the demeaned series y, or nil when y has no variance.
func autocorrelation(y []float64, maxLag int) []float64 {
	var c0 float64
	for _, v := range y {
		c0 += v * v
	}
	if !(c0 > 1e-12*float64(len(y))) {
		return nil
	}
	r := make([]float64, maxLag+1)
	r[0] = 1
	for k := 1; k <= maxLag; k++ {
		var s float64
		for t := 0; t+k < len(y); t++ {
			s += y[t] * y[t+k]
		}
		r[k] = s / c0
	}
	return r
}

// durbinLevinson solves the Yule-Walker equations for the autocorrelation r
// recursively. It returns the partial autocorrelations at lags 1..L and the
// AR(L) Yule-Walker coefficients, L = len(r)−1; it stops early (shorter
// results) if the prediction error variance reaches zero.
func durbinLevinson(r []float64) (pacf, phi []float64) {
	L := len(r) - 1
	phi = make([]float64, 0, L)
	prev := make([]float64, 0, L)
	v := r[0]
	for k := 1; k <= L; k++ {
		num := r[k]
		for j := 1; j < k; j++ {
			num -= prev[j-1] * r[k-j]
		}
		a := num / v
		phi = phi[:0]
		for j := 1; j < k; j++ {
			phi = append(phi, prev[j-1]-a*prev[k-j-1])
		}
		phi = append(phi, a)
		pacf = append(pacf, a)
		v *= 1 - a*a
		prev = append(prev[:0], phi...)
		if !(v > 1e-12) {
			break
		}
	}
	return pacf, phi
}

// pacfOrder returns the AR order of the demeaned series y chosen from its
// PACF — the last lag, up to min(maxLag, len(y)/4), outside ±2/√N — and the
// Yule-Walker coefficients of the longest AR computed (nil if y is too short
// or constant).
func pacfOrder(y []float64, maxLag int) (int, []float64) {
	L := min(maxLag, len(y)/4)
	if L < 1 {
		return 0, nil
	}
	r := autocorrelation(y, L)
	if r == nil {
		return 0, nil
	}
	pacf, yw := durbinLevinson(r)
	band := 2 / math.Sqrt(float64(len(y)))
	order := 0
	for k, a := range pacf {
		if math.Abs(a) > band {
			order = k + 1
		}
	}
	return order, yw
}

// fitARForwardBackward fits AR(p) to the demeaned series y by least squares
// on both the forward and the backward prediction equations (the modified
// covariance method).
func fitARForwardBackward(y []float64, p int) ([]float64, bool) {
	m := len(y)
	rows := 2 * (m - p)
	if m-p < p+2 {
		return nil, false
	}
	a := make([]float64, 0, rows*p)
	b := make([]float64, 0, rows)
	for t := p; t < m; t++ { // forward: y_t from y_{t-1..t-p}
		for i := 1; i <= p; i++ {
			a = append(a, y[t-i])
		}
		b = append(b, y[t])
	}
	for t := 0; t+p < m; t++ { // backward: y_t from y_{t+1..t+p}
		for i := 1; i <= p; i++ {
			a = append(a, y[t+i])
		}
		b = append(b, y[t])
	}
	return leastSquares(a, b, rows, p)
}

// fitARMA fits ARMA(p,q) to the demeaned series y. The starting point is
// the Hannan-Rissanen estimate (least squares on lagged values and the
// innovations of the long Yule-Walker AR yw), or zero when that fails; it is
// then refined by minimising a robustified (Huber) one-step prediction error
// with Levenberg-Marquardt steps (gonum Cholesky on the weighted normal
// equations), keeping the MA part invertible; it stops when a step gains
// less than 0.01% of the loss. A warm start (the coefficients of the
// previous fit, when it had the same orders) replaces the Hannan-Rissanen
// start: refits on a window that moved by a few values then converge in a
// step or two.
func fitARMA(y []float64, p, q int, yw, warm []float64) (phi, theta []float64, ok bool) {
	m := len(y)
	L := len(yw)
	k := p + q
	if k == 0 || m-max(p, q) < 2*k+4 {
		return nil, nil, false
	}
	// Hannan-Rissanen start: innovations of the long AR, then regression.
	e := make([]float64, m)
	for t := L; t < m; t++ {
		f := 0.0
		for i, c := range yw {
			f += c * y[t-i-1]
		}
		e[t] = y[t] - f
	}
	beta := make([]float64, k)
	if len(warm) == k && invertible(warm[p:]) {
		copy(beta, warm)
	} else if ph, th, ok := regressARMA(y, e, p, q, max(p, L+q)); ok && invertible(th) {
		copy(beta, ph)
		copy(beta[p:], th)
	}
	var vy float64
	for _, v := range y {
		vy += v * v
	}
	vy /= float64(m)

	eps := armaResiduals(y, beta[:p], beta[p:], nil)
	abs := make([]float64, m)
	for i, v := range eps {
		abs[i] = math.Abs(v)
	}
	c := 1.345 * 1.4826 * median(abs) // Huber threshold, fixed from the start
	obj := huberLoss(eps, c)
	jac := make([]float64, m*k)
	jtj := make([]float64, k*k)
	jte := make([]float64, k)
	lhs := make([]float64, k*k)
	var chol mat.Cholesky
	var delta mat.VecDense
	trial := make([]float64, k)
	lambda := 1e-3
	for range 10 {
		// Normal equations of the weighted Gauss-Newton step:
		// (JᵀWJ + λ·diag(JᵀWJ))·δ = −JᵀWε (Levenberg-Marquardt damping).
		armaJacobian(y, eps, beta[:p], beta[p:], jac)
		clear(jtj)
		clear(jte)
		for t := range m {
			w := 1.0
			if c > 0 && math.Abs(eps[t]) > c {
				w = c / math.Abs(eps[t])
			}
			row := jac[t*k : (t+1)*k]
			for i, ri := range row {
				wi := w * ri
				jte[i] -= wi * eps[t]
				for j := i; j < k; j++ {
					jtj[i*k+j] += wi * row[j]
				}
			}
		}
		improved := false
		for range 6 {
			copy(lhs, jtj)
			for i := range k {
				d := jtj[i*k+i]
				lhs[i*k+i] = d + lambda*math.Max(d, 1e-12)
			}
			// SymDense reads the upper triangle, which is the one filled.
			if !chol.Factorize(mat.NewSymDense(k, lhs)) || chol.SolveVecTo(&delta, mat.NewVecDense(k, jte)) != nil {
				lambda *= 10
				continue
			}
			for j := range beta {
				trial[j] = beta[j] + delta.AtVec(j)
			}
			if invertible(trial[p:]) {
				te := armaResiduals(y, trial[:p], trial[p:], nil)
				if to := huberLoss(te, c); to < obj {
					rel := (obj - to) / math.Max(obj, 1e-300)
					copy(beta, trial)
					eps, obj = te, to
					lambda = math.Max(lambda/10, 1e-9)
					improved = rel > 1e-4
					break
				}
			}
			lambda *= 10
		}
		if !improved {
			break
		}
	}
	phi, theta = beta[:p], beta[p:]
	if !invertible(theta) || !residualsSane(eps, vy) {
		return nil, nil, false
	}
	return phi, theta, true
}

// huberLoss is Σ ρ(e) with Huber's ρ at threshold c (plain squares when
// c <= 0).
func huberLoss(eps []float64, c float64) float64 {
	var s float64
	for _, e := range eps {
		a := math.Abs(e)
		if c <= 0 || a <= c {
			s += a * a / 2
		} else {
			s += c*a - c*c/2
		}
	}
	return s
}

// armaJacobian fills jac (row-major, len(y) × (p+q)) with the derivatives of
// the residuals eps of the ARMA model (phi, theta) on y with respect to
// φ_1..φ_p, θ_1..θ_q:
// ∂ε_t/∂φ_i = −y_{t−i} − Σ_j θ_j·∂ε_{t−j}/∂φ_i and
// ∂ε_t/∂θ_j = −ε_{t−j} − Σ_l θ_l·∂ε_{t−l}/∂θ_j, with zero pre-sample values.
func armaJacobian(y, eps, phi, theta, jac []float64) {
	p, q := len(phi), len(theta)
	k := p + q
	for t := range y {
		row := jac[t*k : (t+1)*k]
		for c := range k {
			var d float64
			if c < p {
				if t-c-1 >= 0 {
					d = -y[t-c-1]
				}
			} else if j := c - p; t-j-1 >= 0 {
				d = -eps[t-j-1]
			}
			for l, th := range theta {
				if t-l-1 >= 0 {
					d -= th * jac[(t-l-1)*k+c]
				}
			}
			row[c] = d
		}
	}
}

// invertible reports whether the MA polynomial 1 + θ_1·z + ... + θ_q·z^q
// has all its roots outside the unit circle, i.e. whether
// z^q + θ_1·z^(q−1) + ... + θ_q has all its roots inside it. It runs the
// step-down (Schur-Cohn) recursion: the polynomial is stable iff every
// reflection coefficient has magnitude below 1.
func invertible(theta []float64) bool {
	a := slices.Clone(theta)
	for m := len(a); m >= 1; m-- {
		k := a[m-1]
		if !(math.Abs(k) < 1) {
			return false
		}
		d := 1 - k*k
		b := make([]float64, m-1)
		for i := 1; i < m; i++ {
			b[i-1] = (a[i-1] - k*a[m-i-1]) / d
		}
		a = b
	}
	return true
}

// regressARMA solves y_t = Σφ_i·y_{t−i} + Σθ_j·e_{t−j} by least squares
// over t >= start (the second stage of Hannan-Rissanen).
func regressARMA(y, e []float64, p, q, start int) (phi, theta []float64, ok bool) {
	m := len(y)
	cols := p + q
	rows := m - start
	if cols == 0 || rows < 2*cols+4 {
		return nil, nil, false
	}
	a := make([]float64, 0, rows*cols)
	b := make([]float64, 0, rows)
	for t := start; t < m; t++ {
		for i := 1; i <= p; i++ {
			a = append(a, y[t-i])
		}
		for j := 1; j <= q; j++ {
			a = append(a, e[t-j])
		}
		b = append(b, y[t])
	}
	x, ok := leastSquares(a, b, rows, cols)
	if !ok {
		return nil, nil, false
	}
	return x[:p], x[p:], true
}

// armaResiduals returns the one-step residuals of the ARMA model on y,
// computed recursively from zero initial residuals. It writes into dst when
// dst has room, else allocates.
func armaResiduals(y, phi, theta, dst []float64) []float64 {
	if cap(dst) < len(y) {
		dst = make([]float64, len(y))
	}
	eps := dst[:len(y)]
	for t := range y {
		f := 0.0
		for i, c := range phi {
			if t-i-1 >= 0 {
				f += c * y[t-i-1]
			}
		}
		for j, c := range theta {
			if t-j-1 >= 0 {
				f += c * eps[t-j-1]
			}
		}
		eps[t] = y[t] - f
	}
	return eps
}

// residualsSane reports whether the residuals are finite and their mean
// square is at most 4 times the series' (vy): a fit that predicts worse than
// the mean by that much has failed.
func residualsSane(eps []float64, vy float64) bool {
	var s float64
	for _, e := range eps {
		s += e * e
	}
	s /= float64(len(eps))
	return !math.IsNaN(s) && !math.IsInf(s, 0) && s <= 4*vy+1e-12
}

// leastSquares solves min‖A·x − b‖ for the row-major rows×cols matrix a with
// gonum's QR-based solver. It fails on a rank-deficient or ill-conditioned
// system or a non-finite solution.
func leastSquares(a, b []float64, rows, cols int) ([]float64, bool) {
	if rows < cols || cols == 0 {
		return nil, false
	}
	A := mat.NewDense(rows, cols, a)
	B := mat.NewVecDense(rows, b)
	var x mat.VecDense
	if err := x.SolveVec(A, B); err != nil {
		return nil, false
	}
	out := make([]float64, cols)
	for i := range out {
		out[i] = x.AtVec(i)
		if math.IsNaN(out[i]) || math.IsInf(out[i], 0) {
			return nil, false
		}
	}
	return out, true
}
