package forecast

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Selection is the error measure by which a partition picks its predictor:
// the one with the lowest discounted sum of this error over its one-step
// forecasts (discount PredictorConfig.Discount).
type Selection int

// The selection measures.
const (
	// SelectMAE uses the absolute error |actual − forecast|, as the thesis's
	// Percent Best does (MAE, §5.2.3).
	SelectMAE Selection = iota
	// SelectAPE uses the absolute percentage error |actual − forecast|/actual.
	SelectAPE
	// SelectLog uses |log(forecast/actual)|, a symmetric scale-free error.
	SelectLog
)

var selectionNames = []string{"mae", "ape", "log"}

// String returns "mae", "ape" or "log".
func (s Selection) String() string {
	if s >= 0 && int(s) < len(selectionNames) {
		return selectionNames[s]
	}
	return fmt.Sprintf("selection(%d)", int(s))
}

// ParseSelection parses the String form of a Selection.
func ParseSelection(text string) (Selection, error) {
	i := slices.Index(selectionNames, strings.ToLower(strings.TrimSpace(text)))
	if i < 0 {
		return 0, errorf("unknown selection %q (want mae, ape or log)", text)
	}
	return Selection(i), nil
}

// Config parametrises a Forecaster. Start from DefaultConfig; a Config must
// not be changed after it has been passed to New.
type Config struct {
	// Search parametrises the automated partition search and the time keys
	// (Search.Epoch).
	Search SearchConfig
	// Predictor parametrises the predictors.
	Predictor PredictorConfig
	// Predictors names the predictors each partition runs (see
	// PredictorNames); nil means all five.
	Predictors []string
	// SelectBy is the error measure that picks a partition's predictor.
	// The default, SelectLog, is scale-free and symmetric; MAE (the
	// thesis's measure for Percent Best) gives MdAPEs within a few points
	// (KTH 0.41 vs 0.40, HPC2N 0.70 vs 0.67).
	SelectBy Selection
	// Chain is the fallback chain of partitionings, finest first, the root
	// ("all jobs") implicit at its end. With NoSearch it is used for the
	// whole run (an empty Chain then means no partitioning at all: the
	// "unpartitioned" forecast). Without NoSearch it is only the chain used
	// before the first search; the search then replaces it.
	Chain []AttrSet
	// NoSearch disables the periodic partition search.
	NoSearch bool
	// SearchAfter is the number of completions after which the partition
	// search first runs; it re-runs whenever the history has grown by the
	// factor SearchGrowth (> 1) since the last search. Each search sees only
	// the completions observed so far.
	SearchAfter  int
	SearchGrowth float64
	// MinHistory is the number of completions a partition needs for its
	// forecast to be used; a thinner partition falls back to the next
	// coarser partitioning of the chain. The root is used from its first
	// completion. Below that (no completion at all) the forecast is the
	// user's estimate (cold start).
	MinHistory int
	// ErrorWindow is the number of recent relative forecast errors each
	// partition keeps for RatioSamples.
	ErrorWindow int
	// MinErrors is the number of recent errors a partition needs for its
	// errors to be used by RatioSamples; a partition with fewer falls back
	// to the next coarser one that has enough (else the one with most).
	MinErrors int
	// CapAtEstimate caps every forecast at the user's estimate, when there
	// is one: batch systems kill a job at its requested time, so a forecast
	// beyond it cannot be right.
	CapAtEstimate bool

	predictors  []string // resolved Predictors
	defaultPred int      // predictor used before any error is known: the windowed mean
}

// DefaultConfig returns the configuration used unless told otherwise.
func DefaultConfig() Config {
	return Config{
		Search:        DefaultSearchConfig(),
		Predictor:     DefaultPredictorConfig(),
		SelectBy:      SelectLog,
		SearchAfter:   200,
		SearchGrowth:  1.5,
		MinHistory:    2,
		ErrorWindow:   100,
		MinErrors:     20,
		CapAtEstimate: true,
	}
}

// Validate checks the ranges documented on the fields; errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	if err := c.Search.Validate(); err != nil {
		return err
	}
	if err := c.Predictor.validate(); err != nil {
		return err
	}
	for _, n := range c.Predictors {
		if !slices.Contains(PredictorNames(), n) {
			return errorf("unknown predictor %q", n)
		}
	}
	if c.Predictors != nil && len(c.Predictors) == 0 {
		return errorf("Predictors is empty")
	}
	if c.SelectBy < 0 || int(c.SelectBy) >= len(selectionNames) {
		return errorf("unknown selection %d", c.SelectBy)
	}
	switch {
	case c.SearchAfter < 1:
		return errorf("SearchAfter %d must be >= 1", c.SearchAfter)
	case !(c.SearchGrowth > 1):
		return errorf("SearchGrowth %v must be > 1", c.SearchGrowth)
	case c.MinHistory < 1:
		return errorf("MinHistory %d must be >= 1", c.MinHistory)
	case c.ErrorWindow < 1:
		return errorf("ErrorWindow %d must be >= 1", c.ErrorWindow)
	case c.MinErrors < 1 || c.MinErrors > c.ErrorWindow:
		return errorf("MinErrors %d must be in [1, ErrorWindow]", c.MinErrors)
	}
	for _, s := range c.Chain {
		if s == 0 || s>>numAttrs != 0 {
			return errorf("chain element %d is not a non-empty attribute set", s)
		}
	}
	return nil
}

// level is one partitioning of the chain with its partitions.
type level struct {
	set   AttrSet
	parts map[key]*partition
}

// Forecaster predicts job runtimes from the history of completed jobs,
// partitioned by attributes known at submission.
//
// # Time and look-ahead
//
// The history is fed completion events, in time order, with Observe. A
// prediction at time now (Predict) sees exactly the completions observed so
// far, and refuses to run (ErrLookAhead) if one of them ended after now. A
// completion at time t counts for predictions at t: a driver processes the
// completions of an instant before its submissions (Evaluate does, except
// that a job's own completion is never processed before its submission).
// Nothing else is used: no job's runtime is read before its completion has
// been observed, and the partition search only ever sees the observed
// history.
//
// A Forecaster is not safe for concurrent use; it is driven by a single
// event loop.
type Forecaster struct {
	cfg        Config
	levels     []*level // chain, finest first, then the root
	history    []Job    // observed completions, in order
	lastEnd    int64
	nextSearch int
	last       *SearchResult
	searches   int
}

// New returns an empty Forecaster. It returns an error wrapping
// ErrInvalidConfig if cfg does not validate.
func New(cfg Config) (*Forecaster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new forecaster: %w", err)
	}
	cfg.predictors = cfg.Predictors
	if cfg.predictors == nil {
		cfg.predictors = PredictorNames()
	}
	cfg.predictors = slices.Clone(cfg.predictors)
	cfg.defaultPred = max(0, slices.Index(cfg.predictors, NameMean))
	cfg.Chain = slices.Clone(cfg.Chain)
	f := &Forecaster{cfg: cfg, nextSearch: cfg.SearchAfter, lastEnd: math.MinInt64}
	f.setChain(cfg.Chain)
	return f, nil
}

// Chain returns the current fallback chain, finest first, without the root.
// The slice is a copy.
func (f *Forecaster) Chain() []AttrSet {
	out := make([]AttrSet, 0, len(f.levels)-1)
	for _, l := range f.levels[:len(f.levels)-1] {
		out = append(out, l.set)
	}
	return out
}

// LastSearch returns the result of the latest partition search, nil if none
// has run yet. The result is shared: do not modify it.
func (f *Forecaster) LastSearch() *SearchResult { return f.last }

// Searches is the number of partition searches run so far.
func (f *Forecaster) Searches() int { return f.searches }

// Completed is the number of completions observed.
func (f *Forecaster) Completed() int { return len(f.history) }

// Observe feeds the completion of j at time j.End. Completions must come in
// non-decreasing End order (ErrOutOfOrder otherwise). A job with a negative
// (unknown) runtime is ignored; runtimes of 0 s are kept and counted as 1 s.
func (f *Forecaster) Observe(j Job) error {
	if j.Runtime < 0 {
		return nil
	}
	if j.End < f.lastEnd {
		return fmt.Errorf("observe job %d ending at %d after %d: %w", j.ID, j.End, f.lastEnd, ErrOutOfOrder)
	}
	f.lastEnd = j.End
	f.history = append(f.history, j)
	x := runtimeValue(j.Runtime)
	for _, l := range f.levels {
		f.part(l, &j, true).observe(x, &f.cfg)
	}
	if !f.cfg.NoSearch && len(f.history) >= f.nextSearch {
		f.research()
	}
	return nil
}

// research runs the partition search on the observed history and installs
// its chain.
func (f *Forecaster) research() {
	hist := make([]*Job, len(f.history))
	for i := range f.history {
		hist[i] = &f.history[i]
	}
	res := search(hist, f.cfg.Search)
	f.last = res
	f.searches++
	f.nextSearch = int(math.Ceil(float64(len(f.history)) * f.cfg.SearchGrowth))
	if !slices.Equal(res.Chain, f.Chain()) {
		f.setChain(res.Chain)
	}
}

// setChain installs a chain, keeping the levels it shares with the current
// one and rebuilding new ones by replaying the observed history.
func (f *Forecaster) setChain(chain []AttrSet) {
	old := map[AttrSet]*level{}
	for _, l := range f.levels {
		old[l.set] = l
	}
	levels := make([]*level, 0, len(chain)+1)
	for _, s := range append(slices.Clone(chain), 0) {
		if l, ok := old[s]; ok {
			levels = append(levels, l)
			continue
		}
		l := &level{set: s, parts: map[key]*partition{}}
		for i := range f.history {
			j := &f.history[i]
			f.part(l, j, true).observe(runtimeValue(j.Runtime), &f.cfg)
		}
		levels = append(levels, l)
	}
	f.levels = levels
}

// part returns j's partition in level l, creating it if create is set (nil
// otherwise when absent).
func (f *Forecaster) part(l *level, j *Job, create bool) *partition {
	k := keyOf(l.set, j, f.cfg.Search.Epoch)
	p := l.parts[k]
	if p == nil && create {
		p = newPartition(&f.cfg)
		l.parts[k] = p
	}
	return p
}

// Prediction is a runtime forecast for one job.
type Prediction struct {
	// Runtime is the forecast in whole seconds (>= 1).
	Runtime int64
	// Value is the unrounded forecast, after capping.
	Value float64
	// Predictor is the name of the predictor that made it; empty on a cold
	// start.
	Predictor string
	// Attrs is the partitioning the forecast came from, Partition the key
	// of the partition ("user=3,estimate=23"; "all" for the root), History
	// its number of completions. Empty on a cold start.
	Attrs     AttrSet
	Partition string
	History   int
	// ColdStart is set when no partition of the job had any history: the
	// forecast is the user's estimate.
	ColdStart bool
	// Capped is set when the forecast was cut to the user's estimate.
	Capped bool
}

// Predict forecasts the runtime of j, submitted at time now, from the
// completions observed so far: the forecast of the selected predictor of the
// finest partition of j (along the chain) with at least MinHistory
// completions, capped at j's estimate if CapAtEstimate. It returns an error
// wrapping ErrLookAhead if a completion after now has been observed, and
// ErrNoHistory when nothing has been observed and j has no estimate.
func (f *Forecaster) Predict(j Job, now int64) (Prediction, error) {
	if now < f.lastEnd {
		return Prediction{}, fmt.Errorf("predict job %d at %d, completions seen up to %d: %w", j.ID, now, f.lastEnd, ErrLookAhead)
	}
	li, p := f.lookup(&j)
	if p == nil {
		if j.Estimate > 0 {
			return Prediction{Runtime: j.Estimate, Value: float64(j.Estimate), ColdStart: true}, nil
		}
		return Prediction{}, fmt.Errorf("predict job %d: %w", j.ID, ErrNoHistory)
	}
	v := p.forecast()
	pr := Prediction{
		Predictor: f.cfg.predictors[p.best],
		Attrs:     f.levels[li].set,
		Partition: keyOf(f.levels[li].set, &j, f.cfg.Search.Epoch).String(),
		History:   p.n,
	}
	pr.Value, pr.Capped = f.capped(v, &j)
	pr.Runtime = max(1, int64(math.Round(pr.Value)))
	return pr, nil
}

// capped applies CapAtEstimate.
func (f *Forecaster) capped(v float64, j *Job) (float64, bool) {
	if f.cfg.CapAtEstimate && j.Estimate > 0 && v > float64(j.Estimate) {
		return float64(j.Estimate), true
	}
	return v, false
}

// lookup returns the index of the level and the partition that predict j:
// the finest with enough history. (-1, nil) when there is none.
func (f *Forecaster) lookup(j *Job) (int, *partition) {
	last := len(f.levels) - 1
	for i, l := range f.levels {
		p := f.part(l, j, false)
		if p == nil {
			continue
		}
		if p.n >= f.cfg.MinHistory || (i == last && p.n > 0) {
			return i, p
		}
	}
	return -1, nil
}

// RatioSamples returns samples of the distribution of the ratio
// actual/estimate of j's runtime, given the completions observed so far: with
// F the (uncapped) forecast of Predict and e_i the recent relative errors
// (actual − forecast)/forecast of the one-step forecasts of j's partition,
// the samples are F·(1+e_i)/estimate, oldest error first. The errors come
// from the partition that makes the forecast, or, when it has fewer than
// MinErrors of them, from the next coarser partition of j that has (else the
// one with most). This distribution is an extension of the thesis, which
// used point forecasts only.
//
// Ratios may exceed 1 (a job running past its estimate); a consumer building
// a histogram over [0, 1] must clip. It returns nil when j has no estimate or
// nothing has been observed. The caller owns the returned slice. Unlike
// Predict it does not check the time: call it at the instant of a Predict.
func (f *Forecaster) RatioSamples(j Job) []float64 {
	if j.Estimate <= 0 {
		return nil
	}
	li, p := f.lookup(&j)
	if p == nil {
		return nil
	}
	v := p.forecast()
	src := p
	for i := li; i < len(f.levels); i++ {
		q := f.part(f.levels[i], &j, false)
		if q == nil {
			continue
		}
		if q.errs.n >= f.cfg.MinErrors {
			src = q
			break
		}
		if q.errs.n > src.errs.n {
			src = q
		}
	}
	if src.errs.n == 0 {
		return nil
	}
	out := src.errs.tail(make([]float64, 0, src.errs.n), src.errs.n)
	est := float64(j.Estimate)
	for i, e := range out {
		out[i] = v * (1 + e) / est
	}
	return out
}
