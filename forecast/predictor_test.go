package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
)

// smallWindows is a predictor configuration small enough to compute by hand.
func smallWindows() PredictorConfig {
	c := DefaultPredictorConfig()
	c.MinWindow, c.StartWindow, c.MaxWindow = 2, 3, 4
	c.ShrinkRatio = 2
	c.Discount = 1
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestWindowedHandComputed(t *testing.T) {
	tests := map[string]struct {
		median     bool
		series     []float64
		wantFc     float64 // forecast after the whole series
		wantWindow int
	}{
		// 100: fc 100. 100: e=0, first error, avg=0. 100: e=0<=avg, k=4.
		// 1000: e=0.9 > 2·0, k=2: median/mean of {100, 1000} = 550.
		"a level shift halves the window (median)": {median: true, series: []float64{100, 100, 100, 1000}, wantFc: 550, wantWindow: 2},
		"a level shift halves the window (mean)":   {series: []float64{100, 100, 100, 1000}, wantFc: 550, wantWindow: 2},
		// 10: fc 10. 20: e=0.5 first, avg .5, fc 15 (k=3 over 2 values).
		// 30: e=15/30=.5 <= avg: k=4, fc median{10,20,30}=20.
		"stable errors grow the window (median)": {median: true, series: []float64{10, 20, 30}, wantFc: 20, wantWindow: 4},
		// As above, then 1000: e=.98, not > 2·.5 and not <= .5: k stays 4;
		// median{10,20,30,1000} = 25, mean = 265.
		"a moderate error keeps the window (median)": {median: true, series: []float64{10, 20, 30, 1000}, wantFc: 25, wantWindow: 4},
		"a moderate error keeps the window (mean)":   {series: []float64{10, 20, 30, 1000}, wantFc: 265, wantWindow: 4},
		"a single value is its own forecast":         {median: true, series: []float64{42}, wantFc: 42, wantWindow: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var w *Windowed
			if tc.median {
				w = NewMedian(smallWindows())
			} else {
				w = NewMean(smallWindows())
			}
			if _, ok := w.Forecast(); ok {
				t.Fatal("forecast before any observation")
			}
			for _, x := range tc.series {
				w.Observe(x)
			}
			fc, ok := w.Forecast()
			if !ok || !near(fc, tc.wantFc) || w.Window() != tc.wantWindow {
				t.Errorf("forecast %v (ok %v) window %d, want %v window %d", fc, ok, w.Window(), tc.wantFc, tc.wantWindow)
			}
		})
	}
}

func TestSESHandComputed(t *testing.T) {
	tests := map[string]struct {
		series    []float64
		wantFc    float64
		wantAlpha float64
	}{
		// Levels after 10, 20: α=.5 → 15, α=1 → 20; errors 10 and 10 tie, so
		// the smaller α wins.
		"a tie goes to the smaller alpha": {series: []float64{10, 20}, wantFc: 15, wantAlpha: 0.5},
		// Then 10: errors .5: 10+5=15, 1: 10+10=20; level .5: 12.5.
		"noise prefers smoothing": {series: []float64{10, 20, 10}, wantFc: 12.5, wantAlpha: 0.5},
		// 10,20,30,40: α=1 errors 10+10+10=30; α=.5: levels 15, 22.5,
		// errors 10+15+17.5=42.5. α=1 forecasts the last value.
		"a trend prefers the last value": {series: []float64{10, 20, 30, 40}, wantFc: 40, wantAlpha: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := smallWindows()
			cfg.Alphas = []float64{0.5, 1}
			s := NewSES(cfg)
			for _, x := range tc.series {
				s.Observe(x)
			}
			fc, ok := s.Forecast()
			if !ok || !near(fc, tc.wantFc) || s.Alpha() != tc.wantAlpha {
				t.Errorf("forecast %v alpha %v, want %v alpha %v", fc, s.Alpha(), tc.wantFc, tc.wantAlpha)
			}
		})
	}
}

func TestDurbinLevinsonHandComputed(t *testing.T) {
	tests := map[string]struct {
		r         []float64
		wantPACF  []float64
		wantCoefs []float64
	}{
		// AR(1) with φ = .5: ρ_k = .5^k, the PACF cuts off after lag 1.
		"AR(1)": {r: []float64{1, 0.5, 0.25}, wantPACF: []float64{0.5, 0}, wantCoefs: []float64{0.5, 0}},
		// k=1: a=.8, v=.36; k=2: a=(.5−.64)/.36=−7/18, φ1=.8+.8·7/18=10/9.
		"two lags": {r: []float64{1, 0.8, 0.5}, wantPACF: []float64{0.8, -7.0 / 18}, wantCoefs: []float64{10.0 / 9, -7.0 / 18}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pacf, phi := durbinLevinson(tc.r)
			for i := range tc.wantPACF {
				if !near(pacf[i], tc.wantPACF[i]) || !near(phi[i], tc.wantCoefs[i]) {
					t.Fatalf("pacf %v phi %v, want %v %v", pacf, phi, tc.wantPACF, tc.wantCoefs)
				}
			}
		})
	}
}

func TestForwardBackwardHandComputed(t *testing.T) {
	tests := map[string]struct {
		y    []float64
		p    int
		want []float64
	}{
		// y_t = −y_{t−1} forwards and backwards: φ = −1 exactly.
		"alternating series": {y: []float64{1, -1, 1, -1, 1, -1, 1, -1}, p: 1, want: []float64{-1}},
		// Forward rows (y_{t-1} → y_t): (1→2), (2→1), (1→2); backward rows
		// (y_{t+1} → y_t): (2→1), (1→2), (2→1). Normal equation:
		// φ = Σ x·y / Σ x² = (2+2+2+2+2+2) / (1+4+1+4+1+4) = 12/15.
		"period two, not demeaned": {y: []float64{1, 2, 1, 2}, p: 1, want: []float64{0.8}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := fitARForwardBackward(tc.y, tc.p)
			if !ok || len(got) != len(tc.want) {
				t.Fatalf("got %v ok %v", got, ok)
			}
			for i := range got {
				if !near(got[i], tc.want[i]) {
					t.Errorf("φ = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestInvertible(t *testing.T) {
	tests := map[string]struct {
		theta []float64
		want  bool
	}{
		"no MA part":                      {nil, true},
		"MA(1) inside":                    {[]float64{0.5}, true},
		"MA(1) on the circle":             {[]float64{-1}, false},
		"MA(1) outside":                   {[]float64{1.2}, false},
		"MA(2) complex roots, modulus .9": {[]float64{1.034, 0.826}, true},
		"MA(2) Σ|θ|>1 but invertible":     {[]float64{-1.2, 0.5}, true},
		"MA(2) a root inside the circle":  {[]float64{0.5, -0.6}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := invertible(tc.theta); got != tc.want {
				t.Errorf("invertible(%v) = %v, want %v", tc.theta, got, tc.want)
			}
		})
	}
}

// simulate returns n values of the ARMA(1,1) process
// y_t = φ·y_{t−1} + e_t + θ·e_{t−1} around level mu, e ~ N(0, sd²).
func simulate(r *rand.Rand, n int, mu, phi, theta, sd float64) []float64 {
	out := make([]float64, n)
	var y1, e1 float64
	for i := range out {
		e := sd * r.NormFloat64()
		y := phi*y1 + e + theta*e1
		out[i] = mu + y
		y1, e1 = y, e
	}
	return out
}

func TestARRecoversAR1(t *testing.T) {
	cfg := DefaultPredictorConfig()
	cfg.FitWindow = 2000
	ar := NewAR(cfg)
	xs := simulate(rand.New(rand.NewPCG(1, 1)), 2000, 1000, 0.8, 0, 50)
	for _, x := range xs {
		ar.Observe(x)
	}
	if ar.Order() < 1 {
		t.Fatalf("order %d, want >= 1", ar.Order())
	}
	if c := ar.Coefficients(); math.Abs(c[0]-0.8) > 0.06 {
		t.Errorf("φ1 = %v, want ≈ 0.8 (coefficients %v)", c[0], c)
	}
	// The forecast is μ + Σφ_i (x_{n−i} − μ) on the latest values.
	fc, _ := ar.Forecast()
	want := ar.mu
	for i, c := range ar.phi {
		want += c * (xs[len(xs)-1-i] - ar.mu)
	}
	if !near(fc, want) {
		t.Errorf("forecast %v, want %v", fc, want)
	}
}

func TestARWhiteNoiseIsTheMean(t *testing.T) {
	// A constant series has no autocorrelation at all: order 0, the mean.
	ar := NewAR(DefaultPredictorConfig())
	for range 50 {
		ar.Observe(300)
	}
	if fc, _ := ar.Forecast(); ar.Order() != 0 || fc != 300 {
		t.Errorf("order %d forecast %v, want 0 and 300", ar.Order(), fc)
	}
}

func TestARMARecoversARMA11(t *testing.T) {
	xs := simulate(rand.New(rand.NewPCG(2, 2)), 3000, 0, 0.7, 0.4, 1)
	y := append([]float64(nil), xs...)
	demean(y)
	_, yw := pacfOrder(y, 10)
	phi, theta, ok := fitARMA(y, 1, 1, yw, nil)
	if !ok || math.Abs(phi[0]-0.7) > 0.05 || math.Abs(theta[0]-0.4) > 0.05 {
		t.Errorf("ARMA(1,1) fit φ=%v θ=%v ok=%v, want ≈ 0.7, 0.4", phi, theta, ok)
	}
}

func TestARMAPredictorTracksLevel(t *testing.T) {
	cfg := DefaultPredictorConfig()
	p := NewARMA(cfg)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range 300 {
		lvl := 100.0
		if i >= 150 {
			lvl = 1000
		}
		p.Observe(lvl * (1 + 0.05*r.NormFloat64()))
	}
	fc, ok := p.Forecast()
	if !ok || math.Abs(fc-1000) > 150 {
		t.Errorf("forecast %v after a level shift to 1000", fc)
	}
	if pp, q := p.Orders(); pp+q == 0 {
		t.Errorf("orders (%d, %d): the fit fell back to the mean", pp, q)
	}
}

func TestPredictorsOnAConstantSeries(t *testing.T) {
	for _, name := range PredictorNames() {
		t.Run(name, func(t *testing.T) {
			p := NewPredictor(name, DefaultPredictorConfig())
			if p.Name() != name {
				t.Fatalf("Name() = %q", p.Name())
			}
			for range 100 {
				p.Observe(7200)
			}
			if fc, ok := p.Forecast(); !ok || !near(fc, 7200) {
				t.Errorf("forecast %v, want 7200", fc)
			}
		})
	}
	if NewPredictor("oracle", DefaultPredictorConfig()) != nil {
		t.Error("unknown predictor name accepted")
	}
}

func TestPredictorsStayFiniteOnHeavyTails(t *testing.T) {
	// Log-normal runtimes with CV > 10 and runs of identical values, the
	// shape of real partitions: forecasts must stay finite, positive and
	// within the range seen.
	r := rand.New(rand.NewPCG(4, 4))
	for _, name := range PredictorNames() {
		p := NewPredictor(name, DefaultPredictorConfig())
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range 2000 {
			x := math.Round(math.Exp(6 + 2.5*r.NormFloat64()))
			if i%7 < 3 {
				x = 3600
			}
			x = math.Max(x, 1)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			p.Observe(x)
			fc, ok := p.Forecast()
			if !ok || math.IsNaN(fc) || fc < lo-1e-6 || fc > hi+1e-6 {
				t.Fatalf("%s: forecast %v outside [%v, %v] at %d", name, fc, lo, hi, i)
			}
		}
	}
}

func TestPredictorConfigValidate(t *testing.T) {
	bad := map[string]func(*PredictorConfig){
		"window order":  func(c *PredictorConfig) { c.StartWindow = c.MaxWindow + 1 },
		"shrink ratio":  func(c *PredictorConfig) { c.ShrinkRatio = 1 },
		"no alphas":     func(c *PredictorConfig) { c.Alphas = nil },
		"alpha zero":    func(c *PredictorConfig) { c.Alphas = []float64{0} },
		"discount":      func(c *PredictorConfig) { c.Discount = 0 },
		"fit window":    func(c *PredictorConfig) { c.FitWindow = 4 },
		"max lag":       func(c *PredictorConfig) { c.MaxLag = 0 },
		"refit every":   func(c *PredictorConfig) { c.RefitEvery = 0 },
		"min window 0":  func(c *PredictorConfig) { c.MinWindow = 0 },
		"discount > 1":  func(c *PredictorConfig) { c.Discount = 1.5 },
		"alpha above 1": func(c *PredictorConfig) { c.Alphas = []float64{1.5} },
	}
	if err := DefaultPredictorConfig().validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range bad {
		c := DefaultPredictorConfig()
		mutate(&c)
		if c.validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestARMAResidualsHandComputed(t *testing.T) {
	tests := map[string]struct {
		y, phi, theta, want []float64
	}{
		// ε0 = 1; ε1 = 2 − .5·1 − .5·1 = 1; ε2 = 3 − .5·2 − .5·1 = 1.5.
		"ARMA(1,1)": {y: []float64{1, 2, 3}, phi: []float64{0.5}, theta: []float64{0.5}, want: []float64{1, 1, 1.5}},
		// Pure MA(1), θ = −1: ε_t = y_t + ε_{t−1}, a running sum.
		"MA(1)": {y: []float64{1, 2, 3}, theta: []float64{-1}, want: []float64{1, 3, 6}},
		// No model: the residuals are the series.
		"mean only": {y: []float64{4, -4}, want: []float64{4, -4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := armaResiduals(tc.y, tc.phi, tc.theta, nil)
			for i := range tc.want {
				if !near(got[i], tc.want[i]) {
					t.Fatalf("residuals %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestHuberLossHandComputed(t *testing.T) {
	// c = 1: |0.5| → .125; |3| → 3 − .5 = 2.5; total 2.625. Without a
	// threshold: (.25 + 9)/2 = 4.625.
	eps := []float64{0.5, -3}
	if got := huberLoss(eps, 1); !near(got, 2.625) {
		t.Errorf("huber(c=1) = %v, want 2.625", got)
	}
	if got := huberLoss(eps, 0); !near(got, 4.625) {
		t.Errorf("squares = %v, want 4.625", got)
	}
}

func TestARMAForecastFormula(t *testing.T) {
	// The forecast is μ + Σφ_i (x_{n−i} − μ) + Σθ_j ε_{n−j} with the
	// residuals of the current fit.
	p := NewARMA(DefaultPredictorConfig())
	xs := simulate(rand.New(rand.NewPCG(5, 5)), 400, 5000, 0.6, 0.3, 300)
	for _, x := range xs {
		p.Observe(x)
	}
	if pp, q := p.Orders(); pp == 0 && q == 0 {
		t.Fatal("no ARMA fit on an ARMA(1,1) series")
	}
	want := p.mu
	for i, c := range p.phi {
		want += c * (xs[len(xs)-1-i] - p.mu)
	}
	for j, c := range p.theta {
		want += c * p.resid.last(j+1)
	}
	if fc, _ := p.Forecast(); !near(fc, clamp(want, p.lo, p.hi)) {
		t.Errorf("forecast %v, want %v", fc, want)
	}
}
