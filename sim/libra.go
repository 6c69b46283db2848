package sim

import (
	"context"
	"math"
	"slices"

	"github.com/fedsched/fedsched/libra"
	"github.com/fedsched/fedsched/plan"
)

// libraPolicy is the Libra admission control of a Libra strategy.
func (s Strategy) libraPolicy() (libra.Policy, bool) {
	switch s {
	case Libra:
		return libra.Libra, true
	case LibraSLA:
		return libra.LibraSLA, true
	case LibraRiskD:
		return libra.LibraRiskD, true
	}
	return 0, false
}

// IsLibra reports whether s is one of Yeo's time-shared Libra baselines
// rather than a planning strategy.
func (s Strategy) IsLibra() bool { _, ok := s.libraPolicy(); return ok }

// PenaltyRate is the penalty rate PR_i a Libra strategy gives a job
// whose SLA has a flat penalty: currency per second of delay such that a
// delay as long as the estimate costs the whole penalty (Yeo's rate is
// per unit of delay; this project's SLAs owe a flat penalty). A job
// without an estimate has none.
func PenaltyRate(j *Job) float64 {
	if j.Estimate <= 0 {
		return 0
	}
	return j.Penalty / float64(j.Estimate)
}

// libraProc is one process of a running job on a node.
type libraProc struct {
	rec  int       // index of the job's record
	job  libra.Job // what admission sees (Done advances)
	left float64   // actual CPU seconds still needed
}

// runLibra replays one prepared run on cfg.Procs time-shared nodes under
// a Libra policy (package libra): each job is accepted or rejected at its
// submission, and an accepted one starts at once with a process on each
// of its nodes. Every process then runs at the rate its node's policy
// gives it (Policy.Rates, recomputed at every submission and process end:
// the thesis's periodic re-partitioning, at events) until it has had its
// actual runtime; nothing is killed. A job ends with its last process.
//
// Records: Start is the submission; End the job's end (rounded to the
// second); Reserved the wall time it took. Settlement (SLARun) uses the
// same rule as the planning strategies, so that gains compare: an SLA is
// met when the job ends by its deadline (fee earned), violated otherwise
// (penalty owed); Utility is Yeo's Σ B_i − DY_i·PR_i besides.
func runLibra(ctx context.Context, jobs []Job, cfg SLAConfig) (SLARun, []Record, error) {
	pol, _ := cfg.Strategy.libraPolicy()
	recs := make([]Record, len(jobs))
	order := make([]int, len(jobs))
	for i := range jobs {
		recs[i] = Record{Job: jobs[i]}
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(jobs[a].Submit - jobs[b].Submit) })
	nodes := make([][]libraProc, cfg.Procs)
	left := make([]int, len(jobs)) // processes of each job still running
	view := make([][]libra.Job, cfg.Procs)
	rates := make([][]float64, cfg.Procs)
	now := 0.0
	if len(order) > 0 {
		now = float64(jobs[order[0]].Submit)
	}
	repartition := func() {
		for k := range nodes {
			view[k] = view[k][:0]
			for _, p := range nodes[k] {
				view[k] = append(view[k], p.job)
			}
			rates[k] = rates[k][:0]
			if len(view[k]) > 0 {
				rates[k] = pol.Rates(view[k], now)
			}
		}
	}
	finish := func(at float64) (ended int) {
		for k := range nodes {
			kept := nodes[k][:0]
			for _, p := range nodes[k] {
				if p.left > 1e-6 {
					kept = append(kept, p)
					continue
				}
				ended++
				if left[p.rec]--; left[p.rec] == 0 {
					r := &recs[p.rec]
					r.End = int64(math.Round(at))
					r.Reserved = r.End - r.Start
				}
			}
			nodes[k] = kept
		}
		return ended
	}
	next, active := 0, 0
	for next < len(order) || active > 0 {
		if err := ctx.Err(); err != nil {
			return SLARun{}, nil, err
		}
		repartition()
		// The next process end at the current rates, or the next
		// submission, whichever comes first (an end first on a tie).
		dt := math.Inf(1)
		for k := range nodes {
			for i, p := range nodes[k] {
				dt = math.Min(dt, p.left/rates[k][i])
			}
		}
		ta := math.Inf(1)
		if next < len(order) {
			ta = float64(jobs[order[next]].Submit)
		}
		step := math.Min(dt, math.Max(0, ta-now))
		for k := range nodes {
			for i := range nodes[k] {
				d := step * rates[k][i]
				nodes[k][i].left -= d
				nodes[k][i].job.Done += d
			}
		}
		now += step
		if step == dt {
			active -= finish(now)
			continue
		}
		i := order[next]
		next++
		j := &jobs[i]
		lj := libra.Job{Estimate: j.Estimate, Submit: j.Submit, Deadline: j.Deadline, Budget: j.Fee,
			PenaltyRate: PenaltyRate(j), Hard: j.Hard}
		repartition()
		picked, v := pol.Admit(view, lj, j.Procs, now)
		r := &recs[i]
		if v != libra.Accepted {
			r.Decision = plan.Placement{Reason: libraReason(v)}
			continue
		}
		r.Decision = plan.Placement{Start: j.Submit, End: j.Deadline, Reason: plan.ReasonPlacedInFull}
		r.Planned, r.Promised, r.Started, r.Start = j.Submit, true, true, j.Submit
		left[i] = len(picked)
		for _, k := range picked {
			nodes[k] = append(nodes[k], libraProc{rec: i, job: lj, left: float64(j.Runtime)})
		}
		active += len(picked) - finish(now) // a job of no runtime ends at once
	}
	run := settleLibra(recs, cfg.Procs)
	return run, recs, nil
}

func libraReason(v libra.Verdict) plan.Reason {
	switch v {
	case libra.TooWide:
		return plan.ReasonRejectedTooWide
	case libra.DelayRisk, libra.ReturnFalls:
		return plan.ReasonRejectedRisk
	}
	return plan.ReasonRejectedNoGap
}

// settleLibra settles the SLAs of a Libra replay: met when the job ended
// by its deadline, violated otherwise; Utility sums B − DY·PR over the
// accepted jobs. The metrics weigh each job by its CPU time (procs ×
// runtime), not by the wall time it held its nodes: under time sharing a
// job shares its nodes for longer than it computes.
func settleLibra(recs []Record, procs int) SLARun {
	var out SLARun
	var util float64
	for i := range recs {
		r := &recs[i]
		if !r.Decision.OK() {
			out.Rejected++
			continue
		}
		out.Accepted++
		delay := max(0, r.End-r.Deadline)
		util += r.Fee - float64(delay)*PenaltyRate(&r.Job)
		if delay == 0 {
			out.Met++
			out.Fees += r.Fee
		} else {
			out.Violated++
			out.Penalties += r.Penalty
		}
	}
	out.Gain = out.Fees - out.Penalties
	out.Utility = &util
	out.Metrics = ComputeMetrics(recs, procs)
	var sa, rt, wt float64
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range recs {
		r := &recs[i]
		if !r.Started {
			continue
		}
		a := float64(r.Procs) * float64(r.Runtime)
		sa += a
		rt += a * float64(r.End-r.Submit)
		wt += a * float64(r.Start-r.Submit)
		first, last = min(first, r.Start), max(last, r.End)
	}
	m := &out.Metrics
	m.SquashedArea, m.AWRT, m.AWWT, m.Utilization = sa, 0, 0, 0
	if sa > 0 {
		m.AWRT, m.AWWT = rt/sa, wt/sa
	}
	if last > first {
		m.Utilization = sa / (float64(procs) * float64(last-first))
	}
	return out
}
