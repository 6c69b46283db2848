package e2e

import (
	"context"
	"fmt"

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
}

// Summarize counts the jobs of site s.
func Summarize(ctx context.Context, s *Site) (SiteSummary, error) {
	jobs, err := ListAllJobs(ctx, s)
	if err != nil {
		return SiteSummary{}, err
	}
	return SummarizeJobs(s.Name, jobs), nil
}

// SummarizeJobs counts the jobs a site reported.
func SummarizeJobs(site string, jobs []*fedschedv1.Job) SiteSummary {
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
