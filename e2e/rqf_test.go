package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestRQFPullsFromFloodedSite is live RQF on three real nodes: a small
// EASY site that discloses its queue is flooded with best-effort jobs; the
// idle site, under RQF, pulls the waiting ones it would start now and runs
// them at once; the busy site (full, not disclosing, not pulling) gets
// none. The origin keeps answering for its jobs (state, route, explain)
// and learns how they ended.
func TestRQFPullsFromFloodedSite(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{
		{Name: "small", Procs: 4, Policy: "easy", Delegation: config.Delegation{DiscloseQueue: true}},
		{Name: "busy", Procs: 8, Policy: "easy"},
		{Name: "idle", Procs: 16, Policy: "easy", Delegation: config.Delegation{Transfer: "rqf", PullInterval: 200 * time.Millisecond}},
	}})
	fill(t, c.Site("busy"))
	small := c.Site("small")
	var ids []string
	for range 8 {
		ids = append(ids, submit(t, small, &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 3600, SimRuntimeSeconds: 1200, User: "flood", App: "be"}).GetId())
	}
	at := map[string]int{}
	for _, id := range ids {
		j := waitJob(t, small, id, 20*time.Second, "running here or delegated", func(j *fedschedv1.Job) bool {
			return j.GetState() == fedschedv1.JobState_JOB_STATE_RUNNING || j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED
		})
		at[j.GetSite()]++
		if j.GetSite() != "small" {
			checkRoute(t, j, "small", "idle")
		}
	}
	t.Logf("jobs by executing site: %v", at)
	if at["small"] != 2 || at["idle"] != 6 || at["busy"] != 0 {
		t.Fatalf("jobs by executing site %v, want 2 at small and 6 at idle", at)
	}
	for _, j := range receivedFrom(t, c.Site("idle"), "small") {
		j = waitJob(t, c.Site("idle"), j.GetId(), 20*time.Second, "running", func(j *fedschedv1.Job) bool {
			return j.GetState() == fedschedv1.JobState_JOB_STATE_RUNNING || terminal(j)
		})
		if j.GetStartTime() == nil || j.GetStartTime().AsTime().Sub(j.GetSubmitTime().AsTime()) > 2*time.Minute {
			t.Errorf("taken job did not start at once at idle: %s", brief(j))
		}
	}
	// The origin explains a taken job and learns its outcome.
	for _, id := range ids {
		j := waitJob(t, small, id, 40*time.Second, "ended", terminal)
		if j.GetSite() != "idle" {
			continue
		}
		if j.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED {
			t.Errorf("taken job at its origin: %s", brief(j))
		}
		e, err := small.Client.Explain(bg(t), &fedschedv1.ExplainRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e.GetSummary()+e.GetJob().GetMessage(), "idle") {
			t.Errorf("explain of a taken job does not name the site that ran it: %q", e.GetSummary())
		}
	}
}
