package e2e

import (
	"testing"
	"time"

	"github.com/fedsched/fedsched/delegation"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestACFMovesWaitingJobs is live ACF: a small EASY site flooded with
// best-effort jobs offers every job its own policy would not start now to
// its peers before it plans it (the reply waits for the offer); the idle peer, whose own policy starts them now, takes them,
// and the busy peer refuses. Jobs the small site starts at once stay.
func TestACFMovesWaitingJobs(t *testing.T) {
	t.Parallel()
	f := fed()
	f.Transfer = delegation.ACF
	c := start(t, Options{TimeScale: 100, Federation: f, Sites: []SiteConfig{
		{Name: "small", Procs: 4, Policy: "easy"},
		{Name: "busy", Procs: 8, Policy: "easy"},
		{Name: "idle", Procs: 16, Policy: "easy"},
	}})
	fill(t, c.Site("busy"))
	small := c.Site("small")
	var ids []string
	for range 8 {
		j := submit(t, small, &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 3600, SimRuntimeSeconds: 3000, User: "flood", App: "be"})
		// The reply comes after the offer: the job is delegated, or here.
		if st := j.GetState(); st != fedschedv1.JobState_JOB_STATE_PENDING && st != fedschedv1.JobState_JOB_STATE_RUNNING && st != fedschedv1.JobState_JOB_STATE_DELEGATED {
			t.Fatalf("submit answered %s", brief(j))
		}
		ids = append(ids, j.GetId())
	}
	// Every job runs within a few virtual minutes: 2 at home, 6 at idle.
	checkSpread(t, c, ids, "delegated")
}

// TestACFPeerQuotesOnlyWhatItStartsNow: a conservative peer that could
// plan the jobs for later refuses them under ACF; they wait at home.
func TestACFPeerQuotesOnlyWhatItStartsNow(t *testing.T) {
	t.Parallel()
	f := fed()
	f.Transfer = delegation.ACF
	c := start(t, Options{TimeScale: 100, Federation: f, Sites: []SiteConfig{
		{Name: "small", Procs: 4, Policy: "easy"},
		{Name: "planner", Procs: 8},
	}})
	submit(t, c.Site("planner"), &fedschedv1.JobSpec{Procs: 8, EstimateSeconds: 7200, User: "e2e", App: "filler"})
	small := c.Site("small")
	var ids []string
	for range 4 {
		ids = append(ids, submit(t, small, &fedschedv1.JobSpec{Procs: 4, EstimateSeconds: 3600, SimRuntimeSeconds: 3000, User: "flood", App: "be"}).GetId())
	}
	time.Sleep(2 * time.Second) // offers are answered within the quote timeout
	for _, id := range ids {
		j, err := getJob(bg(t), small, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.GetSite() != "small" {
			t.Errorf("job went to a peer that would not start it now: %s", brief(j))
		}
	}
}

// checkSpread checks the flood of 8 two-processor jobs submitted at small
// (ids): 2 run at home and 6 at the idle peer, none at the busy one, and
// each moved job (how: "delegated", "taken") starts at idle at once; its
// route at small marks its delegation step taken exactly when idle took
// it (RQF).
func checkSpread(t *testing.T, c *Cluster, ids []string, how string) {
	t.Helper()
	small := c.Site("small")
	at := map[string]int{}
	for _, id := range ids {
		j := waitJob(t, small, id, 20*time.Second, "running here or delegated", func(j *fedschedv1.Job) bool {
			return j.GetState() == fedschedv1.JobState_JOB_STATE_RUNNING || j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED
		})
		at[j.GetSite()]++
		if j.GetSite() != "small" {
			checkRoute(t, j, "small", "idle")
			if liveTaken(j) != (how == "taken") {
				t.Errorf("%s job's route at small marks it taken: %v, want %v: %v", how, liveTaken(j), how == "taken", j.GetRoute())
			}
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
			t.Errorf("%s job did not start at once at idle: %s", how, brief(j))
		}
	}
}
