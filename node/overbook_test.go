package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// overbookScenario is the reported cold-start case on a 1-processor site:
// a job released in 299 s holds the processor for 5,000 s, so an SLA job of
// 1,000 s due within 2,000 s fits only overbooked, into the 299 s before
// it. It submits both to the site of client cl and returns the SLA job's
// submit answer. needs is the SLA job's real runtime.
func overbookScenario(t *testing.T, cl fedschedv1.SiteServiceClient, needs int64) *fedschedv1.Job {
	t.Helper()
	ctx := context.Background()
	site, err := cl.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	now := site.GetSite().GetNow().AsTime()
	wall := spec(1, 5000)
	wall.SimRuntimeSeconds = 5000
	wall.Release = timestamppb.New(now.Add(299 * time.Second))
	if r, err := cl.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: wall}); err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
		t.Fatalf("wall job: %v %v", r, err)
	}
	sla := spec(1, 1000)
	sla.SimRuntimeSeconds = needs
	sla.Deadline, sla.Fee, sla.Penalty = timestamppb.New(now.Add(2000*time.Second)), 1, 1
	r, err := cl.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sla})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetJob()
}

// runOne runs a 1,000 s job that needs needs seconds to completion.
func runOne(t *testing.T, s *testSite, needs int64) {
	t.Helper()
	sp := spec(1, 1000)
	sp.SimRuntimeSeconds = needs
	r, err := s.client.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: sp})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, s.client, r.GetJob().GetId(), fedschedv1.JobState_JOB_STATE_COMPLETED)
}

// TestColdStartDoesNotOverbook is the reported defect: after one completed
// job that used 10 % of its estimate, the node overbooked an SLA job into
// 299 s of its 1,000 s estimate with PoF 0. It must not bet on one sample:
// the job is rejected, and explain says why.
func TestColdStartDoesNotOverbook(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Procs, cfg.Overbooking.Enabled, cfg.TimeScale = 1, true, 100
	s := startSite(t, cfg, store.NewMemStore())
	defer s.stop(t)
	runOne(t, s, 100)
	j := overbookScenario(t, s.client, 1000)
	if j.GetOverbooked() || j.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED || !j.GetTooFewSamples() || j.GetOverbookSamples() != 1 {
		t.Fatalf("SLA job after one sample: state %v, overbooked %v, too few samples %v (%v): %s", j.GetState(), j.GetOverbooked(), j.GetTooFewSamples(), j.GetOverbookSamples(), j.GetMessage())
	}
	ex, err := s.client.Explain(context.Background(), &fedschedv1.ExplainRequest{JobId: j.GetId()})
	if err != nil || !strings.Contains(ex.GetSummary(), "not overbooked: only 1 sample") {
		t.Fatalf("explain: %q %v", ex.GetSummary(), err)
	}
}

// writeHistory writes an SWF file of n past jobs of 1,000 s estimates that
// ran ran seconds each.
func writeHistory(t *testing.T, n int, ran int64) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("; MaxProcs: 1\n")
	for i := range n {
		fmt.Fprintf(&b, "%d %d 0 %d 1 -1 -1 1 1000 -1 1 1 1 1 1 1 -1 -1\n", i+1, 2000*i, ran)
	}
	path := filepath.Join(t.TempDir(), "history.swf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOverbookingLearnsFromCuts seeds the statistics from a history of 120
// jobs that used 10 % of their estimate, so the scenario's job is
// overbooked with PoF 0. It needs its whole estimate and is cut after
// 299 s: a censored sample. The same bet again must carry a higher PoF;
// before, cut jobs were never learnt from and it stayed 0.
func TestOverbookingLearnsFromCuts(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Procs, cfg.Overbooking.Enabled, cfg.TimeScale = 1, true, 100
	cfg.Overbooking.History = writeHistory(t, 120, 100)
	cfg.Overbooking.AgeFactor = 1 // no ageing: the sample counts below are exact
	s := startSite(t, cfg, store.NewMemStore())
	defer s.stop(t)
	first := overbookScenario(t, s.client, 1000)
	if !first.GetOverbooked() || first.GetPof() != 0 || first.GetOverbookSamples() != 120 {
		t.Fatalf("with 120 samples of history: overbooked %v, PoF %v, samples %v: %s", first.GetOverbooked(), first.GetPof(), first.GetOverbookSamples(), first.GetMessage())
	}
	cut := waitState(t, s.client, first.GetId(), fedschedv1.JobState_JOB_STATE_KILLED)
	if cut.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED {
		t.Fatalf("cut job: %v", cut)
	}
	// Let the wall job out of the way: cancel whatever still waits.
	for _, j := range listAll(t, s.client) {
		if st := j.GetState(); st == fedschedv1.JobState_JOB_STATE_PENDING || st == fedschedv1.JobState_JOB_STATE_RUNNING {
			if _, err := s.client.CancelJob(context.Background(), &fedschedv1.CancelJobRequest{JobId: j.GetId()}); err != nil {
				t.Fatal(err)
			}
			waitState(t, s.client, j.GetId(), fedschedv1.JobState_JOB_STATE_CANCELLED)
		}
	}
	second := overbookScenario(t, s.client, 100)
	if !(second.GetPof() > 0) || second.GetOverbookSamples() < 121 {
		t.Fatalf("after a cut: PoF %v from %v samples, want above 0 from at least 121 (%s); the cut job ran %v to %v: %s", second.GetPof(), second.GetOverbookSamples(), second.GetMessage(),
			cut.GetStartTime().AsTime(), cut.GetEndTime().AsTime(), cut.GetMessage())
	}
}
