package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/overbook"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// start starts a cluster for a test and stops it when the test ends.
func start(t *testing.T, o Options) *Cluster {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Logger == nil {
		o.Logger = DebugLogger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sites up and converged in %v", len(o.Sites), time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// fed is the federation configuration of the scenario tests: long holds
// (the shared clock runs fast) and quick retries.
func fed() node.FederationConfig {
	return node.FederationConfig{HoldSeconds: 3600, ReportInterval: 100 * time.Millisecond}
}

func bg(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// slaSpec is a job of procs processors with an estimate and actual runtime
// in virtual seconds, with the simulator's SLA terms: deadline = now +
// 2 x estimate, fee = procs x estimate hours, penalty = fee.
func slaSpec(c *Cluster, procs int32, estimate, runtime int64) *fedschedv1.JobSpec {
	fm := overbook.FeeModel{PenaltyRatio: 1}
	now := c.Clock().Now()
	return &fedschedv1.JobSpec{Procs: procs, EstimateSeconds: estimate, SimRuntimeSeconds: runtime, User: "e2e", App: "test",
		Deadline: timestamppb.New(now.Add(time.Duration(2*estimate) * time.Second)),
		Fee:      fm.Fee(int(procs), estimate), Penalty: fm.Penalty(int(procs), estimate)}
}

// filler is a best-effort job that occupies procs processors of a site for
// far longer than any test.
func filler(procs int32) *fedschedv1.JobSpec {
	return &fedschedv1.JobSpec{Procs: procs, EstimateSeconds: 30 * 86400, User: "e2e", App: "filler"}
}

var keys atomic.Int64

func submit(t *testing.T, s *Site, spec *fedschedv1.JobSpec) *fedschedv1.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.Client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("k%d", keys.Add(1)), Spec: spec})
	if err != nil {
		t.Fatalf("submit to %s: %v", s.Name, err)
	}
	return r.GetJob()
}

// fill occupies every processor of site s with a best-effort job and
// returns it.
func fill(t *testing.T, s *Site) *fedschedv1.Job {
	t.Helper()
	j := submit(t, s, filler(int32(s.Config().Procs)))
	if j.GetState() != fedschedv1.JobState_JOB_STATE_PENDING || j.GetSite() != s.Name {
		t.Fatalf("filler at %s: %v", s.Name, j)
	}
	return j
}

func getJob(ctx context.Context, s *Site, id string) (*fedschedv1.Job, error) {
	r, err := s.Client.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: id})
	return r.GetJob(), err
}

// waitJob waits until the job satisfies ok, failing the test after within.
func waitJob(t *testing.T, s *Site, id string, within time.Duration, what string, ok func(*fedschedv1.Job) bool) *fedschedv1.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	var last *fedschedv1.Job
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		j, err := getJob(ctx, s, id)
		cancel()
		if err == nil {
			last = j
			if ok(j) {
				return j
			}
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s at %s never became %s within %v: last %v (err %v)", id, s.Name, what, within, brief(last), lastErr)
	return nil
}

func terminal(j *fedschedv1.Job) bool {
	switch j.GetState() {
	case fedschedv1.JobState_JOB_STATE_COMPLETED, fedschedv1.JobState_JOB_STATE_KILLED, fedschedv1.JobState_JOB_STATE_FAILED,
		fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.JobState_JOB_STATE_REJECTED:
		return true
	}
	return false
}

func inState(st fedschedv1.JobState) func(*fedschedv1.Job) bool {
	return func(j *fedschedv1.Job) bool { return j.GetState() == st }
}

// listJobs returns every job a site stores.
func jobsOf(t *testing.T, s *Site) []*fedschedv1.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := ListAllJobs(ctx, s)
	if err != nil {
		t.Fatalf("list jobs of %s: %v", s.Name, err)
	}
	return jobs
}

// brief renders a job in one line for failure messages.
func brief(j *fedschedv1.Job) string {
	if j == nil {
		return "<nil>"
	}
	var hops []string
	for _, h := range j.GetRoute() {
		hop := h.GetSite()
		if h.GetPeerSite() != "" {
			hop += "(" + strings.TrimPrefix(h.GetReason().String(), "REASON_") + " " + h.GetPeerSite() + ")"
		}
		hops = append(hops, hop)
	}
	return fmt.Sprintf("%s %s/%s at %s origin %s sla %s route [%s] msg %q", j.GetId(), strings.TrimPrefix(j.GetState().String(), "JOB_STATE_"),
		strings.TrimPrefix(j.GetReason().String(), "REASON_"), j.GetSite(), j.GetOriginSite(),
		strings.TrimPrefix(j.GetSlaOutcome().String(), "SLA_OUTCOME_"), strings.Join(hops, " "), j.GetMessage())
}

// receivedFrom returns the jobs site s runs for origin.
func receivedFrom(t *testing.T, s *Site, origin string) []*fedschedv1.Job {
	t.Helper()
	var out []*fedschedv1.Job
	for _, j := range jobsOf(t, s) {
		if j.GetOriginSite() == origin {
			out = append(out, j)
		}
	}
	return out
}

// checkRoute checks a delegated job's provenance at its origin: the route
// starts at the origin and ends at the executing site, which is the job's
// site.
func checkRoute(t *testing.T, j *fedschedv1.Job, origin, exec string) {
	t.Helper()
	r := j.GetRoute()
	if len(r) < 2 || r[0].GetSite() != origin || r[len(r)-1].GetSite() != exec || j.GetSite() != exec || j.GetOriginSite() != origin {
		t.Errorf("provenance of %s: want %s -> %s, got %s", j.GetId(), origin, exec, brief(j))
		return
	}
	last := r[len(r)-1]
	if last.GetReason() != fedschedv1.Reason_REASON_RECEIVED_FROM_PEER || last.GetPeerSite() != origin {
		t.Errorf("provenance of %s: last hop %v", j.GetId(), last)
	}
}
