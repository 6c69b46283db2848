package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestFrozenJobsMatchTheStore checks the frozen waiting jobs (freeze.go)
// between turns: every waiting job is frozen, a frozen job holds no
// message, and every live job, frozen or not, is what the store (or the
// turn's unwritten changes) says it is. The jobs are submitted, re-planned
// earlier when the jobs ahead of them end early (conservative backfilling
// thaws, changes and freezes them again), cancelled while frozen, and
// recovered after a restart.
func TestFrozenJobsMatchTheStore(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.TimeScale = "t", dir, 8, "simulated", 1000
	cfg.Policy = "conservative"
	st, err := store.OpenBolt(dir, &store.Options{MaxBatchDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// check returns the reservation start of every live job, after checking
	// them.
	check := func(n *Node, when string) map[string]int64 {
		t.Helper()
		starts := make(map[string]int64)
		o := &inLoop{done: make(chan struct{}), f: func(n *Node) {
			frozen := 0
			for seq, lj := range n.live {
				waits := lj.state() == fedschedv1.JobState_JOB_STATE_PENDING && !lj.cancelled && n.inflight[seq] == nil
				if waits && !lj.frozen() {
					t.Errorf("%s: job %d waits and is not frozen", when, seq)
				}
				if lj.frozen() {
					frozen++
					if lj.j != nil || lj.rec.Job != nil {
						t.Errorf("%s: frozen job %d still holds its message", when, seq)
					}
				}
				j := lj.peek()
				want, ok := n.pending.jobs[j.GetId()]
				if !ok {
					if want, err = n.deps.Store.GetJob(context.Background(), j.GetId()); err != nil {
						t.Errorf("%s: job %s: %v", when, j.GetId(), err)
						continue
					}
				}
				if !proto.Equal(j, want.Job) {
					t.Errorf("%s: job %s in memory:\n%v\nstored:\n%v", when, j.GetId(), j, want.Job)
				}
				starts[j.GetId()] = j.GetReservation().GetStart().AsTime().Unix()
			}
			if frozen == 0 {
				t.Errorf("%s: no job frozen", when)
			}
		}}
		if err := n.send(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		<-o.done
		return starts
	}
	start := func() (*Node, func()) {
		clk := clock.Scaled(time.Now(), cfg.TimeScale)
		ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
		n, err := New(cfg, Deps{Store: st, Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
		if err != nil {
			t.Fatal(err)
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
	n, stop := start()
	svc := &service{n: n}
	ctx := context.Background()
	submit := func(k int, sp *fedschedv1.JobSpec) string {
		t.Helper()
		r, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("k%d", k), Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetJob().GetId()
	}
	// Jobs that wait for tomorrow, and whole-site jobs that queue behind
	// each other, each estimated at 300 s of the site's clock but ending
	// after 60: each early end moves the ones behind it earlier.
	var tomorrow, queued []string
	for k := range 12 {
		tomorrow = append(tomorrow, submit(k, &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 3600, User: "u", App: "t",
			Release: timestamppb.New(n.deps.Clock.Now().Add(24 * time.Hour))}))
	}
	for k := range 10 {
		queued = append(queued, submit(100+k, &fedschedv1.JobSpec{Procs: 8, EstimateSeconds: 300, SimRuntimeSeconds: 60, User: "v", App: "t"}))
	}
	before := check(n, "after the submissions")
	if _, err := svc.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: tomorrow[3]}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.GetJob(ctx, tomorrow[3]); err != nil || r.Job.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
		t.Fatalf("the frozen job cancelled is %v in the store (%v)", r.Job.GetState(), err)
	}
	// Until a queued job has moved earlier (the first ends after a minute
	// of the site's clock, 60 ms).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		after := check(n, "after early ends")
		moved := 0
		for _, id := range queued[1:] {
			if s, ok := after[id]; ok && s < before[id] {
				moved++
			}
		}
		if moved > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no queued job moved earlier: before %v, after %v", before, after)
		}
	}
	stop()
	n, stop = start()
	defer stop()
	check(n, "after a restart")
}
