package forecast

import (
	"errors"
	"testing"
)

// fixed returns a configuration with a fixed chain and no search.
func fixed(chain ...AttrSet) Config {
	c := DefaultConfig()
	c.NoSearch = true
	c.Chain = chain
	return c
}

func mustNew(t *testing.T, cfg Config) *Forecaster {
	t.Helper()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustObserve(t *testing.T, f *Forecaster, jobs ...Job) {
	t.Helper()
	for _, j := range jobs {
		if err := f.Observe(j); err != nil {
			t.Fatal(err)
		}
	}
}

func TestColdStart(t *testing.T) {
	f := mustNew(t, DefaultConfig())
	p, err := f.Predict(Job{ID: 1, Estimate: 600}, 0)
	if err != nil || !p.ColdStart || p.Runtime != 600 || p.Predictor != "" {
		t.Errorf("cold start prediction %+v, %v; want the estimate 600", p, err)
	}
	if _, err := f.Predict(Job{ID: 2}, 0); !errors.Is(err, ErrNoHistory) {
		t.Errorf("no history, no estimate: err %v, want ErrNoHistory", err)
	}
	if s := f.RatioSamples(Job{ID: 1, Estimate: 600}); s != nil {
		t.Errorf("ratio samples before any completion: %v", s)
	}
}

func TestTimeOrderGuards(t *testing.T) {
	f := mustNew(t, DefaultConfig())
	mustObserve(t, f, Job{ID: 1, Submit: 0, End: 100, Runtime: 100})
	if _, err := f.Predict(Job{ID: 2, Estimate: 60}, 99); !errors.Is(err, ErrLookAhead) {
		t.Errorf("predict at 99 after a completion at 100: err %v, want ErrLookAhead", err)
	}
	if _, err := f.Predict(Job{ID: 2, Estimate: 60}, 100); err != nil {
		t.Errorf("a completion at t counts at t: %v", err)
	}
	if err := f.Observe(Job{ID: 3, End: 50, Runtime: 10}); !errors.Is(err, ErrOutOfOrder) {
		t.Errorf("completion out of order: err %v, want ErrOutOfOrder", err)
	}
	// Unknown runtimes never enter the history.
	mustObserve(t, f, Job{ID: 4, End: 200, Runtime: -1})
	if f.Completed() != 1 {
		t.Errorf("Completed() = %d, want 1", f.Completed())
	}
}

func TestFallbackToCoarserPartition(t *testing.T) {
	user := NewAttrSet(AttrUser)
	f := mustNew(t, fixed(user)) // MinHistory 2
	mustObserve(t, f,
		Job{ID: 1, User: 1, End: 10, Runtime: 100},
		Job{ID: 2, User: 2, End: 20, Runtime: 5000},
		Job{ID: 3, User: 2, End: 30, Runtime: 5000},
	)
	// User 1 has one completion: the root (all jobs) predicts.
	p, err := f.Predict(Job{ID: 4, User: 1, Estimate: 1e6}, 30)
	if err != nil || p.Attrs != 0 || p.Partition != "all" || p.History != 3 {
		t.Errorf("thin partition: %+v %v, want the root with 3 completions", p, err)
	}
	mustObserve(t, f, Job{ID: 5, User: 1, End: 40, Runtime: 100})
	p, err = f.Predict(Job{ID: 6, User: 1, Estimate: 1e6}, 40)
	if err != nil || p.Attrs != user || p.Partition != "user=1" || p.Runtime != 100 {
		t.Errorf("populated partition: %+v %v, want user=1 forecasting 100", p, err)
	}
	// A user never seen falls back to the root.
	if p, _ := f.Predict(Job{ID: 7, User: 9, Estimate: 1e6}, 40); p.Attrs != 0 {
		t.Errorf("unknown user predicted from %v", p.Attrs)
	}
}

func TestCapAtEstimate(t *testing.T) {
	f := mustNew(t, fixed())
	mustObserve(t, f, Job{End: 1, Runtime: 5000}, Job{End: 2, Runtime: 5000})
	p, _ := f.Predict(Job{Estimate: 600}, 2)
	if !p.Capped || p.Runtime != 600 {
		t.Errorf("prediction %+v, want capped at 600", p)
	}
	cfg := fixed()
	cfg.CapAtEstimate = false
	f = mustNew(t, cfg)
	mustObserve(t, f, Job{End: 1, Runtime: 5000}, Job{End: 2, Runtime: 5000})
	if p, _ := f.Predict(Job{Estimate: 600}, 2); p.Capped || p.Runtime != 5000 {
		t.Errorf("prediction %+v, want 5000 uncapped", p)
	}
}

func TestRatioSamplesHandComputed(t *testing.T) {
	cfg := fixed()
	cfg.Predictors = []string{NameMedian}
	cfg.MinErrors = 1
	f := mustNew(t, cfg)
	// After 100: forecast 100. Then 200: relative error (200−100)/100 = 1,
	// and the forecast becomes median{100, 200} = 150.
	mustObserve(t, f, Job{End: 1, Runtime: 100}, Job{End: 2, Runtime: 200})
	got := f.RatioSamples(Job{Estimate: 300})
	if len(got) != 1 || !near(got[0], 150*(1+1)/300.0) {
		t.Errorf("RatioSamples = %v, want [1]", got)
	}
	if f.RatioSamples(Job{}) != nil {
		t.Error("samples for a job without estimate")
	}
}

func TestRatioSamplesFallBackToCoarserErrors(t *testing.T) {
	cfg := fixed(NewAttrSet(AttrUser))
	cfg.MinErrors = 3
	cfg.MinHistory = 1
	f := mustNew(t, cfg)
	for i := range 10 {
		mustObserve(t, f, Job{User: 1, End: int64(i), Runtime: 1000 + int64(i)})
	}
	mustObserve(t, f, Job{User: 2, End: 20, Runtime: 50}, Job{User: 2, End: 21, Runtime: 60})
	// User 2 has one error, fewer than MinErrors: the root's errors are used.
	if s := f.RatioSamples(Job{User: 2, Estimate: 100}); len(s) != 11 {
		t.Errorf("%d samples, want the root's 11", len(s))
	}
}

func TestSearchInstallsChain(t *testing.T) {
	// Runtime is a function of the user; hour and estimate are noise.
	cfg := DefaultConfig()
	cfg.SearchAfter = 100
	cfg.Search.Attrs = []Attr{AttrUser, AttrHour}
	f := mustNew(t, cfg)
	var t0 int64
	for i := range 400 {
		u := int64(i % 4)
		t0 += 97
		mustObserve(t, f, Job{ID: int64(i), User: u, Submit: t0 - 50, End: t0, Runtime: 100 * (u + 1) * (u + 1)})
	}
	if f.Searches() == 0 {
		t.Fatal("no search ran")
	}
	if ch := f.Chain(); len(ch) != 1 || ch[0] != NewAttrSet(AttrUser) {
		t.Errorf("chain %v, want [user]", ch)
	}
	p, _ := f.Predict(Job{User: 3, Estimate: 1e6}, t0)
	if p.Runtime != 1600 {
		t.Errorf("prediction %+v, want 1600", p)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := map[string]func(*Config){
		"unknown predictor":  func(c *Config) { c.Predictors = []string{"oracle"} },
		"empty predictors":   func(c *Config) { c.Predictors = []string{} },
		"selection":          func(c *Config) { c.SelectBy = 7 },
		"search after":       func(c *Config) { c.SearchAfter = 0 },
		"search growth":      func(c *Config) { c.SearchGrowth = 1 },
		"min history":        func(c *Config) { c.MinHistory = 0 },
		"error window":       func(c *Config) { c.ErrorWindow = 0 },
		"min errors":         func(c *Config) { c.MinErrors = c.ErrorWindow + 1 },
		"root in chain":      func(c *Config) { c.Chain = []AttrSet{0} },
		"search min samples": func(c *Config) { c.Search.MinSamples = 1 },
		"predictor config":   func(c *Config) { c.Predictor.MaxLag = 0 },
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range bad {
		c := DefaultConfig()
		mutate(&c)
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestSelectionParse(t *testing.T) {
	for _, s := range []Selection{SelectMAE, SelectAPE, SelectLog} {
		got, err := ParseSelection(s.String())
		if err != nil || got != s {
			t.Errorf("round trip of %v: %v %v", s, got, err)
		}
	}
	if _, err := ParseSelection("rmse"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("rmse accepted: %v", err)
	}
}
