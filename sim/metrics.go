package sim

import (
	"math"
	"slices"
)

// BoundedSlowdownTau is the runtime floor of the bounded slowdown, in seconds.
const BoundedSlowdownTau = 10

// Metrics are the per-site figures of a replay, as the federation digest
// (Papaspyrou 2013, §3.3) defines them, plus bounded slowdown and wait-time
// percentiles. Times are in seconds. Only jobs that ran count; jobs that were
// rejected or never started are counted apart.
type Metrics struct {
	// Jobs is the number of jobs that ran.
	Jobs int `json:"jobs"`
	// Rejected is the number of jobs the site refused at submission.
	Rejected int `json:"rejected"`
	// Killed is the number of jobs cut at the end of their reservation.
	Killed int `json:"killed"`
	// AWRT is the average weighted response time: sum of SA_j*(C_j - r_j)
	// over sum of SA_j, with SA_j = m_j*p_j the squashed area.
	AWRT float64 `json:"awrt_s"`
	// AWWT is the same weighting of the wait time (start - r_j).
	AWWT float64 `json:"awwt_s"`
	// Utilization is SA over m*(C_max - min start), a fraction.
	Utilization float64 `json:"utilization"`
	// Makespan is C_max, the latest completion time (trace time).
	Makespan int64 `json:"makespan_s"`
	// SquashedArea is the sum of m_j*p_j over the jobs that ran, in
	// processor-seconds.
	SquashedArea float64 `json:"squashed_area"`
	// BoundedSlowdown is the mean of max(1, (wait+p)/max(p, tau)), tau = 10 s.
	BoundedSlowdown float64 `json:"bounded_slowdown"`
	// WaitP50, WaitP90 and WaitP99 are wait-time percentiles (nearest rank).
	WaitP50 float64 `json:"wait_p50_s"`
	WaitP90 float64 `json:"wait_p90_s"`
	WaitP99 float64 `json:"wait_p99_s"`
	// MeanWait is the unweighted mean wait.
	MeanWait float64 `json:"mean_wait_s"`
}

// ComputeMetrics computes the metrics of records on a site of procs
// processors. A job with p_j = 0 has no area and so no weight in AWRT and
// AWWT, exactly as the definition says.
func ComputeMetrics(records []Record, procs int) Metrics {
	return metricsOf(len(records), func(i int) *Record { return &records[i] }, procs)
}

// metricsOf is ComputeMetrics of the n records at(0), ..., at(n−1), read
// in that order, each before the next call: a result's metrics without a
// copy of its records.
func metricsOf(n int, at func(int) *Record, procs int) Metrics {
	var m Metrics
	var sa, rt, wt, bsld float64
	firstStart := int64(math.MaxInt64)
	waits := make([]int64, 0, n) // whole seconds: sorted as integers, summed as floats
	for i := range n {
		r := at(i)
		if !r.Decision.OK() {
			m.Rejected++
			continue
		}
		if !r.Started {
			continue
		}
		m.Jobs++
		if r.Killed {
			m.Killed++
		}
		p := r.Ran()
		area := float64(r.Procs) * float64(p)
		wait := r.Start - r.Submit
		sa += area
		rt += area * float64(r.End-r.Submit)
		wt += area * float64(wait)
		bsld += max(1, float64(wait+p)/float64(max(p, BoundedSlowdownTau)))
		waits = append(waits, wait)
		m.Makespan = max(m.Makespan, r.End)
		firstStart = min(firstStart, r.Start)
	}
	if m.Jobs == 0 {
		return m
	}
	m.SquashedArea = sa
	if sa > 0 {
		m.AWRT = rt / sa
		m.AWWT = wt / sa
	}
	if span := m.Makespan - firstStart; span > 0 {
		m.Utilization = sa / (float64(procs) * float64(span))
	}
	m.BoundedSlowdown = bsld / float64(m.Jobs)
	slices.Sort(waits)
	var sum float64
	for _, w := range waits {
		sum += float64(w)
	}
	m.MeanWait = sum / float64(len(waits))
	m.WaitP50 = percentile(waits, 0.50)
	m.WaitP90 = percentile(waits, 0.90)
	m.WaitP99 = percentile(waits, 0.99)
	return m
}

// percentile returns the nearest-rank q-quantile of sorted values.
func percentile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[max(0, min(k, len(sorted)-1))])
}
