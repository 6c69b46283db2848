package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// Strategy is one of the four SLA strategies of the overbooking thesis
// (Birkenheuer 2012, §3.6).
type Strategy int

const (
	// Backfill is conservative backfilling as the thesis's baseline A: every
	// job reserved in full at its earliest fit, and processors held until
	// the end of a reservation even when the job ends early.
	Backfill Strategy = iota
	// HeuristicPlan is the thesis's baseline B: full-estimate placement,
	// re-planning on every job end (later reservations move earlier).
	HeuristicPlan
	// ComprehensiveOverbook overbooks with the comprehensive PoF
	// (predecessors' end-time distributions chained) and re-plans.
	ComprehensiveOverbook
	// HeuristicOverbook overbooks with the heuristic PoF and re-plans on
	// every job end; overbooked jobs may grow back to their estimate.
	HeuristicOverbook
	// Libra is Yeo's (2008) deadline-proportional-share admission on
	// time-shared nodes (package libra): the baseline of the two below.
	Libra
	// LibraSLA is Yeo's penalty-aware admission (returns, HARD and SOFT
	// deadlines).
	LibraSLA
	// LibraRiskD is Yeo's zero-risk-of-deadline-delay admission.
	LibraRiskD
)

var strategyNames = [...]string{"backfill", "heuristic-plan", "comprehensive-overbook", "heuristic-overbook", "libra", "libra-sla", "libra-riskd"}

func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy parses a strategy name as String writes it.
func ParseStrategy(name string) (Strategy, error) {
	for i, n := range strategyNames {
		if strings.EqualFold(name, n) {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("strategy %q: want one of %s: %w", name, strings.Join(strategyNames[:], ", "), ErrBadConfig)
}

// Overbooks reports whether the strategy overbooks.
func (s Strategy) Overbooks() bool { return s == ComprehensiveOverbook || s == HeuristicOverbook }

// Baseline is the non-overbooking strategy the thesis compares s with.
func (s Strategy) Baseline() Strategy {
	switch s {
	case ComprehensiveOverbook:
		return Backfill
	case HeuristicOverbook:
		return HeuristicPlan
	case LibraSLA, LibraRiskD:
		return Libra
	}
	return s
}

// StatsSource selects where the overbooking strategies of an SLA
// experiment take a job's distribution of actual/estimated runtime from.
type StatsSource int

const (
	// StatsHistogram: the thesis's per-class histograms (overbook.Stats),
	// trained on the training jobs; with Learn they also learn each run's
	// completions.
	StatsHistogram StatsSource = iota
	// StatsForecast: a per-job histogram of runtime-forecast ratio samples
	// (OnlineForecast), fixed at the job's submission. Each run's
	// forecaster learns the training jobs, then every completion of the
	// run as it happens, whatever Learn says.
	StatsForecast
)

var statsSourceNames = [...]string{"histogram", "forecast"}

func (s StatsSource) String() string {
	if s >= 0 && int(s) < len(statsSourceNames) {
		return statsSourceNames[s]
	}
	return fmt.Sprintf("StatsSource(%d)", int(s))
}

// ParseStatsSource parses a statistics source name as String writes it.
func ParseStatsSource(name string) (StatsSource, error) {
	for i, n := range statsSourceNames {
		if strings.EqualFold(name, n) {
			return StatsSource(i), nil
		}
	}
	return 0, fmt.Errorf("statistics %q: want one of %s: %w", name, strings.Join(statsSourceNames[:], ", "), ErrBadConfig)
}

// SLAConfig configures an SLA experiment in the thesis's protocol: a trace
// split into a training prefix and consecutive runs, arrivals compressed to
// a target offered load, deadlines and fees derived from the estimates.
type SLAConfig struct {
	Procs    int
	Strategy Strategy
	// Test is the acceptance test of the overbooking strategies.
	Test overbook.Test
	// Stats configures the runtime-ratio statistics (classifier, ageing).
	Stats overbook.StatsConfig
	// Learn updates the statistics online as jobs finish; off, they stay
	// as trained on the prefix (the thesis). Histogram statistics only.
	Learn bool
	// StatsSource selects the runtime-ratio distributions of the
	// overbooking strategies: histogram (default) or forecast.
	StatsSource StatsSource
	// Forecast configures the forecaster of StatsForecast
	// (forecast.DefaultConfig() in DefaultSLAConfig; set Search.Epoch to
	// the trace's, forecast.EpochFromHeader, for its calendar keys).
	Forecast forecast.Config
	// Choice selects among acceptable gaps.
	Choice overbook.GapChoice
	// KeepRecords keeps each run's job records in SLARun.Records (for a
	// per-job report); off, Experiment keeps only the figures.
	KeepRecords bool
	// Failures is the node-failure model: it enters the PoF, and with
	// both rates set processors really fail and are repaired during each
	// run (drawn with FailureSeed plus the run's number).
	Failures    overbook.FailureModel
	FailureSeed uint64
	// Load is the offered load at estimates each run is compressed to
	// (2.0 = 200 %); <= 0 keeps the trace's arrival times.
	Load float64
	// DeadlineFactor sets deadline = release + factor x estimate (2).
	DeadlineFactor float64
	// PenaltyRatio sets penalty = ratio x fee; fee = procs x estimate in hours.
	PenaltyRatio float64
	// Runs and JobsPerRun split the test part of the trace: the last
	// Runs x JobsPerRun jobs, in order. JobsPerRun 0 means one run of every
	// job after the training prefix.
	Runs, JobsPerRun int
	// TrainJobs is the number of jobs right before the test part that train
	// the statistics; 0 means all of them, TrainNone (any negative value)
	// none: the runs start from empty statistics, as a new site does.
	TrainJobs int
	// MinSamples is the overbooking strategies' overbook.Admission
	// MinSamples: the (aged) samples a job's statistics must hold before it
	// may be overbooked. 0 means overbook.DefaultAdmissionMinSamples.
	MinSamples float64
	// Standing are standing reservations laid over every run (anchored at
	// the run's time 0).
	Standing []plan.Standing
	// Urgency, if set, draws each job's SLA terms from Yeo's two urgency
	// classes (deadline, fee = budget, penalty, HARD for high urgency)
	// instead of DeadlineFactor and PenaltyRatio, seeded by FailureSeed
	// (each run its own, as Experiment sets it).
	Urgency *overbook.UrgencyModel
}

// TrainNone is the TrainJobs of a run without a training prefix.
const TrainNone = -1

// DefaultSLAConfig returns the thesis's protocol: 200 % load, deadline =
// release + 2 x estimate, penalty = fee, 20 runs of 1,000 jobs, PoF < 0.1,
// runtime-band classes.
func DefaultSLAConfig(procs int) SLAConfig {
	return SLAConfig{Procs: procs, Strategy: HeuristicOverbook, Test: overbook.Threshold{PoFMax: 0.1},
		Stats: overbook.StatsConfig{Classifier: overbook.ByRuntime}, Load: 2, DeadlineFactor: 2,
		PenaltyRatio: 1, Runs: 20, JobsPerRun: 1000, Forecast: forecast.DefaultConfig()}
}

// SLARun is the outcome of one run.
type SLARun struct {
	// FailureViolations counts the violations a node failure caused.
	FailureViolations              int
	Accepted, Rejected, Overbooked int
	Met, Violated                  int
	Fees, Penalties, Gain          float64
	Metrics                        Metrics
	// Utility is Yeo's Σ B_i − DY_i·PR_i over the accepted jobs (Libra
	// strategies only; nil otherwise).
	Utility *float64
	// StartErrors are actual - planned start of the run's jobs that
	// started with a promise, sorted (StartErrors).
	StartErrors []int64
	// Records are the run's jobs, with SLAConfig.KeepRecords.
	Records []Record
}

// Split returns the training jobs and the runs of jobs (with their original
// times) that cfg selects from jobs.
func Split(jobs []Job, cfg SLAConfig) (train []Job, runs [][]Job, err error) {
	n := len(jobs)
	per, k := cfg.JobsPerRun, max(cfg.Runs, 1)
	if per <= 0 {
		if cfg.TrainJobs >= n {
			return nil, nil, fmt.Errorf("%d training jobs leave none of %d to test: %w", cfg.TrainJobs, n, ErrBadConfig)
		}
		k := max(cfg.TrainJobs, 0)
		return jobs[:k], [][]Job{jobs[k:]}, nil
	}
	test := per * k
	if test > n {
		return nil, nil, fmt.Errorf("%d runs of %d jobs need %d jobs; the trace has %d: %w", k, per, test, n, ErrBadConfig)
	}
	first := n - test
	trainFrom := 0
	switch {
	case cfg.TrainJobs > 0:
		trainFrom = max(0, first-cfg.TrainJobs)
	case cfg.TrainJobs < 0:
		trainFrom = first
	}
	train = jobs[trainFrom:first]
	for i := 0; i < k; i++ {
		runs = append(runs, jobs[first+i*per:first+(i+1)*per])
	}
	return train, runs, nil
}

// PrepareRun rebases a run to start at 0, compresses its arrivals to the
// offered load, and sets deadlines, fees and penalties. The input is not
// modified.
func PrepareRun(run []Job, cfg SLAConfig) []Job {
	out := make([]Job, len(run))
	copy(out, run)
	if len(out) == 0 {
		return out
	}
	t0, t1 := out[0].Submit, out[len(out)-1].Submit
	factor := 1.0
	if cfg.Load > 0 && t1 > t0 {
		var area float64
		for _, j := range out {
			area += float64(j.Procs) * float64(j.Estimate)
		}
		factor = area / (float64(cfg.Procs) * float64(t1-t0) * cfg.Load)
	}
	terms := overbook.FeeModel{PenaltyRatio: cfg.PenaltyRatio}
	var rng *rand.Rand
	if cfg.Urgency != nil {
		rng = rand.New(rand.NewPCG(cfg.FailureSeed, urgencyStream))
	}
	for i := range out {
		j := &out[i]
		j.Submit = int64(math.Round(float64(j.Submit-t0) * factor))
		j.Deadline = j.Submit + int64(math.Ceil(cfg.DeadlineFactor*float64(j.Estimate)))
		j.Fee = terms.Fee(j.Procs, j.Estimate)
		j.Penalty = terms.Penalty(j.Procs, j.Estimate)
		if rng == nil {
			continue
		}
		// A job the model cannot price (no estimate) keeps the terms
		// above; admission rejects it anyway.
		if t, err := cfg.Urgency.Terms(rng, overbook.JobInfo{Procs: j.Procs, Estimate: j.Estimate}, j.Submit); err == nil {
			j.Deadline, j.Fee, j.Penalty, j.Hard = t.Deadline, t.Fee, t.Penalty, t.Hard
		}
	}
	return out
}

// urgencyStream is the second PCG word of the urgency draws (the first is
// the run's seed), so that they are not the failure draws.
const urgencyStream = 0x75726765

// finisher tells the admission test of finished jobs, so that it forgets
// them and, if it learns online, updates its statistics.
type finisher struct{ adm *overbook.Admission }

func (f finisher) Finished(_ int64, r *Record) {
	pj := plan.Job{ID: r.ID, Procs: r.Procs, Estimate: r.Estimate, User: r.User, App: r.App}
	f.adm.Record(&pj, Observed(r)) //nolint:errcheck // a job with a bad estimate is not learnt from; nothing else can fail
}

// Observed is what a live site learns from the end of r: the time it ran,
// censored when it was cut before its estimate (it needed more; the trace's
// runtime, which says how much more, is not known to a site). A job cut at
// or after its estimate is in the top bin either way.
func Observed(r *Record) overbook.Observation {
	if r.Killed {
		return overbook.Observation{Ran: r.Ran(), Censored: r.Ran() < r.Estimate}
	}
	return overbook.Observation{Ran: r.Runtime}
}

// siteConfig builds the site and admission for a strategy from trained
// stats, or from the run's forecaster fc under StatsForecast.
func siteConfig(cfg SLAConfig, trained *overbook.Stats, fc *OnlineForecast) (plan.Config, Observer, error) {
	sc := plan.Config{Procs: cfg.Procs, Policy: plan.Conservative}
	st, err := overbook.NewStats(cfg.Stats)
	if err != nil {
		return sc, nil, err
	}
	if trained != nil {
		b, err := trained.MarshalJSON()
		if err != nil {
			return sc, nil, err
		}
		if err := st.UnmarshalJSON(b); err != nil {
			return sc, nil, err
		}
	}
	adm := &overbook.Admission{Stats: st, Failures: cfg.Failures, Test: cfg.Test, Choice: cfg.Choice, Learn: cfg.Learn, MinSamples: cfg.MinSamples}
	if fc != nil {
		adm.Stats = fc
	}
	switch cfg.Strategy {
	case Backfill:
		sc.KeepUntilEstimate = true
		return sc, nil, nil
	case HeuristicPlan:
		return sc, nil, nil
	case ComprehensiveOverbook:
		adm.Mode = overbook.Comprehensive
	case HeuristicOverbook:
		adm.Mode = overbook.Heuristic
	}
	sc.Admission = adm
	return sc, finisher{adm}, nil
}

// Train builds the runtime-ratio statistics from jobs.
func Train(jobs []Job, cfg overbook.StatsConfig) (*overbook.Stats, error) {
	st, err := overbook.NewStats(cfg)
	if err != nil {
		return nil, err
	}
	infos := make([]overbook.JobInfo, len(jobs))
	actual := make([]int64, len(jobs))
	for i, j := range jobs {
		infos[i] = overbook.JobInfo{Procs: j.Procs, Estimate: j.Estimate, User: j.User, App: j.App}
		actual[i] = j.Runtime
	}
	if err := st.Train(infos, actual); err != nil {
		return nil, err
	}
	return st, nil
}

// RunSLA replays one prepared run under cfg's strategy and settles every
// SLA. Under StatsForecast use RunSLAForecast: this one fails.
func RunSLA(ctx context.Context, jobs []Job, cfg SLAConfig, trained *overbook.Stats) (SLARun, []Record, error) {
	if cfg.StatsSource == StatsForecast && cfg.Strategy.Overbooks() {
		return SLARun{}, nil, fmt.Errorf("RunSLA with forecast statistics: use RunSLAForecast: %w", ErrBadConfig)
	}
	return runSLA(ctx, jobs, cfg, trained, nil)
}

// RunSLAForecast replays one prepared run under cfg's strategy with
// forecast statistics (whatever cfg.StatsSource says): a forecaster
// configured by cfg.Forecast learns history (the training jobs, with their
// trace times), then predicts each job of the run at its submission and
// learns each completion (NewOnlineForecast). It settles every SLA.
func RunSLAForecast(ctx context.Context, jobs []Job, cfg SLAConfig, history []Job) (SLARun, []Record, error) {
	var fc *OnlineForecast
	if cfg.Strategy.Overbooks() {
		var err error
		if fc, err = NewOnlineForecast(cfg.Forecast, history, true); err != nil {
			return SLARun{}, nil, err
		}
	}
	return runSLA(ctx, jobs, cfg, nil, fc)
}

func runSLA(ctx context.Context, jobs []Job, cfg SLAConfig, trained *overbook.Stats, fc *OnlineForecast) (SLARun, []Record, error) {
	if cfg.Strategy.IsLibra() {
		if len(cfg.Standing) > 0 || cfg.Failures.Lambda > 0 {
			return SLARun{}, nil, fmt.Errorf("strategy %s: time-shared nodes have no standing reservations or node failures: %w", cfg.Strategy, ErrBadConfig)
		}
		return runLibra(ctx, jobs, cfg)
	}
	sc, obs, err := siteConfig(cfg, trained, fc)
	if err != nil {
		return SLARun{}, nil, err
	}
	rc := Config{Name: cfg.Strategy.String(), Site: sc, Observer: obs, Standing: cfg.Standing,
		Failures: FailureConfig{Lambda: cfg.Failures.Lambda, Mu: cfg.Failures.Mu, Seed: cfg.FailureSeed}}
	if fc != nil {
		rc.Predictor = fc
	}
	res, err := Run(ctx, jobs, rc)
	if err != nil {
		return SLARun{}, nil, err
	}
	if fc != nil && fc.Err() != nil {
		return SLARun{}, nil, fmt.Errorf("sim: forecast: %w", fc.Err())
	}
	run := Settle(res.Records, cfg.Procs)
	run.StartErrors = StartErrors(res.Records)
	return run, res.Records, nil
}

// Settle counts the SLA outcomes of a replay: the fee of every met SLA, the
// penalty of every violated one (overbooking.Settle decides which).
func Settle(recs []Record, procs int) SLARun {
	var out SLARun
	for i := range recs {
		r := &recs[i]
		if !r.Decision.OK() {
			out.Rejected++
			continue
		}
		out.Accepted++
		if r.Decision.Reason == plan.ReasonOverbooked {
			out.Overbooked++
		}
		s := settle(r)
		if r.NodeFailed && s.Outcome == overbook.Violated {
			out.FailureViolations++
		}
		switch s.Outcome {
		case overbook.Met:
			out.Met++
		case overbook.Violated:
			out.Violated++
		}
		out.Fees += s.Fee
		out.Penalties += s.Penalty
	}
	out.Gain = out.Fees - out.Penalties
	out.Metrics = ComputeMetrics(recs, procs)
	return out
}

// settle settles one accepted job's SLA (overbook.Settle).
func settle(r *Record) overbook.Settlement {
	terms := overbook.Terms{Procs: r.Procs, Estimate: r.Estimate, Fee: r.Fee, Penalty: r.Penalty}
	got := int64(0)
	if r.Started {
		got = r.Ran()
		if !r.Killed {
			got = r.Runtime
		}
	}
	return overbook.Settle(terms, got, r.Runtime, r.NodeFailed)
}

// Experiment runs every run of an SLA experiment, two at a time (runs are
// independent; each result is deterministic), and returns them in order.
func Experiment(ctx context.Context, jobs []Job, cfg SLAConfig) ([]SLARun, error) {
	train, runs, err := Split(jobs, cfg)
	if err != nil {
		return nil, err
	}
	var trained *overbook.Stats
	forecasts := cfg.StatsSource == StatsForecast && cfg.Strategy.Overbooks()
	if !forecasts && !cfg.Strategy.IsLibra() {
		if trained, err = Train(train, cfg.Stats); err != nil {
			return nil, err
		}
	}
	out := make([]SLARun, len(runs))
	errs := make([]error, len(runs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rcfg := cfg
			// Each run draws its own failures; the strategy and its
			// baseline see the same ones.
			rcfg.FailureSeed = cfg.FailureSeed + uint64(i)
			var recs []Record
			if forecasts {
				out[i], recs, errs[i] = RunSLAForecast(ctx, PrepareRun(run, rcfg), rcfg, train)
			} else {
				out[i], recs, errs[i] = RunSLA(ctx, PrepareRun(run, rcfg), rcfg, trained)
			}
			if cfg.KeepRecords {
				out[i].Records = recs
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return out, nil
}

// MeanCI95 returns the mean of xs and the half-width of its 95 %
// confidence interval (Student's t with n-1 degrees of freedom); the
// half-width is 0 for fewer than two values.
func MeanCI95(xs []float64) (mean, half float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	mean = stat.Mean(xs, nil)
	if len(xs) < 2 {
		return mean, 0
	}
	sd := stat.StdDev(xs, nil)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(xs) - 1)}.Quantile(0.975)
	return mean, t * sd / math.Sqrt(float64(len(xs)))
}
