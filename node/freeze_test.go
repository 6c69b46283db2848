package node

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/config"
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
	keys := make(map[string]string)   // by job id, the submission's key
	hashes := make(map[string][]byte) // by job id, the hash first stored
	// check returns the reservation start of every live job, after checking
	// them.
	check := func(n *Node, when string) map[string]int64 {
		t.Helper()
		starts := make(map[string]int64)
		o := &inLoop{done: make(chan struct{}), f: func(n *Node) {
			frozen := 0
			for seq, lj := range n.live {
				waits := lj.state() == fedschedv1.JobState_JOB_STATE_PENDING && !lj.cancelled && !offering(lj)
				if waits && !lj.frozen() {
					t.Errorf("%s: job %d waits and is not frozen", when, seq)
				}
				rec := lj.rec
				if lj.frozen() {
					frozen++
					if lj.j != nil || lj.rec.Job != nil || lj.rec.IdempotencyKey != "" || lj.rec.BodyHash != nil {
						t.Errorf("%s: frozen job %d still holds its message or record", when, seq)
					}
					rec = lj.thawed()
				}
				j := lj.peek()
				want, ok := n.pending.jobs[j.GetId()]
				if !ok {
					if want, err = n.deps.Store.GetJob(context.Background(), j.GetId()); err != nil {
						t.Errorf("%s: job %s: %v", when, j.GetId(), err)
						continue
					}
				}
				if !proto.Equal(j, want.Job) || !proto.Equal(rec.Job, want.Job) {
					t.Errorf("%s: job %s in memory:\n%v\nstored:\n%v", when, j.GetId(), j, want.Job)
				}
				if rec.IdempotencyKey != want.IdempotencyKey || !bytes.Equal(rec.BodyHash, want.BodyHash) {
					t.Errorf("%s: job %s in memory has key %q and hash %x, stored %q and %x", when, j.GetId(), rec.IdempotencyKey, rec.BodyHash, want.IdempotencyKey, want.BodyHash)
				}
				// A rewrite keeps the key and hash of the submission.
				if h, ok := hashes[j.GetId()]; !ok {
					hashes[j.GetId()] = want.BodyHash
				} else if !bytes.Equal(h, want.BodyHash) || want.IdempotencyKey != keys[j.GetId()] {
					t.Errorf("%s: job %s is stored with key %q and hash %x, submitted with %q and %x", when, j.GetId(), want.IdempotencyKey, want.BodyHash, keys[j.GetId()], h)
				}
				starts[j.GetId()] = j.GetReservation().GetStart().AsTime().Unix()
			}
			if frozen == 0 {
				t.Errorf("%s: no job frozen", when)
			}
		}}
		runInLoop(t, n, o)
		return starts
	}
	start := func() (*Node, func()) { return startSimulated(t, cfg, st) }
	n, stop := start()
	svc := &service{n: n}
	ctx := context.Background()
	submit := func(k int, sp *fedschedv1.JobSpec) string {
		t.Helper()
		r, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("k%d", k), Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		keys[r.GetJob().GetId()] = userKey(&fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("k%d", k), Spec: sp})
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
