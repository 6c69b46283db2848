package node_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// storeCheckingExecutor fails any Start of a job the store does not hold:
// a crash right after such a Start leaves a running process for a job the
// restarted node does not know, and whose id it gives to the next job.
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
	cfg := testConfig(t.TempDir())
	st := store.NewMemStore()
	clk := clock.Scaled(time.Now(), cfg.TimeScale)
	ex := &storeCheckingExecutor{Executor: executor.NewSimulated(executor.SimulatedConfig{Clock: clk}), st: st}
	n, err := node.New(cfg, node.Deps{Store: st, Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- ex.Run(ctx) }()
	go func() { done <- n.Run(ctx) }()
	go func() { done <- n.Serve(ctx, lis, time.Second) }()
	defer func() {
		cancel()
		for range 3 {
			<-done
		}
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, conn)
	c := fedschedv1.NewSiteServiceClient(conn)
	for range 5 {
		r, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: spec(1, 100)})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, c, r.GetJob().GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
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
