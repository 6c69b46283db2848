package e2e

import (
	"context"
	"fmt"
	"time"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// ListAllJobs returns every job site s stores, in id order: the jobs
// submitted there (wherever they ran) and the jobs it received from peers.
func ListAllJobs(ctx context.Context, s *Site) ([]*fedschedv1.Job, error) {
	return listJobs(ctx, s, nil)
}

func listJobs(ctx context.Context, s *Site, states []fedschedv1.JobState) ([]*fedschedv1.Job, error) {
	var out []*fedschedv1.Job
	token := ""
	for {
		r, err := s.Client.ListJobs(ctx, &fedschedv1.ListJobsRequest{States: states, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list jobs of %s: %w", s.Name, err)
		}
		out = append(out, r.GetJobs()...)
		if token = r.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// SiteSummary is what one site did, from its jobs as its API reports
// them. The first group counts the jobs submitted at the site; the second
// the jobs the site ran on its own processors (its own and those received
// from peers), and the SLA outcomes and money of those.
type SiteSummary struct {
	Site string
	// Submitted at this site; Rejected of those (by the whole
	// federation: neither this site nor a peer took them); DelegatedOut
	// of those, run by a peer under an agreement.
	Submitted, Rejected, DelegatedOut int
	// Accepted: jobs this site took to run itself, its own and those
	// received from peers (DelegatedIn); Overbooked of those, admitted
	// into a gap shorter than their estimate.
	Accepted, DelegatedIn, Overbooked int
	// SLA outcomes of the accepted jobs with a deadline: Accepted SLA
	// jobs = Met + Violated + Cancelled + Open. NoSLA counts accepted
	// best-effort jobs.
	Met, Violated, Cancelled, Open, NoSLA int
	// Gain is the fees of met SLAs minus the penalties of violated ones,
	// in virtual coins (one VC is one processor-hour of estimate).
	Gain float64
	// Live counts jobs still pending, running or delegated here (those
	// submitted here and those received).
	Live int
	// Mismatches lists the accepted SLA jobs whose outcome disagrees with
	// their recorded start, end and reservation (see CheckOutcome); a
	// sound site has none.
	Mismatches []string
}

// Summarize counts the jobs of site s. Its timing tolerance is two seconds
// of wall time in the cluster's clock.
func Summarize(ctx context.Context, s *Site) (SiteSummary, error) {
	jobs, err := ListAllJobs(ctx, s)
	if err != nil {
		return SiteSummary{}, err
	}
	return SummarizeJobs(s.Name, jobs, time.Duration(2*s.c.opts.TimeScale*float64(time.Second))), nil
}

// SummarizeJobs counts the jobs a site reported. tol is how far the
// recorded times may be off (the node's whole-second clock, a busy
// machine's lateness times the clock's speed).
func SummarizeJobs(site string, jobs []*fedschedv1.Job, tol time.Duration) SiteSummary {
	sum := SiteSummary{Site: site}
	for _, j := range jobs {
		st := j.GetState()
		switch st {
		case fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_DELEGATED:
			sum.Live++
		}
		if j.GetOriginSite() == site {
			sum.Submitted++
			if st == fedschedv1.JobState_JOB_STATE_REJECTED {
				sum.Rejected++
			} else if j.GetSite() != site {
				sum.DelegatedOut++
			}
		}
		if j.GetSite() != site || st == fedschedv1.JobState_JOB_STATE_REJECTED {
			continue
		}
		// A job delegated here whose origin still waits for the
		// agreement is not counted twice: it is only here.
		sum.Accepted++
		if j.GetOriginSite() != site {
			sum.DelegatedIn++
		}
		if wasOverbooked(j) {
			sum.Overbooked++
		}
		if j.GetSpec().GetDeadline() == nil {
			sum.NoSLA++
			continue
		}
		if err := CheckOutcome(j, tol); err != nil {
			sum.Mismatches = append(sum.Mismatches, err.Error())
		}
		switch j.GetSlaOutcome() {
		case fedschedv1.SlaOutcome_SLA_OUTCOME_MET:
			sum.Met++
			sum.Gain += j.GetSpec().GetFee()
		case fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED:
			sum.Violated++
			sum.Gain -= j.GetSpec().GetPenalty()
		case fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED:
			sum.Cancelled++
		default:
			sum.Open++
		}
	}
	return sum
}

// wasOverbooked reports whether a job was admitted into a reservation
// shorter than its estimate.
func wasOverbooked(j *fedschedv1.Job) bool {
	if j.GetOverbooked() {
		return true
	}
	for _, h := range j.GetHistory() {
		if h.GetReason() == fedschedv1.Reason_REASON_OVERBOOKED {
			return true
		}
	}
	return false
}

// Summaries summarizes every running site.
func (c *Cluster) Summaries(ctx context.Context) ([]SiteSummary, error) {
	var out []SiteSummary
	for _, s := range c.sites {
		if !s.Running() {
			continue
		}
		sum, err := Summarize(ctx, s)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

// CheckOutcome checks that the SLA outcome of a job with a deadline,
// accepted by the site that ran it, agrees with what the job's record says
// happened, within tol for the times the node measured (a slot's length is
// exact; the start and end of a run are the node's readings of its clock):
//   - its reservation ends by the deadline (admission promised that);
//   - MET: it started no earlier than its reservation, ran no longer than
//     its slot (a late start moves the slot with it), ended, and, if it was
//     killed at the end of its reservation, had its full estimate;
//   - VIOLATED: the provider's fault shows: it never started, was lost, was
//     killed before its estimate was up, or ended after the deadline;
//   - CANCELLED: the job was cancelled;
//   - OPEN: the job has not ended.
func CheckOutcome(j *fedschedv1.Job, tol time.Duration) error {
	slack := max(tol, time.Second)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s (%v/%v, sla %v): %s", j.GetId(), j.GetState(), j.GetReason(), j.GetSlaOutcome(), fmt.Sprintf(format, args...))
	}
	deadline := j.GetSpec().GetDeadline().AsTime()
	res := j.GetReservation()
	if res != nil && res.GetEnd().AsTime().After(deadline.Add(time.Second)) {
		return bad("reservation ends %v, after the deadline %v", res.GetEnd().AsTime(), deadline)
	}
	started, ended := j.GetStartTime() != nil, j.GetEndTime() != nil
	start, end := j.GetStartTime().AsTime(), j.GetEndTime().AsTime()
	ran := end.Sub(start)
	estimate := time.Duration(j.GetSpec().GetEstimateSeconds()) * time.Second
	// A job killed at the end of its reservation had its estimate if its
	// run, and its slot, were as long (the node judges so from these
	// recorded times; an overbooked slot is shorter than the estimate).
	got := ran
	if res != nil {
		got = min(got, res.GetEnd().AsTime().Sub(res.GetStart().AsTime()))
	}
	killedEarly := j.GetState() == fedschedv1.JobState_JOB_STATE_KILLED && got+time.Second <= estimate
	switch j.GetSlaOutcome() {
	case fedschedv1.SlaOutcome_SLA_OUTCOME_MET:
		switch {
		case !started || !ended:
			return bad("met, but started %v, ended %v", started, ended)
		case res == nil:
			return bad("met without a reservation")
		case start.Add(time.Second).Before(res.GetStart().AsTime()):
			return bad("started %v, before its reservation %v", start, res.GetStart().AsTime())
		case ran > res.GetEnd().AsTime().Sub(res.GetStart().AsTime())+slack:
			return bad("ran %v, longer than its slot %v", ran, res.GetEnd().AsTime().Sub(res.GetStart().AsTime()))
		case killedEarly:
			return bad("met, but killed after %v of its %v estimate", ran, estimate)
		}
	case fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED:
		lost := j.GetReason() == fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART
		late := ended && end.After(deadline)
		if started && !lost && !killedEarly && !late {
			return bad("violated, but it ran %v of its %v estimate and ended %v, by the deadline %v", ran, estimate, end, deadline)
		}
	case fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED:
		if j.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
			return bad("SLA cancelled, but the job was not")
		}
	default:
		if terminal := j.GetState() != fedschedv1.JobState_JOB_STATE_PENDING && j.GetState() != fedschedv1.JobState_JOB_STATE_RUNNING &&
			j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED; terminal {
			return bad("ended with its SLA still open")
		}
	}
	return nil
}
