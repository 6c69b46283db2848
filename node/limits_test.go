package node_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// storedState is what a refused call must leave as it was: every job and
// every idempotency key.
type storedState struct {
	jobs []*fedschedv1.Job
	keys int
}

func snapshotStore(t *testing.T, st store.Store) storedState {
	t.Helper()
	ctx := context.Background()
	recs, _, err := st.ListJobs(ctx, store.JobQuery{PageSize: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	var s storedState
	for _, r := range recs {
		s.jobs = append(s.jobs, r.Job)
	}
	if s.keys, err = st.CountIdempotencyKeys(ctx, "", 0); err != nil {
		t.Fatal(err)
	}
	return s
}

func sameStored(a, b storedState) bool {
	if a.keys != b.keys || len(a.jobs) != len(b.jobs) {
		return false
	}
	for i := range a.jobs {
		if !proto.Equal(a.jobs[i], b.jobs[i]) {
			return false
		}
	}
	return true
}

// startLimited starts a test site with its limits set by set; it stops
// at the end of the test.
func startLimited(t *testing.T, set func(*config.Limits)) (*testSite, store.Store) {
	t.Helper()
	cfg := testConfig(t.TempDir())
	set(&cfg.Limits)
	st := store.NewMemStore()
	s := startSite(t, cfg, st)
	t.Cleanup(func() { s.stop(t) })
	return s, st
}

// longSpec is a job of user that holds the whole site for a long time, so
// that the jobs after it stay PENDING (and the store stays still).
func longSpec(user string) *fedschedv1.JobSpec {
	return &fedschedv1.JobSpec{Procs: 8, EstimateSeconds: 1_000_000, User: user, App: "sim"}
}

// TestIdempotencyKeyLimit: a user with limits.max_idempotency_keys keys
// remembered cannot submit with a new key (ResourceExhausted, saying what
// to do), and the refusal changes nothing stored; a retry of a remembered
// key still replays, a submission without a key and another user's
// submissions still pass.
func TestIdempotencyKeyLimit(t *testing.T) {
	s, st := startLimited(t, func(l *config.Limits) { l.MaxIdempotencyKeys = 3 })
	ctx := context.Background()
	submit := func(key, user string) (*fedschedv1.SubmitJobResponse, error) {
		return s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: key, Spec: longSpec(user)})
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := submit(k, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotStore(t, st)
	_, err := submit("k4", "alice")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limits.max_idempotency_keys") || !strings.Contains(err.Error(), "--idempotency-key ''") {
		t.Fatalf("fourth key: %v; want ResourceExhausted naming limits.max_idempotency_keys and what to do", err)
	}
	if after := snapshotStore(t, st); !sameStored(before, after) {
		t.Fatalf("the refused call changed the store: %d jobs %d keys before, %d jobs %d keys after", len(before.jobs), before.keys, len(after.jobs), after.keys)
	}
	if r, err := submit("k2", "alice"); err != nil || !r.GetReplayed() {
		t.Fatalf("a retry of a remembered key at the limit: %v, %v; want a replay", r, err)
	}
	if _, err := submit("", "alice"); err != nil {
		t.Fatalf("a submission without a key at the limit: %v", err)
	}
	r, err := submit("k4", "bob")
	if err != nil {
		t.Fatalf("another user's key: %v", err)
	}
	// The refused call took no sequence number: bob's job is the fifth.
	if got, want := r.GetJob().GetId(), "t.000000000005"; got != want {
		t.Errorf("next job id %s, want %s", got, want)
	}
}

// TestIdempotencyKeyLimitConcurrent: submissions decided in one turn count
// each other's keys before any is stored, so a burst never passes the
// limit.
func TestIdempotencyKeyLimitConcurrent(t *testing.T) {
	s, st := startLimited(t, func(l *config.Limits) { l.MaxIdempotencyKeys = 5 })
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, full int
	)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.client.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{IdempotencyKey: "burst-" + string(rune('A'+i)), Spec: longSpec("alice")})
			mu.Lock()
			defer mu.Unlock()
			switch status.Code(err) {
			case codes.OK:
				ok++
			case codes.ResourceExhausted:
				full++
			default:
				t.Errorf("submit: %v", err)
			}
		}()
	}
	wg.Wait()
	keys, err := st.CountIdempotencyKeys(context.Background(), "alice/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok != 5 || full != 35 || keys != 5 {
		t.Fatalf("%d accepted, %d refused, %d keys stored; want 5, 35, 5", ok, full, keys)
	}
}

// TestPendingJobLimit: limits.max_pending_jobs is per user, refused with
// ResourceExhausted and a message naming it, and the refusal stores
// nothing.
func TestPendingJobLimit(t *testing.T) {
	s, st := startLimited(t, func(l *config.Limits) { l.MaxPendingJobs = 2 })
	ctx := context.Background()
	submit := func(user string) error {
		_, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: longSpec(user)})
		return err
	}
	// The first runs; the next two wait.
	for range 3 {
		if err := submit("alice"); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotStore(t, st)
	if err := submit("alice"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limits.max_pending_jobs") {
		t.Fatalf("third pending job: %v; want ResourceExhausted naming limits.max_pending_jobs", err)
	}
	if after := snapshotStore(t, st); !sameStored(before, after) {
		t.Fatal("the refused call changed the store")
	}
	if err := submit("bob"); err != nil {
		t.Fatalf("another user: %v", err)
	}
}

// TestWatchAndMessageLimits: limits.max_watches bounds the open streams of
// one identity, and limits.max_message_bytes the size of a request; both
// are ResourceExhausted naming the limit.
func TestWatchAndMessageLimits(t *testing.T) {
	s, st := startLimited(t, func(l *config.Limits) { l.MaxWatches, l.MaxMessageBytes = 2, 64<<10 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	as := func(user string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, auth.ClaimedUserKey, user)
	}
	// Each stream is open (its handler running) once it has delivered an
	// event. The handler may start after a job's event went out, so jobs
	// are submitted until the stream delivers one (or is refused).
	watch := func() error {
		w, err := s.client.WatchJobs(as("alice"), &fedschedv1.WatchJobsRequest{})
		if err != nil {
			return err
		}
		got := make(chan error, 1)
		go func() {
			_, err := w.Recv()
			got <- err
		}()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case err := <-got:
				return err
			case <-tick.C:
				if _, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: longSpec("alice")}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for range 2 {
		if err := watch(); err != nil {
			t.Fatal(err)
		}
	}
	if err := watch(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limits.max_watches") {
		t.Fatalf("third watch: %v; want ResourceExhausted naming limits.max_watches", err)
	}
	before := snapshotStore(t, st)
	big := longSpec("alice")
	big.Env = map[string]string{"BIG": strings.Repeat("x", 70<<10)}
	_, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: big})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 70 KiB request with max_message_bytes 64 KiB: %v; want ResourceExhausted", err)
	}
	if after := snapshotStore(t, st); !sameStored(before, after) {
		t.Fatal("the refused call changed the store")
	}
}
