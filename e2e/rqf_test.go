package e2e

import (
	"context"
	"strings"
	"sync/atomic"
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
		{Name: "idle", Procs: 16, Policy: "easy", Delegation: config.Delegation{Transfer: "rqf", PullInterval: 20 * time.Second}},
	}})
	fill(t, c.Site("busy"))
	small := c.Site("small")
	var ids []string
	for range 8 {
		ids = append(ids, submit(t, small, &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 3600, SimRuntimeSeconds: 1200, User: "flood", App: "be"}).GetId())
	}
	checkSpread(t, c, ids, "taken")
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

// TestCrashDuringTake crashes the origin of a job an RQF site takes, or
// the taker, at the origin's Agree (the hand-over's second phase, after
// the origin recorded it), restarts it on the same data directory, and
// checks that the job runs exactly once: at the taker if it agreed (or
// still holds its slot when the restarted origin asks), else back at its
// origin, whose view matches what happened.
func TestCrashDuringTake(t *testing.T) {
	t.Parallel()
	completed := fedschedv1.JobState_JOB_STATE_COMPLETED
	for _, tc := range []crashCase{
		{name: "origin/before-agree", victim: "origin", method: "Agree", phase: Before, want: completed},
		{name: "origin/after-agree", victim: "origin", method: "Agree", phase: After, want: completed},
		{name: "taker/before-agree", victim: "peer", method: "Agree", phase: Before, want: completed},
		{name: "taker/after-agree-reply-lost", victim: "peer", method: "Agree", phase: After, lostReply: true, want: completed, orLost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runTakeCrash(t, tc)
		})
	}
}

func runTakeCrash(t *testing.T, tc crashCase) {
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{
		{Name: "small", Procs: 4, Policy: "easy", Delegation: config.Delegation{DiscloseQueue: true}},
		{Name: "idle", Procs: 16, Policy: "easy", Delegation: config.Delegation{Transfer: "rqf", PullInterval: 20 * time.Second}},
	}})
	ctx := bg(t)
	small := c.Site("small")
	crashed := make(chan string, 1)
	var fired atomic.Bool
	c.SetHook(func(cctx context.Context, call Call) error {
		if call.From != "small" || call.Method != tc.method || call.Phase != tc.phase || (tc.phase == After && call.Err != nil) || !fired.CompareAndSwap(false, true) {
			return nil
		}
		victim := "small"
		if tc.victim == "peer" {
			victim = "idle"
		}
		t.Logf("crashing %s %s %s %s->%s", victim, call.Phase, call.Method, call.From, call.To)
		if err := c.Crash(victim); err != nil {
			t.Error(err)
		}
		crashed <- victim
		return afterCrash(cctx, victim == "small", tc.lostReply)
	})
	// The filler keeps the job waiting at small (for 1200 s) until idle
	// takes it.
	submit(t, small, &fedschedv1.JobSpec{Procs: 4, EstimateSeconds: 1200, SimRuntimeSeconds: 1200, User: "e2e", App: "filler"})
	job := submit(t, small, &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600, SimRuntimeSeconds: 300, User: "flood", App: "be"})
	var victim string
	select {
	case victim = <-crashed:
	case <-time.After(30 * time.Second):
		t.Fatal("the hook never fired")
	}
	if err := c.Wait(ctx, victim); err != nil {
		t.Logf("crashed %s stopped with: %v", victim, err)
	}
	c.SetHook(nil)
	time.Sleep(500 * time.Millisecond)
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	final := waitJob(t, small, job.GetId(), 60*time.Second, "terminal", terminal)
	t.Logf("origin: %s", brief(final))
	var runs []*fedschedv1.Job
	for _, j := range receivedFrom(t, c.Site("idle"), "small") {
		pj := waitJob(t, c.Site("idle"), j.GetId(), 20*time.Second, "terminal", terminal)
		t.Logf("taker: %s", brief(pj))
		if pj.GetStartTime() != nil {
			runs = append(runs, pj)
		}
	}
	switch {
	case len(runs) > 1:
		t.Errorf("the job ran %d times at the taker", len(runs))
	case len(runs) == 1:
		r := runs[0]
		if final.GetSite() != "idle" || final.GetState() != r.GetState() {
			t.Errorf("origin reports %s, but it ran as %s", brief(final), brief(r))
		}
		checkRoute(t, final, "small", "idle")
	case final.GetSite() != "small":
		t.Errorf("origin reports %s, but the taker did not run it", brief(final))
	}
	lost := final.GetState() == fedschedv1.JobState_JOB_STATE_FAILED && final.GetReason() == fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART
	if final.GetState() != tc.want && !(tc.orLost && lost) {
		t.Errorf("final state %v, want %v", final.GetState(), tc.want)
	}
	if jobs := jobsOf(t, small); len(jobs) != 2 {
		t.Errorf("origin has %d jobs, want 2", len(jobs))
	}
}
