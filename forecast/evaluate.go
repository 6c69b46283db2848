package forecast

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
)

// EvalConfig parametrises Evaluate.
type EvalConfig struct {
	// Forecaster configures the partitioned forecaster under test. The
	// unpartitioned baseline uses the same configuration with NoSearch and an
	// empty Chain.
	Forecaster Config
	// MinPartitionJobs is the number of evaluated jobs a partition must have
	// predicted to count as a sequence in the per-partition MdAPE quartiles
	// and in Percent Best.
	MinPartitionJobs int
	// KeepJobs makes the Report carry one JobResult per evaluated job
	// (PerJob), including its ratio samples.
	KeepJobs bool
}

// DefaultEvalConfig returns the evaluation used by `fedsched forecast`.
func DefaultEvalConfig() EvalConfig {
	return EvalConfig{Forecaster: DefaultConfig(), MinPartitionJobs: 10}
}

// Validate checks the configuration; errors wrap ErrInvalidConfig.
func (c EvalConfig) Validate() error {
	if c.MinPartitionJobs < 1 {
		return errorf("MinPartitionJobs %d must be >= 1", c.MinPartitionJobs)
	}
	return c.Forecaster.Validate()
}

// Quartiles summarises the absolute percentage errors |actual − predicted| /
// actual of a set of jobs, as fractions (0.05 = 5 %).
type Quartiles struct {
	P25  float64 `json:"mdape_p25"`
	P50  float64 `json:"mdape_p50"` // the MdAPE
	P75  float64 `json:"mdape_p75"`
	Jobs int     `json:"jobs"`
}

// Unpartitioned summarises the forecast made without partitions: every
// predictor run on the single series of all completions.
type Unpartitioned struct {
	Quartiles
	// Predictor is the predictor with the lowest MdAPE, whose quartiles
	// these are (the thesis reports the best method, Table 5.9).
	Predictor string `json:"predictor"`
	// ByPredictor is each predictor's MdAPE.
	ByPredictor map[string]float64 `json:"by_predictor"`
	// Selected is the MdAPE when the predictor is chosen online by recent
	// error, as in the partitioned forecaster.
	Selected float64 `json:"selected_mdape_p50"`
}

// PartitionStats summarises the out-of-sample MdAPE per partition (sequence),
// over the partitions that predicted at least MinPartitionJobs jobs: the
// thesis's per-sequence view (Tables 5.3-5.8).
type PartitionStats struct {
	Sequences int     `json:"sequences"`
	Jobs      int     `json:"jobs"` // evaluated jobs predicted from those partitions
	P25       float64 `json:"mdape_p25"`
	P50       float64 `json:"mdape_p50"`
	P75       float64 `json:"mdape_p75"`
}

// PredictorStats describes one predictor in the partitioned forecast.
type PredictorStats struct {
	// PercentBest is the share, in percent (0-100), of the sequences on
	// which this predictor had the lowest MAE over the forecasts made at
	// the submissions of their jobs (ties go to the earlier predictor in
	// PredictorNames).
	PercentBest float64 `json:"percent_best"`
	// MdAPE is the median APE if this predictor alone had made every
	// partitioned forecast (same partitions, same cap), as a fraction.
	MdAPE float64 `json:"mdape_p50"`
	// PercentChosen is the share, in percent, of evaluated jobs whose
	// forecast this predictor made (selected by recent error).
	PercentChosen float64 `json:"percent_chosen"`
}

// RatioCalibration checks the distribution of RatioSamples against the
// outcome: for each evaluated job with samples (taken at its submission),
// where its actual ratio actual/estimate falls among them. For a calibrated
// distribution BelowP10 ≈ 0.1, BelowP50 ≈ 0.5 and AboveP90 ≈ 0.1.
type RatioCalibration struct {
	Jobs     int     `json:"jobs"`      // evaluated jobs that had samples
	BelowP10 float64 `json:"below_p10"` // share below the samples' 10th percentile
	BelowP50 float64 `json:"below_p50"` // share below their median
	AboveP90 float64 `json:"above_p90"` // share above their 90th percentile
}

// calibFlags are the calibration flags of one job (runOutput.calib).
type calibFlags uint8

// count is 1 if flag f is set, else 0.
func (c calibFlags) count(f calibFlags) float64 {
	if c&f != 0 {
		return 1
	}
	return 0
}

// The calibration flags.
const (
	calibHas calibFlags = 1 << iota // the job had ratio samples
	calibBelowP10
	calibBelowP50
	calibAboveP90
)

// calibration returns the calibration flags of an actual ratio among the
// samples rs (0 when there are none).
func calibration(rs []float64, actual float64) calibFlags {
	if len(rs) == 0 {
		return 0
	}
	s := sortedCopy(rs)
	c := calibHas
	if actual < quantile(s, 0.1) {
		c |= calibBelowP10
	}
	if actual < quantile(s, 0.5) {
		c |= calibBelowP50
	}
	if actual > quantile(s, 0.9) {
		c |= calibAboveP90
	}
	return c
}

// Skipped counts the jobs not evaluated, by reason. A job with neither
// runtime nor estimate counts as NoRuntime.
type Skipped struct {
	NoRuntime  int `json:"no_runtime"`  // runtime <= 0 (failed, or unknown)
	NoEstimate int `json:"no_estimate"` // no user estimate
}

// JobResult is the evaluation of one job (Report.PerJob, with KeepJobs).
type JobResult struct {
	ID        int64     `json:"id"`
	Submit    int64     `json:"submit"`
	Actual    int64     `json:"actual"`
	Estimate  int64     `json:"estimate"`
	Forecast  float64   `json:"forecast"`
	Predictor string    `json:"predictor,omitempty"`
	Partition string    `json:"partition,omitempty"` // "user=3,estimate=23"
	ColdStart bool      `json:"cold_start,omitempty"`
	Ratios    []float64 `json:"ratios,omitempty"` // RatioSamples at submission
}

// Report is the outcome of Evaluate. All error figures are fractions.
type Report struct {
	Jobs    int     `json:"jobs"` // jobs in the input
	Skipped Skipped `json:"skipped"`
	// Forecast holds the quartiles of the per-job APE of the partitioned
	// forecast over the evaluated jobs (positive runtime and an estimate).
	Forecast Quartiles `json:"forecast"`
	// ColdStarts is the number of evaluated jobs predicted by their
	// estimate because nothing had completed yet; Capped those whose
	// forecast was cut to their estimate.
	ColdStarts int `json:"cold_starts"`
	Capped     int `json:"capped"`
	// UserEstimate holds the quartiles of the APE of the users' estimates
	// over the same jobs.
	UserEstimate Quartiles `json:"user_estimate"`
	// Unpartitioned is the forecast without partitions, same jobs.
	Unpartitioned Unpartitioned `json:"unpartitioned"`
	// Partitions is the per-sequence view.
	Partitions PartitionStats `json:"partitions"`
	// Ratios checks the calibration of RatioSamples.
	Ratios RatioCalibration `json:"ratio_samples"`
	// Predictors describes each predictor, by name.
	Predictors map[string]PredictorStats `json:"predictors"`
	// Levels counts the evaluated jobs by the partitioning that predicted
	// them ("cold" for cold starts).
	Levels map[string]int `json:"levels"`
	// Chain is the fallback chain at the end of the run, finest first, and
	// Searches the number of partition searches run.
	Chain    []AttrSet `json:"chain"`
	Searches int       `json:"searches"`
	// TopCandidates are the ten best-ranked partitionings of the last
	// search.
	TopCandidates []Candidate `json:"top_candidates"`
	// PerJob holds one result per evaluated job, in submission order, when
	// EvalConfig.KeepJobs is set.
	PerJob []JobResult `json:"per_job,omitempty"`
}

// event is a submission or completion of jobs[idx] in Evaluate's loop.
type event struct {
	t    int64
	rank int8 // 0: completion, 1: submission, 2: completion of a job ending at its own submission time
	idx  int32
}

// events returns the event list of Evaluate, sorted: by time; at the same
// time completions first, then submissions, then the completions of jobs
// that end when they are submitted (so a job never sees itself); then by
// index.
func events(jobs []Job) []event {
	ev := make([]event, 0, 2*len(jobs))
	for i := range jobs {
		j := &jobs[i]
		ev = append(ev, event{t: j.Submit, rank: 1, idx: int32(i)})
		if j.Runtime >= 0 {
			r := int8(0)
			if j.End <= j.Submit {
				r = 2
			}
			ev = append(ev, event{t: max(j.End, j.Submit), rank: r, idx: int32(i)})
		}
	}
	slices.SortFunc(ev, func(a, b event) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	return ev
}

// evaluable reports whether j is evaluated: positive runtime and an estimate.
func evaluable(j *Job) bool { return j.Runtime > 0 && j.Estimate > 0 }

// runOutput is what one replay records for each evaluated job, indexed by
// the job's position in the input.
type runOutput struct {
	fc        []float64   // the forecaster's forecast
	preds     [][]float64 // each predictor's forecast from the same partition
	part      []int32     // partition id (-1: cold start)
	predictor []int8      // selected predictor (-1: cold start)
	level     []AttrSet
	capped    []bool
	ratios    [][]float64  // with keepRatios
	calib     []calibFlags // ratio calibration flags (calib* constants), with ratioStats
	partNames []string
	chain     []AttrSet
	searches  int
	last      *SearchResult
	err       error
}

// replay runs one forecaster over the events and records its predictions.
func replay(jobs []Job, ev []event, cfg Config, keepRatios, ratioStats bool) *runOutput {
	out := &runOutput{
		fc:        make([]float64, len(jobs)),
		preds:     make([][]float64, len(jobs)),
		part:      make([]int32, len(jobs)),
		predictor: make([]int8, len(jobs)),
		level:     make([]AttrSet, len(jobs)),
		capped:    make([]bool, len(jobs)),
	}
	if keepRatios {
		out.ratios = make([][]float64, len(jobs))
	}
	if ratioStats {
		out.calib = make([]calibFlags, len(jobs))
	}
	f, err := New(cfg)
	if err != nil {
		out.err = err
		return out
	}
	partIDs := map[*partition]int32{}
	for _, e := range ev {
		j := &jobs[e.idx]
		if e.rank != 1 {
			if err := f.Observe(*j); err != nil {
				out.err = err
				return out
			}
			continue
		}
		if !evaluable(j) {
			continue
		}
		if f.lastEnd > e.t { // cannot happen with sorted events; the guard of Predict, inlined
			out.err = fmt.Errorf("evaluate job %d: %w", j.ID, ErrLookAhead)
			return out
		}
		li, p := f.lookup(j)
		if p == nil {
			out.fc[e.idx] = float64(j.Estimate)
			out.part[e.idx] = -1
			out.predictor[e.idx] = -1
			continue
		}
		id, ok := partIDs[p]
		if !ok {
			id = int32(len(out.partNames))
			partIDs[p] = id
			out.partNames = append(out.partNames, keyOf(f.levels[li].set, j, cfg.Search.Epoch).String())
		}
		out.part[e.idx] = id
		out.level[e.idx] = f.levels[li].set
		out.predictor[e.idx] = int8(p.best)
		out.fc[e.idx], out.capped[e.idx] = f.capped(p.forecast(), j)
		ps := make([]float64, len(p.preds))
		for k, pr := range p.preds {
			v, _ := pr.Forecast()
			ps[k], _ = f.capped(math.Max(v, 1), j)
		}
		out.preds[e.idx] = ps
		if keepRatios || ratioStats {
			rs := f.RatioSamples(*j)
			if keepRatios {
				out.ratios[e.idx] = rs
			}
			if ratioStats {
				out.calib[e.idx] = calibration(rs, float64(j.Runtime)/float64(j.Estimate))
			}
		}
	}
	out.chain, out.searches, out.last = f.Chain(), f.Searches(), f.LastSearch()
	return out
}

// Evaluate replays jobs through a Forecaster in time order — a discrete
// event loop over submissions (at Submit) and completions (at End) — and
// predicts every job at its submission from the jobs completed by then (a
// completion at the same instant counts; see Forecaster). The jobs need not
// be sorted. Jobs with a positive runtime and a user estimate are evaluated;
// the others are counted in Report.Skipped but still enter the history when
// they complete with a known runtime.
//
// Besides the partitioned forecast it reports the users' estimates and an
// unpartitioned forecast on the same jobs. The two replays run concurrently;
// the result is deterministic. It returns an error wrapping ErrNoJobs if no
// job is evaluable, ErrInvalidConfig for a bad configuration.
func Evaluate(jobs []Job, cfg EvalConfig) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	rep := &Report{Jobs: len(jobs)}
	var evalIdx []int
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.Runtime <= 0:
			rep.Skipped.NoRuntime++
		case j.Estimate <= 0:
			rep.Skipped.NoEstimate++
		default:
			evalIdx = append(evalIdx, i)
		}
	}
	if len(evalIdx) == 0 {
		return nil, fmt.Errorf("evaluate %d jobs: none has a positive runtime and an estimate: %w", len(jobs), ErrNoJobs)
	}
	// Submission order for the per-job results.
	slices.SortStableFunc(evalIdx, func(a, b int) int { return cmp.Compare(jobs[a].Submit, jobs[b].Submit) })
	ev := events(jobs)

	flat := cfg.Forecaster
	flat.NoSearch, flat.Chain = true, nil
	var part, unpart *runOutput
	var wg sync.WaitGroup
	wg.Go(func() { unpart = replay(jobs, ev, flat, false, false) })
	part = replay(jobs, ev, cfg.Forecaster, cfg.KeepJobs, true)
	wg.Wait()
	if part.err != nil {
		return nil, fmt.Errorf("evaluate: %w", part.err)
	}
	if unpart.err != nil {
		return nil, fmt.Errorf("evaluate unpartitioned: %w", unpart.err)
	}
	names := cfg.Forecaster.Predictors
	if names == nil {
		names = PredictorNames()
	}

	n := len(evalIdx)
	apeFc := make([]float64, 0, n)
	apeEst := make([]float64, 0, n)
	apeSel := make([]float64, 0, n)
	apePred := make([][]float64, len(names))
	apeFlat := make([][]float64, len(names))
	rep.Levels = map[string]int{}
	chosen := make([]int, len(names))
	for _, i := range evalIdx {
		j := &jobs[i]
		a := float64(j.Runtime)
		apeFc = append(apeFc, ape(a, part.fc[i]))
		apeEst = append(apeEst, ape(a, float64(j.Estimate)))
		apeSel = append(apeSel, ape(a, unpart.fc[i]))
		for k := range names {
			apePred[k] = append(apePred[k], ape(a, predOr(part, i, k, j)))
			apeFlat[k] = append(apeFlat[k], ape(a, predOr(unpart, i, k, j)))
		}
		if part.part[i] < 0 {
			rep.ColdStarts++
			rep.Levels["cold"]++
		} else {
			rep.Levels[part.level[i].String()]++
			chosen[part.predictor[i]]++
		}
		if part.capped[i] {
			rep.Capped++
		}
		if c := part.calib[i]; c&calibHas != 0 {
			rep.Ratios.Jobs++
			rep.Ratios.BelowP10 += c.count(calibBelowP10)
			rep.Ratios.BelowP50 += c.count(calibBelowP50)
			rep.Ratios.AboveP90 += c.count(calibAboveP90)
		}
		if cfg.KeepJobs {
			r := JobResult{ID: j.ID, Submit: j.Submit, Actual: j.Runtime, Estimate: j.Estimate, Forecast: part.fc[i]}
			if part.part[i] < 0 {
				r.ColdStart = true
			} else {
				r.Predictor = names[part.predictor[i]]
				r.Partition = part.partNames[part.part[i]]
			}
			if part.ratios != nil {
				r.Ratios = part.ratios[i]
			}
			rep.PerJob = append(rep.PerJob, r)
		}
	}
	if rep.Ratios.Jobs > 0 {
		k := float64(rep.Ratios.Jobs)
		rep.Ratios.BelowP10 /= k
		rep.Ratios.BelowP50 /= k
		rep.Ratios.AboveP90 /= k
	}
	rep.Forecast = quartiles(apeFc)
	rep.UserEstimate = quartiles(apeEst)
	rep.Unpartitioned.ByPredictor = map[string]float64{}
	rep.Unpartitioned.Selected = quantile(sortedCopy(apeSel), 0.5)
	bestK := -1
	for k, name := range names {
		md := quantile(sortedCopy(apeFlat[k]), 0.5)
		rep.Unpartitioned.ByPredictor[name] = md
		if bestK < 0 || md < rep.Unpartitioned.ByPredictor[names[bestK]] {
			bestK = k
		}
	}
	rep.Unpartitioned.Quartiles = quartiles(apeFlat[bestK])
	rep.Unpartitioned.Predictor = names[bestK]

	var wins []int
	rep.Partitions, wins = sequences(jobs, evalIdx, part, len(names), cfg.MinPartitionJobs)

	rep.Predictors = map[string]PredictorStats{}
	for k, name := range names {
		ps := PredictorStats{MdAPE: quantile(sortedCopy(apePred[k]), 0.5), PercentChosen: 100 * float64(chosen[k]) / float64(n)}
		if rep.Partitions.Sequences > 0 {
			ps.PercentBest = 100 * float64(wins[k]) / float64(rep.Partitions.Sequences)
		}
		rep.Predictors[name] = ps
	}
	rep.Chain, rep.Searches = part.chain, part.searches
	if rep.Chain == nil {
		rep.Chain = []AttrSet{}
	}
	if part.last != nil {
		rep.TopCandidates = part.last.Candidates[:min(10, len(part.last.Candidates))]
	}
	return rep, nil
}

// sequences computes the per-partition view of a replay: the partitions
// that predicted at least minJobs of the evaluated jobs are the sequences;
// it returns their MdAPE quartiles and, per predictor, the number of
// sequences on which it had the lowest MAE (ties to the earlier predictor).
func sequences(jobs []Job, evalIdx []int, part *runOutput, npred, minJobs int) (PartitionStats, []int) {
	seqJobs := map[int32][]int{}
	for _, i := range evalIdx {
		if id := part.part[i]; id >= 0 {
			seqJobs[id] = append(seqJobs[id], i)
		}
	}
	ids := make([]int32, 0, len(seqJobs))
	for id, js := range seqJobs {
		if len(js) >= minJobs {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var st PartitionStats
	wins := make([]int, npred)
	seqMd := make([]float64, 0, len(ids))
	for _, id := range ids {
		js := seqJobs[id]
		apes := make([]float64, 0, len(js))
		mae := make([]float64, npred)
		for _, i := range js {
			a := float64(jobs[i].Runtime)
			apes = append(apes, ape(a, part.fc[i]))
			for k := range mae {
				mae[k] += math.Abs(a - part.preds[i][k])
			}
		}
		seqMd = append(seqMd, quantile(sortedCopy(apes), 0.5))
		st.Jobs += len(js)
		best := 0
		for k := range mae {
			if mae[k] < mae[best] {
				best = k
			}
		}
		wins[best]++
	}
	slices.Sort(seqMd)
	st.Sequences = len(ids)
	st.P25, st.P50, st.P75 = quantile(seqMd, 0.25), quantile(seqMd, 0.5), quantile(seqMd, 0.75)
	return st, wins
}

// predOr returns predictor k's forecast for job i in run r, or the job's
// estimate on a cold start (every predictor then falls back alike).
func predOr(r *runOutput, i, k int, j *Job) float64 {
	if r.preds[i] == nil {
		return float64(j.Estimate)
	}
	return r.preds[i][k]
}

// ape is the absolute percentage error of forecast f for actual a > 0.
func ape(a, f float64) float64 { return math.Abs(a-f) / a }

// quartiles summarises a set of APEs.
func quartiles(apes []float64) Quartiles {
	s := sortedCopy(apes)
	return Quartiles{P25: quantile(s, 0.25), P50: quantile(s, 0.5), P75: quantile(s, 0.75), Jobs: len(s)}
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// quantile returns the q-quantile of sorted xs by linear interpolation
// between order statistics (type 7); 0 for an empty slice.
func quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	h := q * float64(n-1)
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}
