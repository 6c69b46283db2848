package sim

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/overbook"
)

// OnlineForecast drives a forecast.Forecaster from a replay, without
// look-ahead: Run tells it of every job that finishes, when it finishes
// (Finished), and asks it for a job's forecast at the job's submission
// (Predict), after the completions of that instant. It is a Predictor, for
// the LTTR policy's key.
//
// It is also an overbook.RatioStats, for the SLA experiments' overbooking
// (SLAConfig.StatsSource): when built with ratios, Predict also fixes the
// job's distribution of actual/estimate at its submission, a 101-bin
// histogram of the forecaster's RatioSamples (ratios >= 1 clipped into bin
// 100), which Histogram then serves for the job's whole life. A job that has
// no samples (cold start), or that the replay never submitted, gets the
// empty histogram: the conservative prior "every job uses its full
// estimate", which never overbooks.
//
// Not safe for concurrent use: one replay owns it.
type OnlineForecast struct {
	f      *forecast.Forecaster
	offset int64 // added to replay times: forecaster time = replay time + offset
	ratios bool
	hists  map[int64]*overbook.Histogram
	prior  overbook.Histogram // empty: the conservative prior
	err    error
}

var (
	_ Predictor           = (*OnlineForecast)(nil)
	_ overbook.RatioStats = (*OnlineForecast)(nil)
)

// NewOnlineForecast returns an OnlineForecast with configuration cfg that
// has already learnt history, jobs that completed before the replay. A
// replay Job has no wait time, so the history is fed in order of submit +
// runtime, as if each job had started at once (the whole history is known
// before the replay; only the order in which the predictors see it depends
// on this). With a history, the replay's clock, which must then start at 0
// (a prepared SLA run), is shifted to begin at the history's last
// completion, so that the forecaster's time stays in order; without one,
// replay time is forecaster time. ratios makes Predict fix each job's ratio
// histogram (for Histogram); the LTTR replay does not need it.
func NewOnlineForecast(cfg forecast.Config, history []Job, ratios bool) (*OnlineForecast, error) {
	f, err := forecast.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	o := &OnlineForecast{f: f, ratios: ratios}
	if ratios {
		o.hists = make(map[int64]*overbook.Histogram)
	}
	if len(history) == 0 {
		return o, nil
	}
	done := make([]forecast.Job, len(history))
	for i := range history {
		j := &history[i]
		done[i] = forecastJob(j, 0)
		done[i].Runtime = j.Runtime
		done[i].End = j.Submit + max(j.Runtime, 0)
	}
	slices.SortStableFunc(done, func(a, b forecast.Job) int { return cmp.Compare(a.End, b.End) })
	for _, j := range done {
		if err := f.Observe(j); err != nil {
			return nil, fmt.Errorf("sim: forecast history: %w", err)
		}
	}
	o.offset = done[len(done)-1].End
	return o, nil
}

// Forecaster returns the underlying forecaster (for reports). Do not feed
// it.
func (o *OnlineForecast) Forecaster() *forecast.Forecaster { return o.f }

// Err returns the first error the forecaster reported while learning, nil
// if none (Run feeds completions in time order, so there should be none).
func (o *OnlineForecast) Err() error { return o.err }

// Predict forecasts j's runtime at its submission now from the completions
// seen so far: the forecaster's point forecast (the user's estimate on a cold
// start), in whole seconds. It reads j's attributes only, never its runtime.
func (o *OnlineForecast) Predict(now int64, j *Job) int64 {
	fj := forecastJob(j, o.offset)
	p, err := o.f.Predict(fj, now+o.offset)
	if o.ratios {
		o.hists[j.ID] = RatioHistogram(o.f.RatioSamples(fj))
	}
	if err != nil {
		if o.err == nil {
			o.err = err
		}
		return 0
	}
	return p.Runtime
}

// Finished feeds the completion of r at now: its actual runtime (as the
// histogram statistics learn it), and forgets its ratio histogram.
func (o *OnlineForecast) Finished(now int64, r *Record) {
	fj := forecastJob(&r.Job, o.offset)
	fj.Runtime, fj.End = r.Runtime, now+o.offset
	if err := o.f.Observe(fj); err != nil && o.err == nil {
		o.err = err
	}
	if o.ratios {
		delete(o.hists, r.ID)
	}
}

// Histogram returns the ratio histogram fixed at job j.ID's submission, or
// the conservative prior (empty) if there is none. Read-only.
func (o *OnlineForecast) Histogram(j overbook.JobInfo) *overbook.Histogram {
	if h := o.hists[j.ID]; h != nil {
		return h
	}
	return &o.prior
}

// Record does nothing: an OnlineForecast learns from the replay's
// completion events (Finished), which carry their time, and learns every
// completion whatever the admission's Learn says.
func (o *OnlineForecast) Record(overbook.JobInfo, overbook.Observation) error { return nil }

// RatioHistogram builds the 101-bin histogram of ratio samples
// (overbook.Histogram.AddRatio: bin floor(100·ratio), every ratio >= 1 in
// bin 100, negative ones in bin 0; NaNs are skipped). No samples give the
// empty histogram, read as the conservative prior.
func RatioHistogram(samples []float64) *overbook.Histogram {
	h := new(overbook.Histogram)
	for _, r := range samples {
		h.AddRatio(r) //nolint:errcheck // only NaN fails, and is skipped
	}
	return h
}

// Oracle is a Predictor that knows every job's actual runtime: the perfect
// forecast, the reference for what better forecasts could give LTTR (on
// KTH it does not give the best order: docs/forecasting.md). No scheduler
// could make it; report it as an oracle.
type Oracle struct{}

// Predict returns j's actual runtime (at least 1 s, since 0 means none).
func (Oracle) Predict(_ int64, j *Job) int64 { return max(j.Runtime, 1) }

// Finished does nothing.
func (Oracle) Finished(int64, *Record) {}

// forecastJob is j as the forecaster sees it at submission: attributes
// only, its runtime unknown; times shifted by offset.
func forecastJob(j *Job, offset int64) forecast.Job {
	return forecast.Job{
		ID:       j.ID,
		Submit:   j.Submit + offset,
		End:      j.Submit + offset,
		Runtime:  -1,
		Estimate: j.Estimate,
		User:     idValue(j.User),
		Group:    idValue(j.Group),
		App:      idValue(j.App),
		Queue:    idValue(j.Queue),
		Procs:    int64(j.Procs),
	}
}

// idValue turns a replay's id string back into the forecaster's number:
// "" is unknown (-1), a decimal number below 2^61 is itself, any other name
// a hash of it in [2^61, 2^62) (so distinct names stay distinct keys, with
// overwhelming probability, and never meet a number).
func idValue(s string) int64 {
	if s == "" {
		return -1
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= 0 && v < 1<<61 {
		return v
	}
	h := fnv.New64a()
	h.Write([]byte(s)) //nolint:errcheck // never fails
	return int64(h.Sum64()>>3) | 1<<61
}
