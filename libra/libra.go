// Package libra is the deadline-proportional-share admission control of
// Yeo's thesis (2008, ../shared/spec/utility-libra-yeo-2008.md): Libra
// (Sherwani et al.), LibraSLA (penalty-aware returns, §4.2–4.3) and
// LibraRiskD (zero risk of deadline delay, §5.2), on time-shared nodes of
// capacity 1.0 each. A parallel job holds a share on each of its PROC
// distinct nodes; there is no queue: a job is accepted or rejected at its
// submission and starts at once.
//
// A Job here is one job's process on one node. Shares follow Libra's
// share = remainRE / remainD (eqs. 4.3, 5.5). The thesis leaves open what a
// process that has used up its estimate, or is past its deadline, asks for
// (its formula gives 0 or infinity); ours: such a process keeps its share at
// submission, RE / D, so that it still runs and still counts as load.
package libra

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Job is one job's process on a node. Times are seconds.
type Job struct {
	// Estimate is RE_i: the run time on a whole node.
	Estimate int64
	// Submit is TSU_i and Deadline TD_i = TSU_i + D_i (absolute).
	Submit, Deadline int64
	// Done is the CPU time the process has received so far.
	Done float64
	// Budget is B_i, paid on completion; PenaltyRate is PR_i, owed per
	// second of delay past the deadline.
	Budget, PenaltyRate float64
	// Hard is a HARD deadline (LibraSLA); false is SOFT.
	Hard bool
}

// D is the relative deadline D_i = TD_i − TSU_i.
func (j *Job) D() int64 { return j.Deadline - j.Submit }

// remainRE is the estimated CPU time still to give, never negative.
func (j *Job) remainRE() float64 { return math.Max(0, float64(j.Estimate)-j.Done) }

// Share is Libra's minimum share at now: remainRE / remainD, at most 1.
// A process past its estimate or its deadline keeps its share at
// submission, RE / D (our choice; see the package comment).
func (j *Job) Share(now float64) float64 {
	rre, rd := float64(j.Estimate)-j.Done, float64(j.Deadline)-now
	if rre > 0 && rd > 0 {
		return math.Min(1, rre/rd)
	}
	return math.Min(1, float64(j.Estimate)/float64(max(j.D(), 1)))
}

// unitReturn is (B_i/RE_i)/D_i, LibraSLA's return of a job not delayed.
func (j *Job) unitReturn() float64 {
	return j.Budget / float64(j.Estimate) / float64(max(j.D(), 1))
}

// Utility is U_i = B_i − DY_i·PR_i (eq. 4.1): linear and unbounded, so
// it can be negative.
func (j *Job) Utility(delay float64) float64 { return j.Budget - math.Max(0, delay)*j.PenaltyRate }

// Policy is one of the admission controls.
type Policy int

// Policies.
const (
	// Libra accepts on nodes where the total share stays within 1,
	// best fit.
	Libra Policy = iota
	// LibraSLA accepts on nodes whose return does not fall, ranked by
	// their new return (Figs. 4.2–4.3).
	LibraSLA
	// LibraRiskD accepts on nodes with zero risk of deadline delay
	// (eqs. 5.1–5.6, Fig. 5.1).
	LibraRiskD
)

var policyNames = [...]string{"libra", "libra-sla", "libra-riskd"}

func (p Policy) String() string {
	if p >= 0 && int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy parses a policy name as String writes it.
func ParsePolicy(name string) (Policy, error) {
	for i, n := range policyNames {
		if strings.EqualFold(name, n) {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("libra policy %q: want one of %s", name, strings.Join(policyNames[:], ", "))
}

// Verdict is why a job was accepted or rejected.
type Verdict int

// Verdicts.
const (
	Accepted Verdict = iota + 1
	// TooWide: more processors than the cluster has nodes.
	TooWide
	// CannotMeetDeadline: D_i <= RE_i (§1.4: the deadline must exceed
	// the runtime), or, under Libra, fewer than PROC_i nodes can supply
	// the share.
	CannotMeetDeadline
	// ReturnFalls: LibraSLA found fewer than PROC_i nodes whose return
	// does not fall (or, for a HARD job, that meet its deadline).
	ReturnFalls
	// DelayRisk: LibraRiskD found fewer than PROC_i zero-risk nodes.
	DelayRisk
)

var verdictNames = [...]string{"", "accepted", "too wide", "cannot meet deadline", "return falls", "risk of deadline delay"}

func (v Verdict) String() string {
	if v > 0 && int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// eps absorbs floating-point noise in the share and return comparisons.
const eps = 1e-9

// Admit decides whether the job j (one process of it; every process is
// alike) is accepted on procs of the nodes at now, and on which: the
// indexes of the chosen nodes, in the policy's order. nodes[k] are the
// processes on node k. Nothing is modified.
func (p Policy) Admit(nodes [][]Job, j Job, procs int, now float64) ([]int, Verdict) {
	if procs <= 0 || procs > len(nodes) {
		return nil, TooWide
	}
	if j.Estimate <= 0 || j.D() <= j.Estimate {
		return nil, CannotMeetDeadline
	}
	type cand struct {
		node int
		key  float64
	}
	var cands []cand
	with := func(k int) []Job { return append(slices.Clip(nodes[k]), j) }
	for k := range nodes {
		switch p {
		case Libra:
			if t := totalShare(with(k), now); t <= 1+eps {
				cands = append(cands, cand{k, 1 - t}) // free after adding: best fit, least first
			}
		case LibraSLA:
			old, _, _ := Return(nodes[k], now)
			nr, dy, _ := Return(with(k), now)
			if nr >= old-eps*math.Max(1, math.Abs(old)) && (!j.Hard || dy[len(dy)-1] <= eps) {
				cands = append(cands, cand{k, -nr}) // highest new return first
			}
		case LibraRiskD:
			if ZeroRisk(with(k), now) {
				cands = append(cands, cand{k, 0}) // the first zero-risk nodes
			}
		}
	}
	if len(cands) < procs {
		switch p {
		case LibraSLA:
			return nil, ReturnFalls
		case LibraRiskD:
			return nil, DelayRisk
		}
		return nil, CannotMeetDeadline
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.key, b.key) })
	out := make([]int, procs)
	for i := range out {
		out[i] = cands[i].node
	}
	return out, Accepted
}

func totalShare(jobs []Job, now float64) float64 {
	var t float64
	for i := range jobs {
		t += jobs[i].Share(now)
	}
	return t
}

// Rates are the processor shares the node gives its processes at now
// (they sum to 1 when the node has any). Libra and LibraRiskD share in
// proportion to the minimum shares: spare capacity is redistributed in
// proportion (§6.4.2) and an over-subscribed node scales every share down
// alike. LibraSLA gives the allocation of compute_new_return (Fig. 4.3,
// Return).
func (p Policy) Rates(jobs []Job, now float64) []float64 {
	if p == LibraSLA {
		_, _, alloc := Return(jobs, now)
		return alloc
	}
	return proportional(jobs, now)
}

func proportional(jobs []Job, now float64) []float64 {
	r := make([]float64, len(jobs))
	t := totalShare(jobs, now)
	for i := range jobs {
		r[i] = jobs[i].Share(now) / t
	}
	return r
}

// Return is LibraSLA's compute_new_return (Fig. 4.3, eqs. 4.5–4.6) of a
// node holding jobs at now: the node's return Σ (U_i/RE_i)/D_i, each
// process's predicted delay DY_i, and the allocation behind them.
//
// The job with the highest (B_i/RE_i)/D_i gets any spare processor time;
// then nobody on schedule is delayed. On an over-subscribed node that job
// and every HARD job keep their full shares and the other (SOFT) jobs
// split what is left in proportion to their shares (Fig. 4.3 line 11
// read as "<", as the prose says). The thesis does not handle HARD jobs
// alone exceeding the node; ours: every share is then scaled down alike.
// A process's delay is predicted as DY_i = now + remainRE_i/share'_i − TD_i
// (at least 0), the digest's remainRE/share' − remainD.
func Return(jobs []Job, now float64) (ret float64, delay, alloc []float64) {
	n := len(jobs)
	if n == 0 {
		return 0, nil, nil
	}
	share := make([]float64, n)
	var total float64
	h := 0
	for i := range jobs {
		share[i] = jobs[i].Share(now)
		total += share[i]
		if jobs[i].unitReturn() > jobs[h].unitReturn() {
			h = i
		}
	}
	alloc = make([]float64, n)
	copy(alloc, share)
	if total <= 1 {
		alloc[h] += 1 - total
	} else {
		fixed, soft := 0.0, 0.0
		for i := range jobs {
			if i == h || jobs[i].Hard {
				fixed += share[i]
			} else {
				soft += share[i]
			}
		}
		if fixed >= 1 {
			for i := range alloc {
				alloc[i] = share[i] / total
			}
		} else {
			for i := range jobs {
				if i != h && !jobs[i].Hard {
					alloc[i] = share[i] * (1 - fixed) / soft
				}
			}
		}
	}
	delay = make([]float64, n)
	for i := range jobs {
		end := now + jobs[i].remainRE()/alloc[i]
		delay[i] = math.Max(0, end-float64(jobs[i].Deadline))
		ret += jobs[i].Utility(delay[i]) / float64(jobs[i].Estimate) / float64(max(jobs[i].D(), 1))
	}
	return ret, delay, alloc
}

// Project predicts when each process on a node ends, trusting the
// estimates: from now, event to event, every process gets its Libra
// proportional rate (Rates), shares recomputed at each predicted end.
// A process whose estimate is used up is predicted to end now. This is
// the delay predictor LibraRiskD needs and the thesis leaves unspecified
// (the digest's suggestion).
func Project(jobs []Job, now float64) []float64 {
	end := make([]float64, len(jobs))
	live := make([]Job, 0, len(jobs))
	idx := make([]int, 0, len(jobs))
	for i := range jobs {
		if jobs[i].remainRE() <= eps {
			end[i] = now
			continue
		}
		live = append(live, jobs[i])
		idx = append(idx, i)
	}
	t := now
	for len(live) > 0 {
		r := proportional(live, t)
		dt := math.Inf(1)
		for i := range live {
			dt = math.Min(dt, live[i].remainRE()/r[i])
		}
		t += dt
		k := 0
		for i := range live {
			live[i].Done += dt * r[i]
			if live[i].remainRE() <= eps*math.Max(1, float64(live[i].Estimate)) {
				end[idx[i]] = t
				continue
			}
			live[k], idx[k] = live[i], idx[i]
			k++
		}
		live, idx = live[:k], idx[:k]
	}
	return end
}

// Risk is LibraRiskD's risk of deadline delay of a node (eqs. 5.1–5.4)
// over its processes not yet past their deadline at now (for the others
// DDY = (DY + remainD)/remainD is undefined: remainD <= 0): the mean μ and
// population standard deviation σ of DDY_i, and the largest predicted
// delay DY_i, from Project.
func Risk(jobs []Job, now float64) (mu, sigma, maxDelay float64) {
	end := Project(jobs, now)
	var s, s2 float64
	n := 0
	for i := range jobs {
		rd := float64(jobs[i].Deadline) - now
		if rd <= 0 {
			continue
		}
		dy := math.Max(0, end[i]-float64(jobs[i].Deadline))
		ddy := (dy + rd) / rd
		s += ddy
		s2 += ddy * ddy
		maxDelay = math.Max(maxDelay, dy)
		n++
	}
	if n == 0 {
		return 1, 0, 0
	}
	mu = s / float64(n)
	return mu, math.Sqrt(math.Max(0, s2/float64(n)-mu*mu)), maxDelay
}

// ZeroRisk is LibraRiskD's suitability test of a node: σ = 0 (the
// thesis), and, as the digest advises, no predicted delay at all (σ alone
// is 0 on any node whose processes are all delayed alike). Delays under a
// millisecond are taken as none.
func ZeroRisk(jobs []Job, now float64) bool {
	_, sigma, dy := Risk(jobs, now)
	return sigma <= 1e-6 && dy <= 1e-3
}
