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

// TestGatherWaitFollowsSpread: the wait follows how long the gathers that
// saw their target waited for it, not the commit's time. Turns whose
// commit takes 100 µs and whose clients come back over 400 µs end up
// waiting about 400 µs (half the commit, the old rule, would be 50 µs and
// miss them); a wait that ran out does not move the spread; the wait never
// exceeds the limit, and half a long commit still sets a floor.
func TestGatherWaitFollowsSpread(t *testing.T) {
	const commit, spread = 100 * time.Microsecond, 400 * time.Microsecond
	g := groupCommit{limit: time.Second}
	turn := func(commit time.Duration, waited, full bool, used time.Duration) {
		g.turn()
		g.applied(commit)
		g.waited, g.full, g.used = waited, full, used
		g.answered(8, 0)
	}
	turn(commit, false, false, 0)
	if g.target != 8 || g.wait != commit/2 {
		t.Fatalf("before any gather was measured: target %d, wait %v; want 8, %v", g.target, g.wait, commit/2)
	}
	for range 50 {
		turn(commit, true, true, spread)
	}
	if g.wait < spread-spread/8 || g.wait > spread+spread/8 {
		t.Fatalf("after 50 gathers that waited %v: wait %v (spread %v, deviation %v), want about %v", spread, g.wait, g.spread, g.dev, spread)
	}
	s, w := g.spread, g.wait
	turn(commit, true, false, w)
	if g.spread != s || g.wait != w {
		t.Fatalf("a wait that ran out moved the spread %v → %v, the wait %v → %v", s, g.spread, w, g.wait)
	}
	for range 50 {
		turn(commit, true, true, 5*time.Second)
	}
	if g.wait != g.limit {
		t.Fatalf("gathers that waited 5s: wait %v, want the limit %v", g.wait, g.limit)
	}
	g = groupCommit{limit: time.Second}
	for range 50 {
		turn(4*time.Millisecond, true, true, 10*time.Microsecond)
	}
	if g.wait != 2*time.Millisecond {
		t.Fatalf("commits of 4ms, clients back within 10µs: wait %v, want half the commit, 2ms", g.wait)
	}
}

// TestGatherStopsWaitingWhenWaitsRunOut: when most waits run out (the
// requests do not come back in step with the commits), a turn does not
// wait but once in probeEvery; when the probes see their targets again,
// every turn waits again.
func TestGatherStopsWaitingWhenWaitsRunOut(t *testing.T) {
	g := groupCommit{limit: time.Second}
	ops := make(chan op, 8)
	// With nothing coming, a gather that waits returns at once, having
	// waited, on a cancelled context; one whose requests are there needs
	// no context (gather could otherwise pick the cancellation first).
	done, cancel := context.WithCancel(context.Background())
	cancel()
	gather := func() bool {
		g.turn()
		g.applied(time.Millisecond)
		ctx := done
		if len(ops) > 0 {
			ctx = context.Background()
		}
		g.gather(ctx, ops, make([]op, 1), func(op) {})
		waited := g.waited
		g.answered(1, 1) // the next target: 2
		return waited
	}
	gather() // sets the first target
	waits := 0
	for range 40 {
		if gather() {
			waits++
		}
	}
	// The first 6 turns wait (until misses pass maxMisses), then one in
	// probeEvery.
	if g.misses <= maxMisses || waits > 6+40/probeEvery+1 {
		t.Fatalf("40 turns whose waits ran out: %d waited (misses %.2f), want about %d", waits, g.misses, 6+40/probeEvery)
	}
	// The clients come back in step: every wait sees its target at once,
	// and after a few probes every turn waits again.
	fill := func() {
		for len(ops) < cap(ops) {
			ops <- &cancelOp{}
		}
	}
	turns := 0
	for ; g.misses > maxMisses && turns < 100; turns++ {
		fill()
		gather()
	}
	if g.misses > maxMisses {
		t.Fatalf("100 turns whose targets came: misses still %.2f", g.misses)
	}
	for range 8 {
		fill()
		if !gather() {
			t.Fatalf("a turn did not wait after the waits paid again (misses %.2f)", g.misses)
		}
	}
}

// TestGatherUsedExcludesDeciding: the time a gather measures as its wait
// leaves out the time spent deciding what arrived, as the wait does: two
// requests that are there at once and take 200ms each to decide count as
// no wait, not 400ms.
func TestGatherUsedExcludesDeciding(t *testing.T) {
	g := groupCommit{limit: time.Second, target: 3, wait: time.Second}
	ops := make(chan op, 2)
	ops <- &cancelOp{}
	ops <- &cancelOp{}
	b := g.gather(context.Background(), ops, make([]op, 1), func(op) { time.Sleep(200 * time.Millisecond) })
	if len(b) != 3 || !g.waited || !g.full {
		t.Fatalf("gathered %d (waited %v, full %v), want 3 and the target seen", len(b), g.waited, g.full)
	}
	if g.used >= 200*time.Millisecond {
		t.Fatalf("used %v: the time deciding was counted as waiting", g.used)
	}
}
