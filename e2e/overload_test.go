package e2e

import (
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestOverload sends one site more SLA work than it can accept: the excess
// is delegated to the two peers, every accepted job ends with a settled
// SLA, the route of every delegated job goes from the origin to the site
// that ran it, and the totals add up at the origin and across the sites.
func TestOverload(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 200, Federation: fed(), Sites: []SiteConfig{
		{Name: "a", Procs: 8, Overbooking: config.Overbooking{Enabled: true}},
		{Name: "b", Procs: 8},
		{Name: "c", Procs: 16},
	}})
	a := c.Site("a")
	// 24 jobs of half the origin, 600 s estimated: the origin fits 4
	// before their deadlines (two at a time, two rounds), the peers 12.
	var jobs []*fedschedv1.Job
	for i := range 24 {
		rt := int64(600)
		if i%2 == 1 {
			rt = 240 // ends well before its estimate
		}
		jobs = append(jobs, submit(t, a, slaSpec(c, 4, 600, rt)))
	}
	var local, delegated, rejected int
	for _, j := range jobs {
		switch {
		case j.GetState() == fedschedv1.JobState_JOB_STATE_REJECTED:
			rejected++
		case j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED:
			delegated++
		case j.GetSite() == "a":
			local++
		default:
			t.Errorf("submit answered %s", brief(j))
		}
	}
	t.Logf("submit answers: %d local, %d delegated, %d rejected", local, delegated, rejected)
	if local == 0 || delegated == 0 {
		t.Fatalf("want both local and delegated jobs, got %d local, %d delegated", local, delegated)
	}
	// Everything settles within the deadlines (2 x 600 s of virtual time).
	var final []*fedschedv1.Job
	for _, j := range jobs {
		final = append(final, waitJob(t, a, j.GetId(), 30*time.Second, "terminal", terminal))
	}
	var accepted, met, violated, cancelled int
	byPeer := map[string]int{}
	ctx := bg(t)
	for i, j := range final {
		if j.GetState() == fedschedv1.JobState_JOB_STATE_REJECTED {
			if jobs[i].GetState() != fedschedv1.JobState_JOB_STATE_REJECTED {
				t.Errorf("accepted job rejected later: %s", brief(j))
			}
			if j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED || j.GetMessage() == "" {
				t.Errorf("rejected job: %s", brief(j))
			}
			continue
		}
		accepted++
		switch j.GetSlaOutcome() {
		case fedschedv1.SlaOutcome_SLA_OUTCOME_MET:
			met++
		case fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED:
			violated++
			// No site here overbooks but a.
			if j.GetSite() != "a" {
				t.Errorf("violated at a site that does not overbook: %s", brief(j))
			}
		case fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED:
			cancelled++
		default:
			t.Errorf("accepted job without a settled SLA: %s", brief(j))
		}
		if j.GetSite() == "a" {
			if len(j.GetRoute()) != 1 {
				t.Errorf("local job with a route: %s", brief(j))
			}
			continue
		}
		// Delegated: provenance at the origin, and the executing site's
		// own record agrees.
		exec := c.Site(j.GetSite())
		if exec == nil {
			t.Errorf("delegated to an unknown site: %s", brief(j))
			continue
		}
		byPeer[exec.Name]++
		checkRoute(t, j, "a", exec.Name)
		ag, err := exec.Fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: j.GetId()})
		if err != nil {
			t.Errorf("agreement of %s at %s: %v", j.GetId(), exec.Name, err)
			continue
		}
		if st := ag.GetAgreement().GetState(); st != fedschedv1.AgreementState_AGREEMENT_STATE_COMPLETE {
			t.Errorf("agreement of %s at %s is %v", j.GetId(), exec.Name, st)
		}
		pj, err := getJob(ctx, exec, ag.GetAgreement().GetPeerJobId())
		if err != nil {
			t.Errorf("peer job of %s: %v", j.GetId(), err)
			continue
		}
		if pj.GetState() != j.GetState() || pj.GetSlaOutcome() != j.GetSlaOutcome() || pj.GetOriginSite() != "a" {
			t.Errorf("origin says %s, executing site says %s", brief(j), brief(pj))
		}
		checkRoute(t, pj, "a", exec.Name)
	}
	if accepted != met+violated+cancelled {
		t.Errorf("accepted %d != met %d + violated %d + cancelled %d", accepted, met, violated, cancelled)
	}
	if accepted != local+delegated {
		t.Errorf("accepted %d at the end, %d local + %d delegated at submission", accepted, local, delegated)
	}
	// Totals across the sites: what a delegated out, the peers took in.
	sums, err := c.Summaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var in int
	for _, s := range sums {
		t.Logf("%+v", s)
		if s.Site == "a" {
			if s.Submitted != len(jobs) || s.DelegatedOut != delegated || s.Rejected != rejected || s.Live != 0 || len(s.Mismatches) > 0 {
				t.Errorf("origin summary %+v", s)
			}
			continue
		}
		in += s.DelegatedIn
		if s.DelegatedIn != byPeer[s.Site] || len(s.Mismatches) > 0 || s.Open != 0 || s.Live != 0 {
			t.Errorf("peer summary %+v, want %d delegated in", s, byPeer[s.Site])
		}
	}
	if in != delegated {
		t.Errorf("peers took %d jobs in, the origin delegated %d", in, delegated)
	}
}
