package node

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// TestSavedFromStoreRestoresTheNodesPlan: an agent restored from what a
// node stored (savedFromStore, agentConfig) holds the node's plan: every
// live job where the node has it, running or waiting, and the operator's
// fixed reservation.
func TestSavedFromStoreRestoresTheNodesPlan(t *testing.T) {
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	n := startManualNode(t, t0, 8)
	ctx := context.Background()
	svc := &service{n: n}
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	if _, err := svc.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "maint", Procs: 4, Start: at(3 * time.Hour), End: at(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []*fedschedv1.JobSpec{
		{Procs: 4, EstimateSeconds: 7200},                               // runs now
		{Procs: 8, EstimateSeconds: 3600},                               // after it, before the maintenance? no: after it
		{Procs: 2, EstimateSeconds: 1800},                               // beside the first
		{Procs: 6, EstimateSeconds: 10 * 3600},                          // late
		{Procs: 2, EstimateSeconds: 600, Release: at(30 * time.Minute)}, // released later
	} {
		sp.User, sp.App = "u", "t"
		if _, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var running int
		runInLoop(t, n, &inLoop{done: make(chan struct{}), f: func(n *Node) { running = n.site.Running() }})
		if running == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs running, want 2", running)
		}
	}
	runInLoop(t, n, &inLoop{done: make(chan struct{}), f: func(n *Node) {
		now := n.now()
		saved, err := savedFromStore(ctx, n.deps.Store, n.cfg.Site)
		if err != nil {
			t.Error(err)
			return
		}
		a, err := site.Restore(n.agentConfig(nil), now, saved)
		if err != nil {
			t.Error(err)
			return
		}
		if a.Site().Running() != n.site.Running() || a.Site().Waiting() != n.site.Waiting() || len(a.Site().Fixed()) != len(n.site.Fixed()) {
			t.Errorf("agent: %d running, %d waiting, %d fixed; node: %d, %d, %d", a.Site().Running(), a.Site().Waiting(), len(a.Site().Fixed()),
				n.site.Running(), n.site.Waiting(), len(n.site.Fixed()))
		}
		for seq := range n.live {
			want, ok := n.site.Placement(seq)
			got, ok2 := a.Site().Placement(seq)
			if ok != ok2 || want.Start != got.Start || want.End != got.End {
				t.Errorf("job %d: node %+v (%v), agent %+v (%v)", seq, want, ok, got, ok2)
			}
		}
		for _, at := range []int64{now, now + 1800, now + 3*3600 + 1, now + 5*3600, now + 12*3600} {
			if f, g := n.site.Plan().Free(at), a.Site().Plan().Free(at); f != g {
				t.Errorf("free at +%d s: node %d, agent %d", at-now, f, g)
			}
		}
		if a.NextID() != int64(n.nextSeq)+1 {
			t.Errorf("the agent's next id %d, the node's %d", a.NextID(), n.nextSeq+1)
		}
	}})
}
