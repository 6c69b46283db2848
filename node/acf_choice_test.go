package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestACFKeepsAJobNoQuoteBeats: under ACF a quote is taken only if it
// ends before the origin's own placement (site.Choose, the site agent's
// rule). s0 (one processor, overbooking from a history of jobs that used
// 10 % of their estimate) can place an SLA job only overbooked, into the
// 299 s before a job released then, ending long before the idle peer's
// start-now quote for the full estimate: the job stays home, overbooked.
// The node used to take any start-now quote and delegated it.
func TestACFKeepsAJobNoQuoteBeats(t *testing.T) {
	history := writeHistory(t, 120, 100)
	sites := startFederationSites(t, 100, node.FederationConfig{}, func(i int, c *config.Config) {
		c.Delegation.Transfer = "acf"
		if i == 0 {
			c.Overbooking.Enabled, c.Overbooking.History, c.Overbooking.AgeFactor = true, history, 1
		}
	}, 1, 1)
	ctx := context.Background()
	cl := sites[0].client
	j := overbookScenario(t, cl, 100)
	if j.GetSite() != "s0" || !j.GetOverbooked() || j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("SLA job: %v at %s, overbooked %v: %s", j.GetState(), j.GetSite(), j.GetOverbooked(), j.GetMessage())
	}
	ex, err := cl.Explain(ctx, &fedschedv1.ExplainRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.GetJob().GetQuoteAnswers()) == 0 || !ex.GetJob().GetQuoteAnswers()[0].GetOffered() {
		t.Fatalf("the peer was not asked or made no offer: %v", ex.GetJob().GetQuoteAnswers())
	}
}

// TestDelegatedOverbookedShowsAtOrigin: a job a peer accepts only by
// overbooking it is overbooked at its origin's record too, as at the
// peer: the quote says so (Offer.overbooked). s0 (one processor, busy past
// the SLA job's deadline) rejects the job and offers it; s1 (one
// processor, overbooking from a history of jobs that used 10 % of their
// estimate) has only the 299 s before a job released then, and places it
// there overbooked.
func TestDelegatedOverbookedShowsAtOrigin(t *testing.T) {
	history := writeHistory(t, 120, 100)
	sites := startFederationSites(t, 100, node.FederationConfig{}, func(i int, c *config.Config) {
		if i == 1 {
			c.Overbooking.Enabled, c.Overbooking.History, c.Overbooking.AgeFactor = true, history, 1
		}
	}, 1, 1)
	ctx := context.Background()
	s1, err := sites[1].client.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wall := spec(1, 5000)
	wall.SimRuntimeSeconds, wall.Release = 5000, timestamppb.New(s1.GetSite().GetNow().AsTime().Add(299*time.Second))
	busy := spec(1, 5000)
	busy.SimRuntimeSeconds = 5000
	for i, sp := range []*fedschedv1.JobSpec{busy, wall} {
		if r, err := sites[i].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp}); err != nil || r.GetJob().GetState() == fedschedv1.JobState_JOB_STATE_REJECTED {
			t.Fatalf("setup job at s%d: %v %v", i, r, err)
		}
	}
	s0, err := sites[0].client.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sla := spec(1, 1000)
	sla.SimRuntimeSeconds = 100
	sla.Deadline, sla.Fee, sla.Penalty = timestamppb.New(s0.GetSite().GetNow().AsTime().Add(2000*time.Second)), 1, 1
	r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sla})
	if err != nil {
		t.Fatal(err)
	}
	j := r.GetJob()
	if j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || j.GetSite() != "s1" {
		t.Fatalf("SLA job: %v at %s: %s", j.GetState(), j.GetSite(), j.GetMessage())
	}
	peer, err := sites[1].client.ListJobs(ctx, &fedschedv1.ListJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var there *fedschedv1.Job
	for _, pj := range peer.GetJobs() {
		if pj.GetOriginSite() == "s0" {
			there = pj
		}
	}
	if there == nil || !there.GetOverbooked() {
		t.Fatalf("the peer's record of the job: %v", there)
	}
	if !j.GetOverbooked() || j.GetPof() != there.GetPof() {
		t.Errorf("origin: overbooked %v, PoF %v; the peer: overbooked %v, PoF %v", j.GetOverbooked(), j.GetPof(), there.GetOverbooked(), there.GetPof())
	}
	ex, err := sites[0].client.Explain(ctx, &fedschedv1.ExplainRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if want := "site s1 overbooked it"; !strings.Contains(ex.GetSummary(), want) {
		t.Errorf("origin's explain does not say %q: %s", want, ex.GetSummary())
	}
}
