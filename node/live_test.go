package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// watchFor reads events from w until job id reaches state; it fails the
// test after timeout of wall time. It makes no call to the site.
func watchFor(t *testing.T, w fedschedv1.SiteService_WatchJobsClient, cancel context.CancelFunc, id string, state fedschedv1.JobState, timeout time.Duration) *fedschedv1.Job {
	t.Helper()
	timer := time.AfterFunc(timeout, cancel)
	defer timer.Stop()
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("job %s never reached %v without another call to the site: %v", id, state, err)
		}
		if ev.GetJob().GetId() == id && ev.GetJob().GetState() == state {
			return ev.GetJob()
		}
	}
}

// settle waits (briefly) until the node's loop has armed a timer on clk.
func settle(clk *clock.Manual, n int) {
	for deadline := time.Now().Add(300 * time.Millisecond); clk.Waiters() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// TestReleaseStartsOnTime: a job released 100 s ahead on an idle site
// starts at its release, woken by nothing but the node's own timer.
func TestReleaseStartsOnTime(t *testing.T) {
	for _, pol := range []string{"conservative", "easy", "fcfs", "list"} {
		t.Run(pol, func(t *testing.T) {
			clk := clock.NewManual(monday)
			cfg := testConfig(t.TempDir())
			cfg.Policy = pol
			s := startManual(t, cfg, store.NewMemStore(), clk, 0)
			defer s.stop(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := s.client.WatchJobs(ctx, &fedschedv1.WatchJobsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Header(); err != nil {
				t.Fatal(err)
			}
			j := submitAt(t, s.client, 2, time.Hour, 100*time.Second, 0)
			settle(clk, 1)
			clk.Advance(100 * time.Second)
			got := watchFor(t, w, cancel, j.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING, 5*time.Second)
			if !got.GetStartTime().AsTime().Equal(monday.Add(100 * time.Second)) {
				t.Errorf("started at %v, want the release", got.GetStartTime().AsTime())
			}
		})
	}
}

// TestStaleHeadIsRejected: under FCFS, a job at the head whose deadline can
// no longer be met is REJECTED with its SLA violated when its window
// closes, and the job behind it starts.
func TestStaleHeadIsRejected(t *testing.T) {
	for _, pol := range []string{"easy", "fcfs", "list"} {
		t.Run(pol, func(t *testing.T) {
			clk := clock.NewManual(monday)
			cfg := testConfig(t.TempDir())
			cfg.Policy = pol
			s := startManual(t, cfg, store.NewMemStore(), clk, 0)
			defer s.stop(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := s.client.WatchJobs(ctx, &fedschedv1.WatchJobsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Header(); err != nil {
				t.Fatal(err)
			}
			blocker := submitAt(t, s.client, 8, time.Hour, 0, 0)
			stale := submitAt(t, s.client, 8, time.Hour, 0, 90*time.Minute)
			behind := submitAt(t, s.client, 8, time.Hour, 0, 0)
			watchFor(t, w, cancel, blocker.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING, 5*time.Second)
			settle(clk, 2) // the loop's timer and the executor's
			clk.Advance(30*time.Minute + time.Second)
			got := watchFor(t, w, cancel, stale.GetId(), fedschedv1.JobState_JOB_STATE_REJECTED, 5*time.Second)
			if got.GetReason() != fedschedv1.Reason_REASON_REJECTED_DEADLINE_UNREACHABLE || got.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED ||
				!strings.Contains(got.GetMessage(), "could not start") {
				t.Errorf("stale head: %v %v %q", got.GetReason(), got.GetSlaOutcome(), got.GetMessage())
			}
			settle(clk, 2)
			clk.Advance(30 * time.Minute)
			watchFor(t, w, cancel, behind.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING, 5*time.Second)
		})
	}
}

// TestEndAtEstimateIsCompleted: a job whose runtime is exactly its
// estimate finished by itself at the end of its reservation: COMPLETED,
// not KILLED. (The clock runs at 10x real time so that the node's and the
// executor's readings of it differ, as they do in production.)
func TestEndAtEstimateIsCompleted(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.TimeScale = 10
	s := startSite(t, cfg, store.NewMemStore())
	defer s.stop(t)
	var ids []string
	for range 3 {
		sp := spec(2, 2)
		sp.SimRuntimeSeconds = 2
		sp.Deadline, sp.Fee, sp.Penalty = timestampAfter(s.clk, time.Hour), 10, 5
		r, err := s.client.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetJob().GetId())
	}
	for _, id := range ids {
		j := waitEnded(t, s.client, id)
		if j.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED || j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
			t.Errorf("job %s ending at its estimate: %v %v %q", id, j.GetState(), j.GetSlaOutcome(), j.GetMessage())
		}
	}
}

// timestampAfter is clk's time plus d.
func timestampAfter(clk clock.Clock, d time.Duration) *timestamppb.Timestamp {
	return timestamppb.New(clk.Now().Add(d))
}

// waitEnded polls job id until it is in a terminal state.
func waitEnded(t *testing.T, c fedschedv1.SiteServiceClient, id string) *fedschedv1.Job {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r, err := c.GetJob(context.Background(), &fedschedv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetJob().GetState() {
		case fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_DELEGATED:
			continue
		}
		return r.GetJob()
	}
	t.Fatalf("job %s never ended", id)
	return nil
}

// forgetfulExecutor is the simulated executor with one fault: Kill says it
// does not know the job (its supervisor is gone, its end already taken).
type forgetfulExecutor struct{ *executor.Simulated }

func (forgetfulExecutor) Kill(id string) error {
	return fmt.Errorf("kill job %s: %w", id, executor.ErrUnknownJob)
}

// TestCancelWithFailedKill: when the executor cannot kill a cancelled
// running job because it no longer tracks it, no exit will ever come: the
// job must not hold its processors for ever.
func TestCancelWithFailedKill(t *testing.T) {
	clk := clock.NewManual(monday)
	cfg := testConfig(t.TempDir())
	ex := forgetfulExecutor{executor.NewSimulated(executor.SimulatedConfig{Clock: clk})}
	n, err := node.New(cfg, node.Deps{Store: store.NewMemStore(), Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c := serveNode(t, n, ex)
	ctx := context.Background()
	j := submitAt(t, c, 8, time.Hour, 0, 0)
	waitState(t, c, j.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
	if _, err := c.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: j.GetId()}); err != nil {
		t.Fatal(err)
	}
	site, err := c.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if site.GetSite().GetFreeProcs() != 8 || site.GetSite().GetRunningJobs() != 0 {
		t.Errorf("after a cancel whose kill failed: %d free, %d running; want the processors back", site.GetSite().GetFreeProcs(), site.GetSite().GetRunningJobs())
	}
	got := getJob(t, c, j.GetId())
	if got.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED || got.GetEndTime() == nil {
		t.Errorf("cancelled job: %v end %v", got.GetState(), got.GetEndTime())
	}
}

// serveNode runs n and ex until the test ends and returns a client.
func serveNode(t *testing.T, n *node.Node, ex executor.Executor) fedschedv1.SiteServiceClient {
	t.Helper()
	c, stop := runNode(t, n, ex)
	t.Cleanup(stop)
	return c
}

// runNode runs n, and ex unless it is nil (run by the caller, to outlive
// the node as a supervisor does), until stop is called.
func runNode(t *testing.T, n *node.Node, ex executor.Executor) (fedschedv1.SiteServiceClient, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	runs := 2
	if ex != nil {
		runs++
		go func() { done <- ex.Run(ctx) }()
	}
	go func() { done <- n.Run(ctx) }()
	go func() { done <- n.Serve(ctx, lis, time.Second) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	waitServing(t, conn)
	return fedschedv1.NewSiteServiceClient(conn), func() {
		cancel()
		for range runs {
			if err := <-done; err != nil {
				t.Errorf("stop: %v", err)
			}
		}
		conn.Close()
	}
}

// flakyKillExecutor is the simulated executor whose first kill of each job
// fails as a transient fault would (the signal did not reach the job); the
// job goes on running, and a later kill goes through.
type flakyKillExecutor struct {
	*executor.Simulated
	mu     sync.Mutex
	failed map[string]bool
}

func (f *flakyKillExecutor) Kill(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failed[id] {
		f.failed[id] = true
		return fmt.Errorf("kill job %s: supervisor not answering", id)
	}
	return f.Simulated.Kill(id)
}

// TestFailedKillRetried: a job cancelled while running whose kill failed
// (a transient fault) is killed again a few seconds later, without a
// restart, and its processors come back; it does not hold them until its
// reservation's end.
func TestFailedKillRetried(t *testing.T) {
	clk := clock.NewManual(monday)
	cfg := testConfig(t.TempDir())
	ex := &flakyKillExecutor{Simulated: executor.NewSimulated(executor.SimulatedConfig{Clock: clk}), failed: map[string]bool{}}
	n, err := node.New(cfg, node.Deps{Store: store.NewMemStore(), Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c := serveNode(t, n, ex)
	j := cancelRunning(t, c)
	clk.Advance(11 * time.Second)
	got := waitFreed(t, c, j.GetId(), "11 s after a failed kill: the kill was not retried")
	if end := got.GetEndTime().AsTime(); end.After(clk.Now()) || end.Before(monday.Add(10*time.Second)) {
		t.Errorf("ended at %v; want at the retry, 10 s after the cancel at %v", end, monday)
	}
}

// TestCancelledJobKilledAgainAfterRestart: a job cancelled while running
// whose kill failed still runs when the node restarts; the restarted node
// kills it again and frees its processors, rather than leave it running
// until its reservation's end.
func TestCancelledJobKilledAgainAfterRestart(t *testing.T) {
	clk := clock.NewManual(monday)
	cfg := testConfig(t.TempDir())
	st := store.NewMemStore()
	sim := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	ex := &flakyKillExecutor{Simulated: sim, failed: map[string]bool{}}
	exCtx, exStop := context.WithCancel(context.Background())
	exDone := make(chan error, 1)
	go func() { exDone <- sim.Run(exCtx) }()
	defer func() {
		exStop()
		if err := <-exDone; err != nil {
			t.Errorf("executor: %v", err)
		}
	}()
	start := func() (*node.Node, fedschedv1.SiteServiceClient, func()) {
		n, err := node.New(cfg, node.Deps{Store: st, Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		c, stop := runNode(t, n, nil)
		return n, c, stop
	}
	_, c, stop := start()
	j := cancelRunning(t, c)
	stop()

	_, c, stop = start()
	defer stop()
	if got := waitFreed(t, c, j.GetId(), "after the restart: it was not killed again"); got.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
		t.Errorf("killed again after the restart: %v, want CANCELLED", got.GetState())
	}
}

// TestRestartSmaller: a site restarted with fewer processors says why each
// job it can no longer hold ended, and keeps every record visible: a
// running job too wide is killed (never left outside the plan), a pending
// one is rejected as too wide, a fixed reservation too wide stays listed
// with its problem.
func TestRestartSmaller(t *testing.T) {
	st := store.NewMemStore()
	cfg := testConfig(t.TempDir())
	s := startSite(t, cfg, st)
	ctx := context.Background()
	running := submitAt(t, s.client, 8, 24*time.Hour, 0, 0)
	waitState(t, s.client, running.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
	pending := submitAt(t, s.client, 8, time.Hour, 0, 0)
	start := timestampAfter(s.clk, 48*time.Hour)
	res, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "wide", Procs: 8, Start: start,
		End: timestamppb.New(start.AsTime().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	cfg.Procs = 4
	s = startSite(t, cfg, st)
	defer s.stop(t)
	r := getJob(t, s.client, running.GetId())
	if r.GetState() != fedschedv1.JobState_JOB_STATE_FAILED || r.GetReason() != fedschedv1.Reason_REASON_FAILED_NODE || !strings.Contains(r.GetMessage(), "4 processors") {
		t.Errorf("running job too wide: %v %v %q", r.GetState(), r.GetReason(), r.GetMessage())
	}
	p := getJob(t, s.client, pending.GetId())
	if p.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED || p.GetReason() != fedschedv1.Reason_REASON_REJECTED_TOO_WIDE || !strings.Contains(p.GetMessage(), "restarted with 4 processors") {
		t.Errorf("pending job too wide: %v %v %q", p.GetState(), p.GetReason(), p.GetMessage())
	}
	var found bool
	for _, x := range listRes(t, s.client) {
		if x.GetId() == res.GetReservation().GetId() {
			found = true
			if !strings.Contains(x.GetProblem(), "the site now has 4") || len(x.GetInstances()) != 0 {
				t.Errorf("reservation too wide: problem %q, instances %v", x.GetProblem(), x.GetInstances())
			}
		}
	}
	if !found {
		t.Errorf("reservation %s vanished from the listing", res.GetReservation().GetId())
	}
	site, err := s.client.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	if err != nil || site.GetSite().GetFreeProcs() != 4 {
		t.Errorf("site after restart: %v %v", site, err)
	}
}

// cancelRunning submits a job of 8 processors to c, waits for it to run
// and cancels it; the executor fails the kill, so the job is CANCELLED and
// still running.
func cancelRunning(t *testing.T, c fedschedv1.SiteServiceClient) *fedschedv1.Job {
	t.Helper()
	j := submitAt(t, c, 8, time.Hour, 0, 0)
	waitState(t, c, j.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
	if _, err := c.CancelJob(context.Background(), &fedschedv1.CancelJobRequest{JobId: j.GetId()}); err != nil {
		t.Fatal(err)
	}
	got := getJob(t, c, j.GetId())
	if got.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED || got.GetEndTime() != nil {
		t.Fatalf("after a cancel whose kill failed: %v, end %v; want CANCELLED and still running", got.GetState(), got.GetEndTime())
	}
	return got
}

// waitFreed waits until job id has ended and the site's 8 processors are
// free again, and returns the job; it fails the test with why after 20 s
// of wall time.
func waitFreed(t *testing.T, c fedschedv1.SiteServiceClient, id, why string) *fedschedv1.Job {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := getJob(t, c, id)
		site, err := c.GetSite(context.Background(), &fedschedv1.GetSiteRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetEndTime() != nil && site.GetSite().GetFreeProcs() == 8 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled job still runs (end %v, %d processors free) %s", got.GetEndTime(), site.GetSite().GetFreeProcs(), why)
		}
	}
}
