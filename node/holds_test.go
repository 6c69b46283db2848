package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestHoldsExpire: the holds a site gives peers' quotes run out at the end
// of their hold (they are kept in a heap by expiry, not found by a walk of
// every agreement): each is dropped, and its processors are free again.
func TestHoldsExpire(t *testing.T) {
	sites := startFederation(t, 100, 4)
	ctx := context.Background()
	fed := sites[0].fed
	// Four holds of one processor each, of 15 to 60 site seconds (0.15 to
	// 0.6 s of wall time at 100×), then the machine is full now.
	for i := range 4 {
		q, err := fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: fmt.Sprintf("x.%012d", i+1), Spec: spec(1, 3600),
			HoldSeconds: int64(15 * (4 - i)), StartNow: true})
		if err != nil || q.GetOffer() == nil {
			t.Fatalf("quote %d: %v %v", i, q, err)
		}
	}
	if q, err := fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: "x.000000000009", Spec: spec(1, 60), StartNow: true}); err != nil || q.GetOffer() != nil {
		t.Fatalf("a fifth processor now on a full site: %v %v, want a refusal", q, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := range 4 {
		for {
			_, err := fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "x", OriginJobId: fmt.Sprintf("x.%012d", i+1)})
			if status.Code(err) == codes.NotFound {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("hold %d still there after its end", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	q, err := fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: "x.000000000010", Spec: spec(4, 60), StartNow: true})
	if err != nil || q.GetOffer() == nil {
		t.Fatalf("the whole site now, after the holds ran out: %v %v", q, err)
	}
}
