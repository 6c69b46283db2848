package plan

import (
	"fmt"
	"strings"
)

// Job is a rigid parallel job as the core sees it: Procs processors for up
// to Estimate seconds, to run inside [Release, Deadline). A job without a
// deadline (Deadline == Forever) is best-effort. Fee and Penalty are the
// SLA's money, used by admission tests that weigh risk; User, Group and App
// key runtime statistics.
//
// Under the deadline policies (EDF, LTTR) the deadline is soft: it orders
// the queue, and a job that can no longer meet it still runs.
type Job struct {
	ID       int64
	Procs    int
	Estimate int64
	Release  int64
	Deadline int64
	Fee      float64
	Penalty  float64
	User     string
	Group    string
	App      string
	// Forecast is a runtime forecast in seconds made when the job was
	// submitted (by the driver, e.g. from forecast.Forecaster); 0 (or
	// less) means none: use Estimate. Only LTTR reads it, for its key
	// deadline − forecast. The job is still reserved, and killed, at its
	// estimate.
	Forecast int64
}

// Window is the job's reservation window limits.
func (j *Job) window(now int64) (from, to int64) {
	return max(now, j.Release), j.Deadline
}

// Killed reports whether a running job that would end by itself at end is
// cut by a kill at killAt. At equal times a job's own end comes first: a job
// that finishes exactly when its reservation ends has finished, and was not
// killed. Drivers decide every job's end by this rule (the simulator on its
// virtual clock; the node by killing only after the kill's whole second).
func Killed(end, killAt int64) bool { return end > killAt }

// Policy is a site's queue policy.
type Policy int

// The queue policies. See docs/policies.md for exactly what each does.
const (
	// Conservative backfilling: every accepted job holds a reservation at
	// its earliest fit; when a job ends early, waiting reservations move
	// earlier one at a time, in submission order, without delaying anyone.
	Conservative Policy = iota
	// EASY backfilling: only the first waiting job holds a reservation;
	// later jobs start out of order when they do not delay it.
	EASY
	// FCFS: jobs start in submission order; nobody overtakes.
	FCFS
	// LIST: list scheduling: whenever processors are free, start the first
	// waiting job, in submission order, that fits now; no reservations.
	LIST
	// EDF: earliest deadline first. EASY backfilling with the queue kept in
	// deadline order (ties: submission order; jobs without a deadline
	// last) instead of submission order. Deadlines are soft.
	EDF
	// LTTR: latest time to run first (Lazarević 2008, Eq. 6.1). As EDF,
	// with the queue in order of deadline − forecast (Job.Forecast, else
	// the estimate): the latest start that still meets the deadline.
	LTTR
)

var policyNames = [...]string{"conservative", "easy", "fcfs", "list", "edf", "lttr"}

// DeadlineOrdered reports whether the policy orders its queue by the jobs'
// deadlines (EDF, LTTR) rather than by submission.
func (p Policy) DeadlineOrdered() bool { return p == EDF || p == LTTR }

func (p Policy) String() string {
	if p >= 0 && int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy parses a policy name as String writes it (case-insensitive).
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if strings.EqualFold(s, n) {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("policy %q: want one of %s: %w", s, strings.Join(policyNames[:], ", "), ErrUnknownPolicy)
}

// Reason says why the core decided what it did. Every reject, delegate and
// kill carries one; drivers show it to users.
type Reason int

// Reasons.
const (
	ReasonNone Reason = iota
	// ReasonPlacedInFull: accepted with a reservation as long as the estimate.
	ReasonPlacedInFull
	// ReasonOverbooked: accepted into a gap shorter than the estimate.
	ReasonOverbooked
	// ReasonQueued: accepted into the queue of a policy without reservations.
	ReasonQueued
	// ReasonRejectedNoGap: no slot inside the job's window.
	ReasonRejectedNoGap
	// ReasonRejectedRisk: slots exist but every one fails the risk test.
	ReasonRejectedRisk
	// ReasonRejectedTooWide: the job asks for more processors than the site has.
	ReasonRejectedTooWide
	// ReasonRejectedInvalid: the job is malformed (no processors, no estimate,
	// a window shorter than it can ever run in).
	ReasonRejectedInvalid
)

var reasonNames = [...]string{
	"none", "placed in full", "overbooked", "queued",
	"rejected: no gap", "rejected: risk", "rejected: too wide", "rejected: invalid",
}

func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Accepted reports whether the reason is one of acceptance.
func (r Reason) Accepted() bool {
	return r == ReasonPlacedInFull || r == ReasonOverbooked || r == ReasonQueued
}

// Placement is an admission test's answer: where to reserve a job, or why
// not. PoF is the probability that the job fails its SLA in that slot.
//
// Samples is the (aged) number of runtime samples an overbooking admission
// test judged a slot shorter than the job's estimate with, and
// TooFewSamples says it declined to overbook because they were fewer than
// it needs; both are zero when it judged no such slot.
type Placement struct {
	Start, End    int64
	PoF           float64
	Reason        Reason
	Samples       float64
	TooFewSamples bool
}

// OK reports whether the placement is an acceptance.
func (p Placement) OK() bool { return p.Reason.Accepted() }

// Admission decides where a job goes in a plan under a planning policy. The
// plan declares it; overbook implements the risk-aware variant.
// Implementations must not change the plan.
type Admission interface {
	// Admit places a new job, or says why it cannot.
	Admit(p *Plan, j *Job, now int64) Placement
	// Replan re-places an accepted, waiting job whose reservation has been
	// taken out of the plan; cur is where it was, which is still free. The
	// answer must be acceptable and never worse than cur for the job.
	Replan(p *Plan, j *Job, now int64, cur Placement) Placement
}

// FullEstimate is the admission of a plain planning scheduler: a job is
// accepted only into a slot as long as its estimate, at its earliest fit.
type FullEstimate struct{}

// Admit places j at its earliest full-length fit inside its window.
func (FullEstimate) Admit(p *Plan, j *Job, now int64) Placement {
	if j.Procs > p.Procs() {
		return Placement{Reason: ReasonRejectedTooWide}
	}
	from, to := j.window(now)
	s, ok := p.EarliestFit(j.Procs, j.Estimate, from, to)
	if !ok {
		return Placement{Reason: ReasonRejectedNoGap}
	}
	return Placement{Start: s, End: s + j.Estimate, Reason: ReasonPlacedInFull}
}

// Replan moves j to the earliest slot of its current length; that is never
// later than cur because cur is free.
func (FullEstimate) Replan(p *Plan, j *Job, now int64, cur Placement) Placement {
	from, to := j.window(now)
	s, ok := p.EarliestFit(j.Procs, cur.End-cur.Start, from, to)
	if !ok || s > cur.Start {
		return cur
	}
	cur.End, cur.Start = s+(cur.End-cur.Start), s
	return cur
}
