package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/site"
	"github.com/fedsched/fedsched/swf"
)

// SliceSite is a site a trace slice is spread over.
type SliceSite struct {
	Name  string
	Procs int
	// Share is the site's share of the jobs (relative to the others').
	Share float64
}

// TraceSlice chooses jobs of a real trace and fits them to a federation
// and a time budget.
type TraceSlice struct {
	// Trace is a file or an embedded trace (kth, hpc2n, nasa, lublin, ctc, sdsc).
	Trace string
	// Skip jobs of the sanitised trace, then take Jobs.
	Skip, Jobs int
	Sites      []SliceSite
	// Span is the virtual time the submissions are spread over, in
	// seconds; Load the offered load at estimates over all the sites'
	// processors during it. Runtimes and estimates are divided by the
	// factor that gives that load (their ratio kept), then clamped to
	// [MinEstimate, MaxEstimate].
	Span, MinEstimate, MaxEstimate int64
	Load                           float64
	// Seed chooses each job's site.
	Seed uint64
}

// SliceInfo describes a built slice.
type SliceInfo struct {
	Trace string
	// TraceJobs is how many jobs the trace has after sanitising; From and
	// To the trace job numbers of the first and last job taken.
	TraceJobs int
	From, To  int64
	// TraceSpan is the submission span of the slice in the trace
	// (seconds); Divisor what its times were divided by.
	TraceSpan int64
	Divisor   float64
	// Load is the offered load at estimates over the federation,
	// PerSite each site's own.
	Load    float64
	PerSite map[string]float64
}

// SliceJob is one job of a slice: submitted to Site At seconds after the
// slice begins, its processors scaled to that site, its estimate and
// runtime scaled to the slice.
type SliceJob struct {
	Site              string
	At                int64
	Procs             int
	Estimate, Runtime int64
	User, App         string
	// TraceID is the job's number in the trace.
	TraceID int64
}

// Build reads and sanitises the trace and returns the slice's jobs in
// submission order. The live demo (through e2e) and a scenario's
// workload block replay the same jobs.
func (ts TraceSlice) Build() ([]SliceJob, SliceInfo, error) {
	info := SliceInfo{Trace: ts.Trace, PerSite: map[string]float64{}}
	if ts.Jobs <= 0 || len(ts.Sites) == 0 || ts.Span <= 0 || !(ts.Load > 0) || ts.MinEstimate <= 0 || ts.MaxEstimate < ts.MinEstimate {
		return nil, info, fmt.Errorf("sim: trace slice needs jobs, sites, a span, a load and 0 < min <= max estimate")
	}
	tr, err := LoadTrace(ts.Trace, swf.Options{})
	if err != nil {
		return nil, info, err
	}
	traceProcs := tr.Header.Procs()
	opts := swf.DefaultSanitizeOptions()
	opts.RequireEstimate = HasEstimates(tr.Jobs)
	jobs, _ := swf.Sanitize(tr.Jobs, traceProcs, opts)
	info.TraceJobs = len(jobs)
	if ts.Skip+ts.Jobs > len(jobs) {
		return nil, info, fmt.Errorf("sim: trace %s has %d jobs, the slice wants %d after skipping %d", ts.Trace, len(jobs), ts.Jobs, ts.Skip)
	}
	in := FromSWF(jobs[ts.Skip : ts.Skip+ts.Jobs])
	info.From, info.To = in[0].ID, in[len(in)-1].ID
	info.TraceSpan = in[len(in)-1].Submit - in[0].Submit
	if info.TraceSpan <= 0 {
		return nil, info, errors.New("sim: the slice's jobs are all submitted at once")
	}
	var total float64
	for _, s := range ts.Sites {
		total += s.Share
	}
	rng := rand.New(rand.NewPCG(ts.Seed, 0xe2e)) // the stream the live demo has always used
	out := make([]SliceJob, len(in))
	procsOf := map[string]int{}
	for _, s := range ts.Sites {
		procsOf[s.Name] = s.Procs
	}
	for i, j := range in {
		x, site := rng.Float64()*total, ts.Sites[len(ts.Sites)-1]
		for _, s := range ts.Sites {
			if x < s.Share {
				site = s
				break
			}
			x -= s.Share
		}
		p := min(site.Procs, max(1, int(math.Ceil(float64(j.Procs)*float64(site.Procs)/float64(traceProcs)))))
		out[i] = SliceJob{Site: site.Name, Procs: p, User: "u" + j.User, App: "a" + j.App, TraceID: j.ID}
	}
	// The divisor d spreads the slice's submissions over Span; durations
	// are divided by d too, then clamped, and the submissions compressed
	// further (or stretched) so that the offered load is Load.
	scale := func(d float64) (work float64) {
		for i, j := range in {
			est, rt := ts.scaleJob(j, d)
			out[i].Estimate, out[i].Runtime = est, rt
			work += float64(out[i].Procs) * float64(est)
		}
		return work
	}
	procs := 0
	for _, s := range ts.Sites {
		procs += s.Procs
	}
	// Find d such that the work at estimates fits Span at Load: the work
	// shrinks as d grows (bisection on a log scale).
	want := ts.Load * float64(procs) * float64(ts.Span)
	lo, hi := 1e-3, 1e6
	for range 60 {
		mid := math.Sqrt(lo * hi)
		if scale(mid) > want {
			lo = mid
		} else {
			hi = mid
		}
	}
	info.Divisor = hi
	work := scale(hi)
	t0 := in[0].Submit
	for i, j := range in {
		out[i].At = int64(math.Round(float64(j.Submit-t0) * float64(ts.Span) / float64(info.TraceSpan)))
	}
	info.Load = work / (float64(procs) * float64(ts.Span))
	perSite := map[string]float64{}
	for _, j := range out {
		perSite[j.Site] += float64(j.Procs) * float64(j.Estimate)
	}
	for name, w := range perSite {
		info.PerSite[name] = w / (float64(procsOf[name]) * float64(ts.Span))
	}
	return out, info, nil
}

// scaleJob divides a job's estimate by d, clamps it to [MinEstimate,
// MaxEstimate] and scales its runtime alike (their ratio kept, at least 1 s,
// at most the estimate).
func (ts TraceSlice) scaleJob(j Job, d float64) (est, rt int64) {
	est = min(ts.MaxEstimate, max(ts.MinEstimate, int64(math.Round(float64(j.Estimate)/d))))
	rt = max(1, min(est, int64(math.Round(float64(j.Runtime)*float64(est)/float64(j.Estimate)))))
	return est, rt
}

// History returns the n jobs of the sanitised trace right before the slice
// (fewer when it skips fewer), scaled as Build scaled the slice (info is
// Build's): estimates and runtimes divided by info.Divisor and clamped,
// submissions on the slice's clock (before 0), processors as in the trace.
// They are the past of the machine the slice was cut from; the demo seeds
// its overbooking sites' runtime statistics with them.
func (ts TraceSlice) History(n int, info SliceInfo) ([]SliceJob, error) {
	if n < 0 || info.Divisor <= 0 || info.TraceSpan <= 0 {
		return nil, fmt.Errorf("sim: trace slice history needs n >= 0 and a built slice's info")
	}
	tr, err := LoadTrace(ts.Trace, swf.Options{})
	if err != nil {
		return nil, err
	}
	opts := swf.DefaultSanitizeOptions()
	opts.RequireEstimate = HasEstimates(tr.Jobs)
	jobs, _ := swf.Sanitize(tr.Jobs, tr.Header.Procs(), opts)
	if ts.Skip > len(jobs) {
		return nil, fmt.Errorf("sim: trace %s has %d jobs, fewer than the slice skips (%d)", ts.Trace, len(jobs), ts.Skip)
	}
	in := FromSWF(jobs[max(0, ts.Skip-n):ts.Skip])
	if len(in) == 0 {
		return nil, nil
	}
	t0 := FromSWF(jobs[ts.Skip : ts.Skip+1])[0].Submit
	out := make([]SliceJob, len(in))
	for i, j := range in {
		est, rt := ts.scaleJob(j, info.Divisor)
		at := int64(math.Round(float64(j.Submit-t0) * float64(ts.Span) / float64(info.TraceSpan)))
		out[i] = SliceJob{At: at, Procs: j.Procs, Estimate: est, Runtime: rt, User: "u" + j.User, App: "a" + j.App, TraceID: j.ID}
	}
	return out, nil
}

// PastJobs turns history jobs into the samples that seed a site's runtime
// statistics, in the order they ended (submission + runtime, as the node
// orders an overbooking.history file written from them without waits).
func PastJobs(jobs []SliceJob) []site.PastJob {
	sorted := slices.Clone(jobs)
	slices.SortStableFunc(sorted, func(a, b SliceJob) int { return cmp.Compare(a.At+a.Runtime, b.At+b.Runtime) })
	out := make([]site.PastJob, len(sorted))
	for i, j := range sorted {
		out[i] = site.PastJob{Job: overbook.JobInfo{ID: j.TraceID, Procs: j.Procs, Estimate: j.Estimate, User: j.User, App: j.App}, Ran: j.Runtime}
	}
	return out
}
