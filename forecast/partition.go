package forecast

import "math"

// partition is the history of one partition (one key value of one
// attribute set): its predictors, which of them is selected, and its recent
// relative forecast errors.
type partition struct {
	n     int // completions observed
	preds []Predictor
	score []float64 // discounted error of each predictor's one-step forecasts
	best  int       // index of the selected predictor
	// errs holds the relative errors (actual − forecast) / forecast of the
	// selected predictor's one-step forecasts, most recent last.
	errs ring
}

// newPartition returns an empty partition running the named predictors.
func newPartition(cfg *Config) *partition {
	p := &partition{
		preds: make([]Predictor, len(cfg.predictors)),
		score: make([]float64, len(cfg.predictors)),
		errs:  newRing(cfg.ErrorWindow),
		best:  cfg.defaultPred,
	}
	for i, name := range cfg.predictors {
		p.preds[i] = NewPredictor(name, cfg.Predictor)
	}
	return p
}

// selectionError is the error a forecast f of the actual value x adds to a
// predictor's selection score.
func selectionError(sel Selection, x, f float64) float64 {
	switch sel {
	case SelectAPE:
		return math.Abs(x-f) / x
	case SelectLog:
		return math.Abs(math.Log(f / x))
	}
	return math.Abs(x - f)
}

// observe feeds the next completed runtime x (already floored at 1 s).
func (p *partition) observe(x float64, cfg *Config) {
	if p.n > 0 {
		if f, ok := p.preds[p.best].Forecast(); ok && f > 0 {
			p.errs.push((x - f) / f)
		}
		d := cfg.Predictor.Discount
		for i, pr := range p.preds {
			f, _ := pr.Forecast()
			p.score[i] = d*p.score[i] + selectionError(cfg.SelectBy, x, math.Max(f, 1))
		}
		best := 0
		for i := range p.score {
			if p.score[i] < p.score[best] {
				best = i
			}
		}
		p.best = best
	}
	for _, pr := range p.preds {
		pr.Observe(x)
	}
	p.n++
}

// forecast returns the selected predictor's forecast, floored at 1 s.
func (p *partition) forecast() float64 {
	f, _ := p.preds[p.best].Forecast()
	return math.Max(f, 1)
}
