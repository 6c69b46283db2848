package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/plan"
)

// DeadlineModel draws a job's deadline from its submission time and its
// actual runtime: forecast.UniformDeadlines (the f-model) and
// forecast.ModalDeadlines (rounded "human" values) of the forecasting
// digest (Lazarević 2008, §6.2.4). It reads the actual runtime: it builds
// the experiment's input, as in the thesis; no scheduler sees the runtime.
type DeadlineModel interface {
	Deadline(r *rand.Rand, submit, runtime int64) int64
}

// DeadlineModelNames are the names DeadlineModelByName knows.
var DeadlineModelNames = []string{"uniform", "modal"}

// DeadlineModelByName returns a deadline model with the thesis's settings:
// "uniform" is D = submit + runtime·f, f ~ U[1, 10]; "modal" draws rounded
// values (5 min … 24 h) at least as long as the runtime, 1 % of jobs getting
// the maximum, the longest runtime of jobs (at least 24 h).
func DeadlineModelByName(name string, jobs []Job) (DeadlineModel, error) {
	switch strings.ToLower(name) {
	case "uniform":
		return forecast.DefaultUniformDeadlines(), nil
	case "modal":
		var longest int64
		for _, j := range jobs {
			longest = max(longest, j.Runtime)
		}
		return forecast.DefaultModalDeadlines(longest), nil
	}
	return nil, fmt.Errorf("deadline model %q: want one of %s: %w", name, strings.Join(DeadlineModelNames, ", "), ErrBadConfig)
}

// WithDeadlines returns a copy of jobs with deadlines drawn by m, one job
// after the other in input order, from a PCG generator seeded with seed: the
// same input and seed give the same deadlines. Every deadline is at least
// the job's runtime after its submission (feasible) and at least one second
// after it (a 0-second job would otherwise be due at its submission, which
// the core refuses as malformed). The input is not modified.
func WithDeadlines(jobs []Job, m DeadlineModel, seed uint64) []Job {
	rng := rand.New(rand.NewPCG(seed, 0x64656164)) // "dead"
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		j.Deadline = max(m.Deadline(rng, j.Submit, j.Runtime), j.Submit+1)
		out[i] = j
	}
	return out
}

// DeadlineMetrics are the deadline figures of a replay (the forecasting
// digest's §6.2.5: hit ratio and overrun), over the jobs that ran and had a
// deadline. A job meets its deadline when it ends by it (End <= Deadline);
// its tardiness is max(0, End − Deadline) in seconds.
type DeadlineMetrics struct {
	// Jobs is the number of jobs that ran with a deadline.
	Jobs int `json:"deadline_jobs"`
	// Met is the share of them that met it, a fraction.
	Met float64 `json:"deadlines_met"`
	// MeanTardiness is the mean tardiness over all of them (0 for a met
	// deadline).
	MeanTardiness float64 `json:"mean_tardiness_s"`
	// LateMeanTardiness is the mean tardiness of the late jobs only (the
	// thesis's mean overrun); 0 when none is late.
	LateMeanTardiness float64 `json:"late_mean_tardiness_s"`
	// MaxTardiness is the largest tardiness.
	MaxTardiness int64 `json:"max_tardiness_s"`
}

// ComputeDeadlineMetrics computes the deadline metrics of records, or
// returns nil when no job that ran had a deadline.
func ComputeDeadlineMetrics(records []Record) *DeadlineMetrics {
	var m DeadlineMetrics
	var met, late int
	var sum float64
	for i := range records {
		r := &records[i]
		if !r.Started || r.Deadline >= plan.Forever {
			continue
		}
		m.Jobs++
		if r.End <= r.Deadline {
			met++
			continue
		}
		late++
		d := r.End - r.Deadline
		sum += float64(d)
		m.MaxTardiness = max(m.MaxTardiness, d)
	}
	if m.Jobs == 0 {
		return nil
	}
	m.Met = float64(met) / float64(m.Jobs)
	m.MeanTardiness = sum / float64(m.Jobs)
	if late > 0 {
		m.LateMeanTardiness = sum / float64(late)
	}
	return &m
}

// ScaleToLoad returns a copy of jobs whose submit times are scaled about
// the first one so that the offered load at actual runtimes, sum of
// procs x runtime over procs x (last submit - first submit), is load (0.9 =
// 90 %): the thesis's deadline experiment ran its cluster at 89 %. Order is
// kept (the scaling is monotone); deadlines, if any, keep their distance to
// the submission. load <= 0, or fewer than two distinct submit times, leave
// the times as they are. The input is not modified.
func ScaleToLoad(jobs []Job, procs int, load float64) []Job {
	out := make([]Job, len(jobs))
	copy(out, jobs)
	if load <= 0 || len(out) < 2 || procs <= 0 {
		return out
	}
	t0, t1 := out[0].Submit, out[len(out)-1].Submit
	if t1 <= t0 {
		return out
	}
	var area float64
	for _, j := range out {
		area += float64(j.Procs) * float64(j.Runtime)
	}
	factor := area / (float64(procs) * float64(t1-t0) * load)
	for i := range out {
		j := &out[i]
		s := t0 + int64(math.Round(float64(j.Submit-t0)*factor))
		if j.Deadline < plan.Forever {
			j.Deadline += s - j.Submit
		}
		j.Submit = s
	}
	return out
}
