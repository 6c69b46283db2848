package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestUnconfirmedQuoteAsksTheNextRound: the peer the origin chose does not
// confirm its quote (its Agree fails and it holds no agreement); the
// origin asks the next round, as the site agent does, and the job goes to
// the next preferred peer instead of falling back at once to the origin
// (which, full, would reject it). The failed peer's hold is released.
func TestUnconfirmedQuoteAsksTheNextRound(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{
		{Name: "a", Procs: 4, Delegation: config.Delegation{Prefer: []string{"b", "c"}}},
		{Name: "b", Procs: 8},
		{Name: "c", Procs: 8},
	}})
	a := c.Site("a")
	fill(t, a)
	var failed atomic.Int32
	c.SetHook(func(_ context.Context, call Call) error {
		if call.From == "a" && call.To == "b" && call.Method == "Agree" && call.Phase == Before {
			failed.Add(1)
			return status.Error(codes.FailedPrecondition, "e2e: b does not confirm")
		}
		return nil
	})
	j := submit(t, a, slaSpec(c, 2, 600, 300)) // no slot at a before its deadline
	if failed.Load() != 1 {
		t.Fatalf("a agreed with b %d times, want 1", failed.Load())
	}
	if j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || j.GetSite() != "c" {
		t.Fatalf("job after b did not confirm: %s, want delegated to c", brief(j))
	}
	// b let go of its hold: nothing of a's is held or agreed there.
	ag, err := c.Site("b").Fed.GetAgreement(bg(t), &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: j.GetId()})
	if status.Code(err) != codes.NotFound && ag.GetAgreement().GetState() != fedschedv1.AgreementState_AGREEMENT_STATE_REJECTED {
		t.Fatalf("b after the failed agree: %v %v", ag.GetAgreement().GetState(), err)
	}
	waitJob(t, a, j.GetId(), 20*time.Second, "completed", inState(fedschedv1.JobState_JOB_STATE_COMPLETED))
}
