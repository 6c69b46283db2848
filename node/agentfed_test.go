package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// failingStore refuses every change while fail is set.
type failingStore struct {
	store.Store
	fail bool
}

func (s *failingStore) Apply(ctx context.Context, ch store.Changes) error {
	if s.fail {
		return errors.New("test: the disk is gone")
	}
	return s.Store.Apply(ctx, ch)
}

// TestAgentMessagesWaitForTheCommit: the durability rule of the federation
// through the agent. The messages a batch of the agent's decisions sends
// (an agree, a report, a Terminate: each promises what its decision
// recorded) are handed to the sending goroutines only by the commit that
// made that batch durable: none while the commit fails, all once one
// succeeds.
func TestAgentMessagesWaitForTheCommit(t *testing.T) {
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor = "o", t.TempDir(), 4, "simulated"
	clk := clock.NewManual(time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC))
	st := &failingStore{Store: store.NewMemStore(), fail: true}
	n, err := New(cfg, Deps{Store: st, Executor: executor.NewSimulated(executor.SimulatedConfig{Clock: clk}), Clock: clk,
		Federation: FederationConfig{Peers: noPeers{}, Dial: func(context.Context, string, string) (*grpc.ClientConn, error) {
			return nil, errors.New("test: no dialing")
		}}})
	if err != nil {
		t.Fatal(err)
	}
	// A batch: the intent of an agree (a job record) and the agree it
	// sends.
	job := &fedschedv1.Job{Id: jobID("o", 1), Site: "o", OriginSite: "o"}
	n.pending.putJob(store.JobRecord{Job: job})
	n.queueOut(clk.Now().Unix(), []site.Message{{Kind: site.KindAgree, From: "o", To: "p", Job: site.JobKey{Site: "o", ID: 1}, HoldID: "o/1#3"}})
	if err := n.commit(context.Background()); err == nil {
		t.Fatal("the commit succeeded on a failing store")
	}
	if len(n.sendq) != 0 {
		t.Fatalf("%d messages handed to the senders although their commit failed", len(n.sendq))
	}
	st.fail = false
	n.pending.putJob(store.JobRecord{Job: job})
	if err := n.commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(n.sendq) != 1 {
		t.Fatalf("%d messages handed to the senders after the commit, want the agree", len(n.sendq))
	}
	c := <-n.sendq
	r, ok := c.req.(*fedschedv1.AgreeRequest)
	if !ok || c.m.To != "p" || r.GetHoldId() != "o/1#3" || r.GetOriginJobId() != job.GetId() {
		t.Fatalf("sent %T %v to %s, want the agree to p's hold o/1#3", c.req, c.req, c.m.To)
	}
}

// TestSavedFromStoreRestoresAnAgreeInFlight: a job whose agree was written
// ahead is restored agreeing with the peer its intent hop names, under the
// hold that hop names (RouteHop.hold_id), so that the restarted origin
// agrees to that very hold again; an RQF hand-over's hop (taken) is
// restored as one.
func TestSavedFromStoreRestoresAnAgreeInFlight(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemStore()
	for i, taken := range []bool{false, true} {
		id := jobID("o", uint64(i+1))
		job := &fedschedv1.Job{Id: id, Site: "o", OriginSite: "o", State: fedschedv1.JobState_JOB_STATE_PENDING, Reason: fedschedv1.Reason_REASON_DELEGATED,
			Spec: &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600}, SubmitTime: toTime(1000),
			Route: []*fedschedv1.RouteHop{{Site: "o", Message: "submitted", Time: toTime(1000)},
				{Site: "o", PeerSite: "p", Reason: fedschedv1.Reason_REASON_DELEGATED, Time: toTime(1001), Taken: taken, HoldId: fmt.Sprintf("o/%d#4", i+1)}}}
		if err := st.PutJob(ctx, store.JobRecord{Job: job}); err != nil {
			t.Fatal(err)
		}
	}
	saved, err := savedFromStore(ctx, st, "o")
	if err != nil {
		t.Fatal(err)
	}
	for i, taken := range []bool{false, true} {
		sj := saved.Jobs[site.JobKey{Site: "o", ID: int64(i + 1)}]
		if sj == nil || sj.Phase != site.PhaseAgreeing || sj.Peer != "p" || sj.HoldID != fmt.Sprintf("o/%d#4", i+1) || sj.HandOver != taken {
			t.Fatalf("job %d restored as %+v, want agreeing with p under hold o/%d#4, hand-over %v", i+1, sj, i+1, taken)
		}
	}
}
