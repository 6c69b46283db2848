package node_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// storeCheckingExecutor records any Start of a job the store does not
// hold: a crash right after such a Start leaves a running process for a job
// the restarted node does not know, and whose id it gives to the next job.
type storeCheckingExecutor struct {
	executor.Executor
	st store.Store

	mu      sync.Mutex
	started []string
	unknown []string
}

func (e *storeCheckingExecutor) Start(ctx context.Context, spec executor.Spec) error {
	e.mu.Lock()
	if _, err := e.st.GetJob(ctx, spec.JobID); err != nil {
		e.unknown = append(e.unknown, spec.JobID)
	}
	e.started = append(e.started, spec.JobID)
	e.mu.Unlock()
	return e.Executor.Start(ctx, spec)
}

// TestJobStartsOnlyOnceDurable: a job submitted to an idle site starts in
// the same loop turn, but its executor start must come after the
// submission is in the store.
func TestJobStartsOnlyOnceDurable(t *testing.T) {
	st := store.NewMemStore()
	var ex *storeCheckingExecutor
	s := startSiteWrapped(t, testConfig(t.TempDir()), st, func(inner executor.Executor) executor.Executor {
		ex = &storeCheckingExecutor{Executor: inner, st: st}
		return ex
	})
	defer s.stop(t)
	for range 5 {
		r, err := s.client.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: spec(1, 100)})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, s.client, r.GetJob().GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if len(ex.started) != 5 {
		t.Fatalf("started %v, want 5 jobs", ex.started)
	}
	if len(ex.unknown) > 0 {
		t.Fatalf("jobs %v were started before the store held them", ex.unknown)
	}
}

// TestRetryAfterDeadlinePassedReplays: a retry with the same idempotency
// key, sent when the request's deadline no longer leaves room for its
// estimate (a client retrying after a crash), gets the stored job back
// instead of InvalidArgument.
func TestRetryAfterDeadlinePassedReplays(t *testing.T) {
	s := startSite(t, testConfig(t.TempDir()), store.NewMemStore())
	defer s.stop(t)
	sp := spec(1, 100)
	sp.Deadline = timestamppb.New(s.clk.Now().Add(200 * time.Second))
	req := &fedschedv1.SubmitJobRequest{IdempotencyKey: "late-retry", Spec: sp}
	first, err := s.client.SubmitJob(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// 1,000 times faster than real time: 150 ms is 150 s, and the deadline
	// is then closer than the estimate.
	for s.clk.Now().Add(100 * time.Second).Before(sp.GetDeadline().AsTime()) {
		time.Sleep(10 * time.Millisecond)
	}
	again, err := s.client.SubmitJob(context.Background(), req)
	if err != nil {
		t.Fatalf("retry after the deadline came close: %v", err)
	}
	if !again.GetReplayed() || again.GetJob().GetId() != first.GetJob().GetId() {
		t.Fatalf("retry = %v (replayed %v), want the stored job %s", again.GetJob().GetId(), again.GetReplayed(), first.GetJob().GetId())
	}
}

// stopDuringStartExecutor stops the node (cancels its context) as the
// first job's Start begins, as a SIGTERM arriving in that instant would:
// the executor then refuses the start for the ended context.
type stopDuringStartExecutor struct {
	executor.Executor
	stop    context.CancelFunc // set before the first submission
	once    sync.Once
	stopped chan string // the job whose start the stop cut
}

func (e *stopDuringStartExecutor) Start(ctx context.Context, spec executor.Spec) error {
	e.once.Do(func() {
		e.stop()
		e.stopped <- spec.JobID
	})
	return e.Executor.Start(ctx, spec)
}

// TestStopDuringStartKeepsJobPending: a stop that cuts a job's start short
// says nothing about the job. It must stay PENDING in the store (not end
// FAILED_START, SLA violated) and start when the node runs again on the
// same data directory. (e2e TestCrashDuringDelegation's
// graceful/peer/after-agree-reply-lost failed intermittently on this: the
// peer, stopped as it started the delegated job, reported it failed.)
func TestStopDuringStartKeepsJobPending(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	st, err := store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ex := &stopDuringStartExecutor{stopped: make(chan string, 1)}
	s := startSiteWrapped(t, cfg, st, func(inner executor.Executor) executor.Executor {
		ex.Executor = inner
		return ex
	})
	ex.stop = s.cancel
	// The reply may or may not make it out before the server stops.
	go s.client.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: spec(1, 3600)}) //nolint:errcheck // see above
	id := <-ex.stopped
	s.stop(t)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Job.GetState(); got != fedschedv1.JobState_JOB_STATE_PENDING {
		t.Fatalf("after a stop during its start, job %s is %v (%v: %s), want PENDING", id, got, rec.Job.GetReason(), rec.Job.GetMessage())
	}
	s = startSite(t, cfg, st)
	defer func() { s.stop(t); st.Close() }()
	waitState(t, s.client, id, fedschedv1.JobState_JOB_STATE_RUNNING)
}
