package node

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// gateStore holds the first commit that writes jobs until open is closed,
// and records how many jobs each commit writes.
type gateStore struct {
	store.Store
	held chan struct{} // closed when the first commit is held
	open chan struct{}
	mu   sync.Mutex
	jobs []int
}

func (s *gateStore) Apply(ctx context.Context, ch store.Changes) error {
	if len(ch.PutJobs) > 0 {
		s.mu.Lock()
		first := len(s.jobs) == 0
		s.jobs = append(s.jobs, len(ch.PutJobs))
		s.mu.Unlock()
		if first {
			close(s.held)
			<-s.open
		}
	}
	return s.Store.Apply(ctx, ch)
}

// TestGroupCommitGathers: the clients of one commit and those that queued
// while it ran share the next commit. One submission's commit is held
// while seven more queue; when it ends, its client submits again at once,
// and the next commit carries all eight (without the wait it would carry
// the seven, and the eighth a commit of its own).
func TestGroupCommitGathers(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.TimeScale = "t", dir, 8, "simulated", 1
	bolt, err := store.OpenBolt(dir, &store.Options{MaxBatchDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	st := &gateStore{Store: bolt, held: make(chan struct{}), open: make(chan struct{})}
	clk := clock.Real()
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	n, err := New(cfg, Deps{Store: st, Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// The commit is held 2 s, so the turn after it may wait up to 1 s for
	// the client it answers: ample, even on a loaded machine.
	n.group.limit = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- ex.Run(ctx) }()
	go func() { done <- n.Run(ctx) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}()
	for !n.Ready() {
		time.Sleep(time.Millisecond)
	}
	svc := &service{n: n}
	tomorrow := timestamppb.New(clk.Now().Add(24 * time.Hour))
	submit := func() error {
		_, err := svc.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 60, User: "alice", App: "t", Release: tomorrow}})
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	wg.Go(func() {
		if err := submit(); err != nil {
			errs <- err
			return
		}
		errs <- submit() // at once, as a client with one request in flight does
	})
	<-st.held
	for range 7 {
		wg.Go(func() { errs <- submit() })
	}
	for len(n.ops) < 7 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	close(st.open)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.jobs) != 2 || st.jobs[0] != 1 || st.jobs[1] != 8 {
		t.Fatalf("jobs per commit %v, want [1 8]", st.jobs)
	}
}

// TestGroupCommitNoWrite: a turn that wrote nothing sets no wait (there was
// no fsync to share); one that wrote waits for as many requests as it
// answered plus those that queued, at most half its commit's time.
func TestGroupCommitNoWrite(t *testing.T) {
	g := groupCommit{limit: time.Second}
	g.turn()
	g.answered(5, 3)
	if g.target != 0 || g.wait != 0 {
		t.Fatalf("after a turn without writes: target %d, wait %v", g.target, g.wait)
	}
	g.turn()
	g.applied(3 * time.Millisecond)
	g.applied(time.Millisecond)
	g.answered(5, 3)
	if g.target != 8 || g.wait != 2*time.Millisecond {
		t.Fatalf("after a turn that wrote: target %d, wait %v; want 8, 2ms", g.target, g.wait)
	}
	ops := make(chan op, 1)
	t0 := time.Now()
	if b := g.gather(context.Background(), ops, make([]op, 3), func(op) { t.Fatal("decided a request that never came") }); len(b) != 3 || time.Since(t0) < 2*time.Millisecond {
		t.Fatalf("gather with nothing coming: %d requests after %v, want 3 after the 2ms wait", len(b), time.Since(t0))
	}
}

// TestGatherDecidesOnArrival: gather hands each request to decide as it
// arrives, not when the batch is complete. Each request here is sent only
// after the one before it was decided; a gather that decided at the end
// would hold the first two and time out waiting for the third.
func TestGatherDecidesOnArrival(t *testing.T) {
	g := groupCommit{target: 4, wait: 5 * time.Second}
	ops := make(chan op)
	decided := make(chan op, 3)
	sent := make([]op, 3)
	for i := range sent {
		sent[i] = &cancelOp{id: string(rune('a' + i))}
	}
	go func() {
		for i, o := range sent {
			ops <- o
			if got := <-decided; got != sent[i] {
				t.Errorf("decided %v, want %v", got, sent[i])
			}
		}
	}()
	t0 := time.Now()
	b := g.gather(context.Background(), ops, make([]op, 1), func(o op) { decided <- o })
	if len(b) != 4 || b[1] != sent[0] || b[2] != sent[1] || b[3] != sent[2] {
		t.Fatalf("gathered %v, want the first request and %v", b, sent)
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Fatalf("gather took %v: it waited for the batch before deciding", d)
	}
}
