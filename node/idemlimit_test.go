package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestKeyCounter: a user's count is read from the store once, then kept
// as keys are accepted; after a prune the next check reads the store
// again, so pruned keys make room.
func TestKeyCounter(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemStore()
	var c store.Changes
	for i := range 2 {
		r := store.JobRecord{Job: &fedschedv1.Job{Id: fmt.Sprintf("a.%d", i), Site: "a", State: fedschedv1.JobState_JOB_STATE_PENDING,
			SubmitTime: timestamppb.New(time.Unix(1000, 0)), Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 1, User: "alice"}},
			IdempotencyKey: fmt.Sprintf("alice/k%d", i), BodyHash: []byte("h")}
		c.PutJobs = append(c.PutJobs, r)
	}
	if err := st.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Site, cfg.Limits.MaxIdempotencyKeys = "a", 3
	n := &Node{cfg: cfg, deps: Deps{Store: st}}
	check := func() error {
		_, refused := n.checkKeyLimit(ctx, "alice")
		return map[bool]error{true: ErrLimitReached}[refused]
	}
	if err := check(); err != nil {
		t.Fatalf("2 stored keys of 3: %v", err)
	}
	if err := check(); !errors.Is(err, ErrLimitReached) {
		t.Fatalf("2 stored and 1 accepted of 3: %v; want the limit", err)
	}
	if k, err := st.PruneIdempotencyKeys(ctx, time.Unix(2000, 0)); err != nil || k != 2 {
		t.Fatalf("prune: %d, %v", k, err)
	}
	if err := check(); !errors.Is(err, ErrLimitReached) {
		t.Fatalf("before the node hears of the prune: %v; want the kept count", err)
	}
	n.keys.gen.Add(1) // as pruneKeys does
	if err := check(); err != nil {
		t.Fatalf("after the prune: %v", err)
	}
}
