package forecast

import (
	"math"
	"slices"
)

// Predictor is a one-step-ahead forecaster of one series of runtimes (the
// completed jobs of one partition, in completion order). Every predictor
// parametrises itself from the series it has seen; none needs tuning by hand.
//
// A Predictor is not safe for concurrent use.
type Predictor interface {
	// Name is the predictor's short name: one of PredictorNames.
	Name() string
	// Observe appends the next value of the series (a runtime in seconds).
	Observe(x float64)
	// Forecast returns the forecast of the next value, and false if the
	// predictor has not seen any value yet.
	Forecast() (float64, bool)
}

// Names of the five predictors of the thesis (§5.2.2), in the order used for
// tie-breaking and in reports.
const (
	NameMedian = "median" // windowed median, feedback-controlled window
	NameMean   = "mean"   // windowed mean ("MA"), feedback-controlled window
	NameSES    = "ses"    // simple exponential smoothing, alpha swept on history
	NameAR     = "ar"     // AR(p), p from the PACF, forward-backward least squares
	NameARMA   = "arma"   // ARMA(p,p), p from the PACF, Hannan-Rissanen with robust refinement
)

// PredictorNames returns the names of the predictors in their fixed order.
// The slice is new on each call.
func PredictorNames() []string { return []string{NameMedian, NameMean, NameSES, NameAR, NameARMA} }

// PredictorConfig holds the parameters of the predictors' automatic
// parametrisation. The zero value is not usable; start from
// DefaultPredictorConfig.
type PredictorConfig struct {
	// MinWindow, MaxWindow and StartWindow bound and start the window (in
	// observations) of the windowed median and mean. The window is adapted
	// by feedback: halved when the latest absolute percentage error exceeds
	// ShrinkRatio times its running average (a level shift), grown by one
	// when the error is at or below the average.
	MinWindow, MaxWindow, StartWindow int
	// ShrinkRatio is the error jump that halves the window; > 1.
	ShrinkRatio float64
	// Alphas is the grid of smoothing factors SES sweeps. Each is run in
	// parallel on the series; the one with the lowest discounted absolute
	// error on the history so far makes the forecast.
	Alphas []float64
	// Discount is the per-observation decay of the error sums used to choose
	// alpha (and, in Partition, to choose the predictor): 0.99 weighs the
	// last ~100 observations. In (0, 1].
	Discount float64
	// FitWindow is the number of most recent observations AR and ARMA are
	// fitted on (their "training data").
	FitWindow int
	// MaxLag is the largest PACF lag considered for the AR/ARMA order.
	MaxLag int
	// RefitEvery is how many new observations AR and ARMA wait before
	// refitting; a series of n observations refits every
	// min(RefitEvery, 1 + n/8), so short series refit at every one.
	RefitEvery int
	// LogSpace makes AR and ARMA model log(runtime) rather than runtime,
	// which tames heavy tails and makes their forecast a geometric
	// (median-type) level. It is off by default, as in the thesis (which
	// fitted raw values), because it measured worse: on KTH with the chain
	// user+estimate > user, AR alone had an MdAPE of 0.60 in log space and
	// 0.48 on raw values.
	LogSpace bool
}

// DefaultPredictorConfig returns the parameters used unless told otherwise.
func DefaultPredictorConfig() PredictorConfig {
	return PredictorConfig{
		MinWindow:   2,
		MaxWindow:   32,
		StartWindow: 4,
		ShrinkRatio: 2,
		Alphas:      []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1},
		Discount:    0.99,
		FitWindow:   200,
		MaxLag:      10,
		RefitEvery:  8,
		LogSpace:    false,
	}
}

// validate checks the ranges documented on the fields.
func (c PredictorConfig) validate() error {
	switch {
	case c.MinWindow < 1 || c.MaxWindow < c.MinWindow || c.StartWindow < c.MinWindow || c.StartWindow > c.MaxWindow:
		return errorf("predictor windows %d <= %d <= %d with min >= 1", c.MinWindow, c.StartWindow, c.MaxWindow)
	case !(c.ShrinkRatio > 1):
		return errorf("ShrinkRatio %v must be > 1", c.ShrinkRatio)
	case len(c.Alphas) == 0:
		return errorf("Alphas is empty")
	case !(c.Discount > 0 && c.Discount <= 1):
		return errorf("Discount %v must be in (0, 1]", c.Discount)
	case c.FitWindow < 16:
		return errorf("FitWindow %d must be >= 16", c.FitWindow)
	case c.MaxLag < 1:
		return errorf("MaxLag %d must be >= 1", c.MaxLag)
	case c.RefitEvery < 1:
		return errorf("RefitEvery %d must be >= 1", c.RefitEvery)
	}
	for _, a := range c.Alphas {
		if !(a > 0 && a <= 1) {
			return errorf("alpha %v must be in (0, 1]", a)
		}
	}
	return nil
}

// NewPredictor returns a fresh predictor of the given name, or nil if the
// name is not one of PredictorNames.
func NewPredictor(name string, cfg PredictorConfig) Predictor {
	switch name {
	case NameMedian:
		return NewMedian(cfg)
	case NameMean:
		return NewMean(cfg)
	case NameSES:
		return NewSES(cfg)
	case NameAR:
		return NewAR(cfg)
	case NameARMA:
		return NewARMA(cfg)
	}
	return nil
}

// ring is a fixed-capacity buffer of the most recent values of a series.
type ring struct {
	buf  []float64
	head int // index of the next write
	n    int // values held, <= len(buf)
}

func newRing(capacity int) ring { return ring{buf: make([]float64, capacity)} }

// push appends x, dropping the oldest value when full.
func (r *ring) push(x float64) {
	r.buf[r.head] = x
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	if r.n < len(r.buf) {
		r.n++
	}
}

// last returns the i-th most recent value (i = 1 is the latest); i <= n.
func (r *ring) last(i int) float64 {
	j := r.head - i
	if j < 0 {
		j += len(r.buf)
	}
	return r.buf[j]
}

// tail appends the k most recent values, oldest first, to dst.
func (r *ring) tail(dst []float64, k int) []float64 {
	for i := k; i >= 1; i-- {
		dst = append(dst, r.last(i))
	}
	return dst
}

// windowControl is the feedback loop that sets the window of the windowed
// median and mean. The thesis gives only its purpose ("to reduce the time
// needed for the predictions to converge following an abrupt change",
// §5.2.2); the control law is ours: with e the absolute percentage error of
// the forecast just made and ē its running average (weight 1/4 on the new
// error), the window halves when e > ShrinkRatio·ē and grows by one when
// e <= ē, within [MinWindow, MaxWindow].
type windowControl struct {
	k, min, max int
	shrink      float64
	avg         float64 // running average of the APE
	seen        bool
}

func newWindowControl(cfg PredictorConfig) windowControl {
	return windowControl{k: cfg.StartWindow, min: cfg.MinWindow, max: cfg.MaxWindow, shrink: cfg.ShrinkRatio}
}

// update feeds the error of the forecast f against the actual value a.
func (c *windowControl) update(a, f float64) {
	e := math.Abs(a-f) / math.Max(a, 1)
	if !c.seen {
		c.avg, c.seen = e, true
		return
	}
	switch {
	case e > c.shrink*c.avg:
		c.k = max(c.min, c.k/2)
	case e <= c.avg:
		c.k = min(c.max, c.k+1)
	}
	c.avg = 0.75*c.avg + 0.25*e
}

// Windowed is the windowed median or windowed mean predictor (§5.2.2, models
// 1 and 2): the median or mean of the last k values, k set by the feedback
// loop described at windowControl.
type Windowed struct {
	median  bool
	ctl     windowControl
	hist    ring
	scratch []float64
	fc      float64
	ok      bool
}

// NewMedian returns a windowed-median predictor.
func NewMedian(cfg PredictorConfig) *Windowed {
	return &Windowed{median: true, ctl: newWindowControl(cfg), hist: newRing(cfg.MaxWindow)}
}

// NewMean returns a windowed-mean (moving average) predictor, Eq. 5.2:
// F(t) = (1/k)·Σ_{n=1..k} A(t−n).
func NewMean(cfg PredictorConfig) *Windowed {
	return &Windowed{ctl: newWindowControl(cfg), hist: newRing(cfg.MaxWindow)}
}

// Name implements Predictor.
func (w *Windowed) Name() string {
	if w.median {
		return NameMedian
	}
	return NameMean
}

// Window is the current window size (for tests and diagnostics).
func (w *Windowed) Window() int { return w.ctl.k }

// Observe implements Predictor.
func (w *Windowed) Observe(x float64) {
	if w.ok {
		w.ctl.update(x, w.fc)
	}
	w.hist.push(x)
	k := min(w.ctl.k, w.hist.n)
	w.scratch = w.hist.tail(w.scratch[:0], k)
	if w.median {
		w.fc = median(w.scratch)
	} else {
		w.fc = mean(w.scratch)
	}
	w.ok = true
}

// Forecast implements Predictor.
func (w *Windowed) Forecast() (float64, bool) { return w.fc, w.ok }

// SES is simple exponential smoothing, Eq. 5.3: F(t) = α·A(t−1) + (1−α)·F(t−1),
// with F initialised to the first value. α is chosen on the history: every α
// of the grid is run in parallel, and the forecast comes from the one whose
// discounted sum of absolute one-step errors is lowest (ties to the smaller
// α). This is the thesis's "short parameter sweep on the training data" done
// online, so that it never sees the future.
type SES struct {
	alphas   []float64
	discount float64
	level    []float64
	err      []float64
	best     int
	ok       bool
}

// NewSES returns an SES predictor sweeping cfg.Alphas.
func NewSES(cfg PredictorConfig) *SES {
	return &SES{
		alphas:   slices.Clone(cfg.Alphas),
		discount: cfg.Discount,
		level:    make([]float64, len(cfg.Alphas)),
		err:      make([]float64, len(cfg.Alphas)),
	}
}

// Name implements Predictor.
func (s *SES) Name() string { return NameSES }

// Alpha is the smoothing factor currently chosen.
func (s *SES) Alpha() float64 { return s.alphas[s.best] }

// Observe implements Predictor.
func (s *SES) Observe(x float64) {
	if !s.ok {
		for i := range s.level {
			s.level[i] = x
		}
		s.ok = true
		return
	}
	for i, a := range s.alphas {
		s.err[i] = s.discount*s.err[i] + math.Abs(x-s.level[i])
		s.level[i] = a*x + (1-a)*s.level[i]
	}
	best := 0
	for i := range s.err {
		if s.err[i] < s.err[best] {
			best = i
		}
	}
	s.best = best
}

// Forecast implements Predictor.
func (s *SES) Forecast() (float64, bool) {
	if !s.ok {
		return 0, false
	}
	return s.level[s.best], true
}

// median returns the median of xs (the mean of the two middle values for an
// even count). It reorders xs.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// mean returns the arithmetic mean of xs.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
