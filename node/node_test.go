package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// testSite is a node serving on loopback with the simulated executor and a
// clock 1,000 times faster than real time.
type testSite struct {
	node   *node.Node
	store  store.Store
	client fedschedv1.SiteServiceClient
	conn   *grpc.ClientConn
	clk    clock.Clock
	cancel context.CancelFunc
	done   chan error
}

func testConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.TimeScale = "t", dir, 8, "simulated", 1000
	return cfg
}

func startSite(t *testing.T, cfg config.Config, st store.Store) *testSite {
	t.Helper()
	return startSiteWrapped(t, cfg, st, nil)
}

// startSiteWrapped is startSite with the simulated executor wrapped by
// wrap (if not nil), to watch what the node asks of it.
func startSiteWrapped(t *testing.T, cfg config.Config, st store.Store, wrap func(executor.Executor) executor.Executor) *testSite {
	t.Helper()
	clk := clock.Scaled(time.Now(), cfg.TimeScale)
	var ex executor.Executor = executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	if wrap != nil {
		ex = wrap(ex)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(cfg, node.Deps{Store: st, Executor: ex, Clock: clk, Logger: log, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &testSite{node: n, store: st, clk: clk, cancel: cancel, done: make(chan error, 3)}
	go func() { s.done <- ex.Run(ctx) }()
	go func() { s.done <- n.Run(ctx) }()
	go func() { s.done <- n.Serve(ctx, lis, time.Second) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.conn, s.client = conn, fedschedv1.NewSiteServiceClient(conn)
	waitServing(t, conn)
	return s
}

func waitServing(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("node never became SERVING")
}

// stop stops the site gracefully.
func (s *testSite) stop(t *testing.T) {
	s.cancel()
	for range 3 {
		if err := <-s.done; err != nil {
			t.Errorf("stop: %v", err)
		}
	}
	s.conn.Close()
}

// crash stops the site without its shutdown path: the database handle is
// closed under it first, so nothing after the last acknowledged write can
// reach the file.
func (s *testSite) crash() {
	s.store.Close()
	s.cancel()
	for range 3 {
		<-s.done
	}
	s.conn.Close()
}

func spec(procs int32, est int64) *fedschedv1.JobSpec {
	return &fedschedv1.JobSpec{Procs: procs, EstimateSeconds: est, User: "alice", App: "sim"}
}

func waitState(t *testing.T, c fedschedv1.SiteServiceClient, id string, want fedschedv1.JobState) *fedschedv1.Job {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last *fedschedv1.Job
	for time.Now().Before(deadline) {
		r, err := c.GetJob(context.Background(), &fedschedv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		if last = r.GetJob(); last.GetState() == want {
			return last
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("job %s stayed %v, want %v", id, last.GetState(), want)
	return nil
}

func TestJobLifecycle(t *testing.T) {
	s := startSite(t, testConfig(t.TempDir()), store.NewMemStore())
	defer s.stop(t)
	ctx := context.Background()
	w, err := s.client.WatchJobs(ctx, &fedschedv1.WatchJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Header(); err != nil { // the watch is registered
		t.Fatal(err)
	}
	// 60 virtual seconds is 60 ms of wall time at 1000x.
	sp := spec(4, 120)
	sp.SimRuntimeSeconds = 60
	r, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "k1", Spec: sp})
	if err != nil {
		t.Fatal(err)
	}
	j := r.GetJob()
	if j.GetState() != fedschedv1.JobState_JOB_STATE_PENDING || j.GetReason() != fedschedv1.Reason_REASON_PLACED_IN_FULL || j.GetReservation() == nil {
		t.Fatalf("submit: %v", j)
	}
	done := waitState(t, s.client, j.GetId(), fedschedv1.JobState_JOB_STATE_COMPLETED)
	if done.GetExitCode() != 0 || done.GetStartTime() == nil || done.GetEndTime() == nil {
		t.Fatalf("completed job: %v", done)
	}
	var states []fedschedv1.JobState
	for len(states) < 3 {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, ev.GetJob().GetState())
	}
	want := []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_COMPLETED}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("watched %v, want %v", states, want)
	}
	ex, err := s.client.Explain(ctx, &fedschedv1.ExplainRequest{JobId: j.GetId()})
	if err != nil || !strings.Contains(ex.GetSummary(), "COMPLETED") || len(ex.GetReasons()) == 0 {
		t.Fatalf("explain: %v %v", ex, err)
	}
	site, err := s.client.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	if err != nil || site.GetSite().GetProcs() != 8 || site.GetSite().GetName() != "t" {
		t.Fatalf("site: %v %v", site, err)
	}
}

func TestIdempotentSubmit(t *testing.T) {
	s := startSite(t, testConfig(t.TempDir()), store.NewMemStore())
	defer s.stop(t)
	ctx := context.Background()
	a, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "same", Spec: spec(1, 100)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "same", Spec: spec(1, 100)})
	if err != nil || !b.GetReplayed() || b.GetJob().GetId() != a.GetJob().GetId() {
		t.Fatalf("retry: %v %v", b, err)
	}
	_, err = s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "same", Spec: spec(2, 100)})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("reused key with another body: %v", err)
	}
	// Concurrent retries of one key make one job.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "race", Spec: spec(1, 50)})
			if err == nil {
				ids[i] = r.GetJob().GetId()
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("concurrent retries gave %v", ids)
		}
	}
}

// TestBadInput submits invalid requests; each gets InvalidArgument (or the
// fitting code) with a message saying what to fix, and stored state does
// not change.
func TestBadInput(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s := startSite(t, cfg, store.NewMemStore())
	defer s.stop(t)
	ctx := context.Background()
	if _, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "taken", Spec: spec(1, 10)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	with := func(f func(*fedschedv1.JobSpec)) *fedschedv1.JobSpec { sp := spec(1, 100); f(sp); return sp }
	long := strings.Repeat("x", 10000)
	tests := []struct {
		name string
		req  *fedschedv1.SubmitJobRequest
		code codes.Code
		msg  string
	}{
		{"no spec", &fedschedv1.SubmitJobRequest{}, codes.InvalidArgument, "spec is required"},
		{"zero procs", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.Procs = 0 })}, codes.InvalidArgument, "procs must be at least 1"},
		{"negative procs", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.Procs = -3 })}, codes.InvalidArgument, "procs"},
		{"wider than the site", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.Procs = 9 })}, codes.InvalidArgument, "exceeds the site's 8"},
		{"zero estimate", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.EstimateSeconds = 0 })}, codes.InvalidArgument, "estimate_seconds"},
		{"negative estimate", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.EstimateSeconds = -1 })}, codes.InvalidArgument, "estimate_seconds"},
		{"estimate over a year", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.EstimateSeconds = 400 * 86400 })}, codes.InvalidArgument, "one year"},
		{"deadline before release+estimate", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) {
			s.Deadline = timestamppb.New(now.Add(time.Second))
		})}, codes.InvalidArgument, "deadline"},
		{"deadline in the past", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) {
			s.Deadline = timestamppb.New(now.Add(-time.Hour))
		})}, codes.InvalidArgument, "before release + estimate"},
		{"negative fee", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) {
			s.Deadline, s.Fee = timestamppb.New(now.Add(time.Hour*1000)), -1
		})}, codes.InvalidArgument, "fee"},
		{"negative penalty", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) {
			s.Deadline, s.Penalty = timestamppb.New(now.Add(time.Hour*1000)), -1
		})}, codes.InvalidArgument, "penalty"},
		{"NaN fee", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) {
			s.Deadline, s.Fee = timestamppb.New(now.Add(time.Hour*1000)), math.NaN()
		})}, codes.InvalidArgument, "fee"},
		{"fee without deadline", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.Fee = 3 })}, codes.InvalidArgument, "need a deadline"},
		{"no user", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.User = "" })}, codes.InvalidArgument, "user is required"},
		{"oversize user", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.User = long })}, codes.InvalidArgument, "user"},
		{"oversize app", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.App = long })}, codes.InvalidArgument, "app"},
		{"oversize argument", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.Command = []string{"echo", long} })}, codes.InvalidArgument, "command[1]"},
		{"NUL in argument", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.Command = []string{"a\x00b"} })}, codes.InvalidArgument, "NUL"},
		{"bad env name", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.Env = map[string]string{"A=B": "c"} })}, codes.InvalidArgument, "env"},
		{"negative sim runtime", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) { s.SimRuntimeSeconds = -5 })}, codes.InvalidArgument, "sim_runtime"},
		{"oversize key", &fedschedv1.SubmitJobRequest{IdempotencyKey: long, Spec: spec(1, 10)}, codes.InvalidArgument, "idempotency_key"},
		{"reused key, other body", &fedschedv1.SubmitJobRequest{IdempotencyKey: "taken", Spec: spec(2, 10)}, codes.AlreadyExists, "different request"},
		{"invalid timestamp", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) {
			s.Release = &timestamppb.Timestamp{Seconds: 1, Nanos: -5}
		})}, codes.InvalidArgument, "release"},
		{"release ten years ahead", &fedschedv1.SubmitJobRequest{Spec: with(func(s *fedschedv1.JobSpec) {
			s.Release = timestamppb.New(now.Add(11 * 366 * 24 * time.Hour))
		})}, codes.InvalidArgument, "ten years"},
		{"unknown fields", &fedschedv1.SubmitJobRequest{Spec: withUnknown(spec(1, 10))}, codes.InvalidArgument, "fields this site does not know"},
	}
	before := listAll(t, s.client)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.client.SubmitJob(ctx, tc.req)
			st, _ := status.FromError(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}
	if after := listAll(t, s.client); len(after) != len(before) {
		t.Fatalf("bad requests changed stored jobs: %d -> %d", len(before), len(after))
	}
	// Other calls validate too.
	if _, err := s.client.GetJob(ctx, &fedschedv1.GetJobRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GetJob without id: %v", err)
	}
	if _, err := s.client.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: "t.999"}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetJob of an unknown job: %v", err)
	}
	if _, err := s.client.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("CancelJob of an unknown job: %v", err)
	}
	if _, err := s.client.ListJobs(ctx, &fedschedv1.ListJobsRequest{PageToken: "garbage"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ListJobs with a bad token: %v", err)
	}
}

// withUnknown returns a spec carrying a field number this API does not have.
func withUnknown(s *fedschedv1.JobSpec) *fedschedv1.JobSpec {
	s.ProtoReflect().SetUnknown([]byte{0xf8, 0x07, 0x01}) // field 127, varint 1
	return s
}

func listAll(t *testing.T, c fedschedv1.SiteServiceClient) []*fedschedv1.Job {
	t.Helper()
	var out []*fedschedv1.Job
	token := ""
	for {
		r, err := c.ListJobs(context.Background(), &fedschedv1.ListJobsRequest{PageSize: 50, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.GetJobs()...)
		if token = r.GetNextPageToken(); token == "" {
			return out
		}
	}
}

func TestCancel(t *testing.T) {
	s := startSite(t, testConfig(t.TempDir()), store.NewMemStore())
	defer s.stop(t)
	ctx := context.Background()
	// Fill the site with a long job, queue a second behind it.
	long := spec(8, 3600*24)
	a, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: long})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec(8, 60)})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, s.client, a.GetJob().GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
	for _, id := range []string{b.GetJob().GetId(), a.GetJob().GetId()} {
		r, err := s.client.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id, Message: "changed my mind"})
		if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
			t.Fatalf("cancel %s: %v %v", id, r, err)
		}
	}
	// Cancelling again is harmless (site.proto, the CLI's help): the
	// cancelled job, unchanged, whether its process has ended or not.
	for _, id := range []string{b.GetJob().GetId(), a.GetJob().GetId()} {
		r, err := s.client.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id})
		if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED || !strings.Contains(r.GetJob().GetMessage(), "changed my mind") {
			t.Fatalf("second cancel of %s: %v %v", id, r, err)
		}
	}
	// The cancelled running job's processors come back: a full-width job runs.
	sp := spec(8, 30)
	sp.SimRuntimeSeconds = 20
	c, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, s.client, c.GetJob().GetId(), fedschedv1.JobState_JOB_STATE_COMPLETED)
	// A job that ended otherwise cannot be cancelled.
	if _, err := s.client.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: c.GetJob().GetId()}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("cancel of a completed job: %v", err)
	}
}

// TestCrashRecovery kills a node without shutdown after N acknowledged
// submissions, at random points, and checks that a new node on the same
// data directory has exactly those N jobs with their reservations.
func TestCrashRecovery(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TimeScale = 1 // jobs stay pending for the whole test
	total := map[string]*fedschedv1.Job{}
	for round := 0; round < 4; round++ {
		st, err := store.OpenBolt(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := startSite(t, cfg, st)
		// Everything acknowledged before is there, reservations included.
		got := listAll(t, s.client)
		if len(got) != len(total) {
			t.Fatalf("round %d: %d jobs after restart, %d acknowledged", round, len(got), len(total))
		}
		for _, j := range got {
			want := total[j.GetId()]
			if want == nil || j.GetState() != want.GetState() || !sameReservation(j.GetReservation(), want.GetReservation()) {
				t.Fatalf("round %d: job %s came back as %v, acknowledged %v", round, j.GetId(), j, want)
			}
		}
		// N more acknowledged submissions from 4 concurrent clients, then
		// the crash lands while more are in flight.
		n := 5 + rng.IntN(40)
		var mu sync.Mutex
		var wg sync.WaitGroup
		stopInflight := make(chan struct{})
		for c := 0; c < 4; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; ; k++ {
					select {
					case <-stopInflight:
						return
					default:
					}
					sp := spec(int32(1+k%8), int64(3600*(1+k%5)))
					// Released tomorrow: the jobs stay pending with their
					// reservations for the whole test.
					sp.Release = timestamppb.New(time.Now().Add(24 * time.Hour))
					r, err := s.client.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: sp})
					if err != nil {
						return // the crash cut it: not acknowledged
					}
					mu.Lock()
					total[r.GetJob().GetId()] = r.GetJob()
					done := len(total)
					mu.Unlock()
					if done >= n*(round+1) {
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stopInflight)
		s.crash()
	}
}

func sameReservation(a, b *fedschedv1.Reservation) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.GetStart().AsTime().Equal(b.GetStart().AsTime()) && a.GetEnd().AsTime().Equal(b.GetEnd().AsTime()) && a.GetProcs() == b.GetProcs()
}

func TestSecondNodeOnSameDataDirFails(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := store.OpenBolt(dir, &store.Options{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}
