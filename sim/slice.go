package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

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
			est := min(ts.MaxEstimate, max(ts.MinEstimate, int64(math.Round(float64(j.Estimate)/d))))
			rt := max(1, min(est, int64(math.Round(float64(j.Runtime)*float64(est)/float64(j.Estimate)))))
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
