package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// inLoop runs f on the node's loop goroutine.
type inLoop struct {
	f    func(n *Node)
	done chan struct{}
}

func (o *inLoop) run(n *Node, _ int64) func(error) {
	o.f(n)
	return func(error) { close(o.done) }
}

// runInLoop runs o on n's loop goroutine and waits for it.
func runInLoop(t testing.TB, n *Node, o *inLoop) {
	t.Helper()
	if err := n.send(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	<-o.done
}

// startSimulated runs a node on st with the simulated executor on a scaled
// clock (cfg.TimeScale) until the returned stop is called.
func startSimulated(t *testing.T, cfg config.Config, st store.Store) (*Node, func()) {
	t.Helper()
	return startOnClock(t, cfg, st, clock.Scaled(time.Now(), cfg.TimeScale))
}

// startOnClock runs a node on st with the simulated executor on clk until
// the returned stop is called; setup, if any, is called on the node before
// it runs.
func startOnClock(t testing.TB, cfg config.Config, st store.Store, clk clock.Clock, setup ...func(*Node)) (*Node, func()) {
	t.Helper()
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	n, err := New(cfg, Deps{Store: st, Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- ex.Run(ctx) }()
	go func() { done <- n.Run(ctx) }()
	for !n.Ready() {
		time.Sleep(time.Millisecond)
	}
	return n, func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
}

// TestPendingCountsMatchLiveJobs checks the per-user counts of PENDING jobs
// (limits.max_pending_jobs) against a count over the live jobs, while jobs of
// several users are submitted, start, end and are cancelled, and after a
// restart of the node on the same store, under a reservation policy and a
// queue policy.
func TestPendingCountsMatchLiveJobs(t *testing.T) {
	for _, policy := range []string{"conservative", "easy"} {
		t.Run(policy, func(t *testing.T) { testPendingCounts(t, policy) })
	}
}

func testPendingCounts(t *testing.T, policy string) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.TimeScale = "t", dir, 8, "simulated", 1000
	cfg.Policy = policy
	st, err := store.OpenBolt(dir, &store.Options{MaxBatchDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check := func(n *Node, when string) {
		t.Helper()
		o := &inLoop{done: make(chan struct{}), f: func(n *Node) {
			scan := make(map[string]int)
			for _, lj := range n.live {
				if lj.job().GetState() == fedschedv1.JobState_JOB_STATE_PENDING {
					scan[lj.job().GetSpec().GetUser()]++
				}
			}
			if !maps.Equal(scan, n.pendingBy) {
				t.Errorf("%s: counted %v, the live jobs say %v", when, n.pendingBy, scan)
			}
		}}
		runInLoop(t, n, o)
	}
	start := func() (*Node, func()) { return startSimulated(t, cfg, st) }
	n, stop := start()
	svc := &service{n: n}
	ctx := context.Background()
	var ids []string
	for k := range 60 {
		// Jobs of three users: some start at once and end within seconds
		// of the scaled clock, some wait for tomorrow.
		sp := &fedschedv1.JobSpec{Procs: int32(1 + k%4), EstimateSeconds: int64(60 + 37*k), SimRuntimeSeconds: 50, User: fmt.Sprintf("u%d", k%3), App: "t"}
		if k%2 == 0 {
			sp.Release = timestamppb.New(n.deps.Clock.Now().Add(24 * time.Hour))
		}
		r, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("k%d", k), Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetJob().GetId())
		if k%7 == 3 {
			if _, err := svc.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: ids[k/2]}); err != nil {
				t.Logf("cancel %s: %v", ids[k/2], err)
			}
		}
		if k%10 == 9 {
			check(n, fmt.Sprintf("after %d submissions", k+1))
		}
	}
	time.Sleep(300 * time.Millisecond) // five minutes of the site's clock: jobs start and end
	check(n, "after jobs ran")
	// The longest job of all starts: it no longer counts.
	r, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 72000, SimRuntimeSeconds: 72000, User: "u0", App: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		j, err := svc.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: r.GetJob().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if j.GetJob().GetState() == fedschedv1.JobState_JOB_STATE_RUNNING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the long job is %v", j.GetJob().GetState())
		}
	}
	check(n, "after the longest job started")
	stop()
	n, stop = start()
	check(n, "after a restart")
	stop()
}
