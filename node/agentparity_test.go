package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// TestAgentConfigDecidesAsTheNode: the agent a node's configuration gives
// (agentConfig, with the node's history as pastJobs) admits a run of
// submissions exactly as the node does today: the same accepted jobs, the
// same reservations, overbooked with the same PoF, the same rejections.
// The node's clock stands still, so admission alone decides (the first
// step of a differential test of the switch).
func TestAgentConfigDecidesAsTheNode(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 9))
	var hist strings.Builder
	for i := range 300 { // past jobs ran 20-70 % of their estimate
		est := 600 + rng.Int64N(7200)
		fmt.Fprintf(&hist, "%d %d 0 %d 2 -1 -1 2 %d -1 1 1 1 1 1 1 -1 -1\n", i+1, i*100, est*int64(20+rng.IntN(50))/100, est)
	}
	hpath := filepath.Join(dir, "history.swf")
	if err := os.WriteFile(hpath, []byte(hist.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.Policy = "t", filepath.Join(dir, "data"), 16, "simulated", "conservative"
	cfg.Limits.MaxPendingJobs, cfg.Limits.MaxIdempotencyKeys = 1<<30, 1<<30
	cfg.Overbooking.Enabled, cfg.Overbooking.PoFMax, cfg.Overbooking.History = true, 0.5, hpath
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	n, err := New(cfg, Deps{Store: store.NewMemStore(), Executor: ex, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	past, _, err := pastJobs(hpath)
	if err != nil {
		t.Fatal(err)
	}
	pj := make([]site.PastJob, len(past))
	for i, p := range past {
		pj[i] = p.PastJob
	}
	a, err := site.New(n.agentConfig(pj))
	if err != nil {
		t.Fatal(err)
	}
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
	now := t0.Unix()
	overbooked, rejected := 0, 0
	for i := range 80 {
		est := 600 + rng.Int64N(7200)
		procs := 1 + rng.IntN(8)
		deadline := now + est + rng.Int64N(10*est)
		spec := &fedschedv1.JobSpec{Procs: int32(procs), EstimateSeconds: est, Deadline: timestamppb.New(time.Unix(deadline, 0)), Fee: 10, Penalty: 5,
			User: "u", App: "x", SimRuntimeSeconds: est}
		r, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		j := r.GetJob()
		a.Submit(now, a.NextID(), planJob(spec, 0, now))
		rd := a.Ready()
		if len(rd.Decisions) != 1 {
			t.Fatalf("job %d: the agent decided %+v", i, rd.Decisions)
		}
		d := rd.Decisions[0]
		node := "rejected"
		if res := j.GetReservation(); res != nil && j.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED {
			node = fmt.Sprintf("%d..%d overbooked %v pof %.6f", res.GetStart().AsTime().Unix(), res.GetEnd().AsTime().Unix(), j.GetOverbooked(), j.GetPof())
		}
		agent := "rejected"
		if d.Kind == site.DecideAccept {
			agent = fmt.Sprintf("%d..%d overbooked %v pof %.6f", d.Placement.Start, d.Placement.End, d.Placement.Reason == plan.ReasonOverbooked, d.Placement.PoF)
		}
		if node != agent {
			t.Fatalf("job %d (%d procs, %d s, deadline +%d): node %s (%v), agent %s", i, procs, est, deadline-now, node, j.GetState(), agent)
		}
		switch {
		case agent == "rejected":
			rejected++
		case d.Placement.Reason == plan.ReasonOverbooked:
			overbooked++
		}
	}
	t.Logf("80 submissions: %d overbooked, %d rejected, the rest placed in full; all alike", overbooked, rejected)
	if overbooked == 0 || rejected == 0 {
		t.Fatalf("the run did not exercise overbooking (%d) and rejection (%d)", overbooked, rejected)
	}
}
