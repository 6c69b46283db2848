package node_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// fuzzProcs is the size of the fuzzed site.
const fuzzProcs = 8

// FuzzSubmitValidation decodes arbitrary bytes as a SubmitJobRequest and
// submits it over real gRPC (loopback) to one running node per fuzzing
// process (simulated executor, real clock, in-memory store). Whatever the
// bytes:
//
//   - nothing panics, the call returns within 10 s, and the node is still
//     running afterwards (Unavailable is only for a site starting or
//     stopping);
//   - an error is a gRPC status with code InvalidArgument, AlreadyExists
//     (an idempotency key seen before with another body),
//     ResourceExhausted or Unavailable;
//   - an accepted submission answers PENDING or REJECTED, and the job as
//     stored (GetJob) keeps the invariants of a job: 1 <= procs <= the
//     site's processors, estimate >= 1, a non-empty user; a reservation, if
//     any, is on exactly procs processors, starts no earlier than the
//     submission and the release, is not longer than the estimate, and ends
//     by the deadline.
//
// Run it with:
//
//	go test -run XXX -fuzz FuzzSubmitValidation -fuzztime 60s ./node/
func FuzzSubmitValidation(f *testing.F) {
	now := time.Now()
	seeds := []*fedschedv1.SubmitJobRequest{
		{IdempotencyKey: "k1", Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 60, User: "alice"}},
		{Spec: &fedschedv1.JobSpec{Procs: fuzzProcs, EstimateSeconds: 3600, User: "bob", App: "a", Command: []string{"sleep", "1"},
			Env: map[string]string{"A": "b"}, Workdir: "/tmp", SimRuntimeSeconds: 30}},
		{Spec: &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600, User: "carol", Release: timestamppb.New(now.Add(time.Hour)),
			Deadline: timestamppb.New(now.Add(3 * time.Hour)), Fee: 10, Penalty: 5}},
		{Spec: &fedschedv1.JobSpec{Procs: 4, EstimateSeconds: 600, User: "dave", Deadline: timestamppb.New(now.Add(time.Minute))}},
		{Spec: &fedschedv1.JobSpec{Procs: fuzzProcs + 1, EstimateSeconds: 1, User: "x"}},
		{Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: -1, User: "x", Release: &timestamppb.Timestamp{Seconds: -1 << 62}}},
		{IdempotencyKey: "k1", Spec: &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 60, User: "alice"}},
		{Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 60, User: "a\x00b"}},
		{},
	}
	for _, r := range seeds {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x12, 0x03, 0xf8, 0x07, 0x01}) // a spec with an unknown field 127

	site := startFuzzSite(f)
	c := site.client
	f.Fuzz(func(t *testing.T, data []byte) {
		// The bytes as a whole request, and merged over a valid one with
		// unknown fields dropped: random bytes rarely make a valid job by
		// themselves; merged, they change only the fields they carry.
		req := &fedschedv1.SubmitJobRequest{}
		if err := proto.Unmarshal(data, req); err == nil {
			submitChecked(t, c, req)
			site.checkRunning(t, req)
		}
		merged := &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600, User: "fuzz"}}
		if err := (proto.UnmarshalOptions{Merge: true, DiscardUnknown: true}).Unmarshal(data, merged); err == nil {
			submitChecked(t, c, merged)
			site.checkRunning(t, merged)
		}
	})
}

// submitChecked submits req and checks the answer and the stored job.
func submitChecked(t *testing.T, c fedschedv1.SiteServiceClient, req *fedschedv1.SubmitJobRequest) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.SubmitJob(ctx, req)
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			t.Fatalf("error without a gRPC status: %v", err)
		}
		switch st.Code() {
		case codes.InvalidArgument, codes.AlreadyExists, codes.ResourceExhausted, codes.Unavailable:
		default:
			t.Fatalf("code %v (%q) for request %v", st.Code(), st.Message(), req)
		}
		t.Logf("%v: %s", st.Code(), st.Message())
		if st.Message() == "" {
			t.Fatalf("code %v without a message", st.Code())
		}
		return
	}
	j := r.GetJob()
	t.Logf("%s %v %v replayed=%v", j.GetId(), j.GetState(), j.GetReason(), r.GetReplayed())
	if s := j.GetState(); !r.GetReplayed() && s != fedschedv1.JobState_JOB_STATE_PENDING && s != fedschedv1.JobState_JOB_STATE_REJECTED {
		t.Fatalf("submission answered %v: %v", s, j)
	}
	if j.GetId() == "" || j.GetReason() == fedschedv1.Reason_REASON_UNSPECIFIED && j.GetState() == fedschedv1.JobState_JOB_STATE_REJECTED {
		t.Fatalf("answer without id or reject reason: %v", j)
	}
	g, err := c.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatalf("acknowledged job %s not stored: %v", j.GetId(), err)
	}
	checkJobInvariants(t, g.GetJob())
}

// checkJobInvariants checks a stored job against the rules of a job spec and
// of its reservation.
func checkJobInvariants(t *testing.T, j *fedschedv1.Job) {
	t.Helper()
	sp := j.GetSpec()
	switch {
	case sp == nil:
		t.Fatalf("stored job %s has no spec", j.GetId())
	case sp.GetProcs() < 1 || sp.GetProcs() > fuzzProcs:
		t.Fatalf("stored job %s has procs %d, outside [1, %d]", j.GetId(), sp.GetProcs(), fuzzProcs)
	case sp.GetEstimateSeconds() < 1:
		t.Fatalf("stored job %s has estimate %d", j.GetId(), sp.GetEstimateSeconds())
	case sp.GetUser() == "":
		t.Fatalf("stored job %s has no user", j.GetId())
	case sp.GetDeadline() == nil && (sp.GetFee() != 0 || sp.GetPenalty() != 0):
		t.Fatalf("stored best-effort job %s has a fee or penalty", j.GetId())
	}
	res := j.GetReservation()
	if res == nil {
		return
	}
	start, end := res.GetStart().AsTime().Unix(), res.GetEnd().AsTime().Unix()
	earliest := j.GetSubmitTime().AsTime().Unix()
	if r := sp.GetRelease(); r != nil {
		earliest = max(earliest, r.AsTime().Unix())
	}
	switch {
	case res.GetProcs() != sp.GetProcs():
		t.Fatalf("job %s reserves %d processors for a spec of %d", j.GetId(), res.GetProcs(), sp.GetProcs())
	case start < earliest:
		t.Fatalf("job %s reserved from %d, before its submission or release %d", j.GetId(), start, earliest)
	case end <= start || end-start > sp.GetEstimateSeconds():
		t.Fatalf("job %s reserved [%d, %d) for an estimate of %d s", j.GetId(), start, end, sp.GetEstimateSeconds())
	case !j.GetOverbooked() && end-start != sp.GetEstimateSeconds():
		t.Fatalf("job %s is not overbooked but reserved %d s of its %d", j.GetId(), end-start, sp.GetEstimateSeconds())
	case sp.GetDeadline() != nil && end > sp.GetDeadline().AsTime().Unix():
		t.Fatalf("job %s reserved until %d, after its deadline %d", j.GetId(), end, sp.GetDeadline().AsTime().Unix())
	}
}

// fuzzSite is a node serving the fuzz target.
type fuzzSite struct {
	client fedschedv1.SiteServiceClient
	// stopped is closed when the node's event loop returns; runErr is its
	// error.
	stopped chan struct{}
	runErr  error
}

// checkRunning fails the test if the node's event loop has stopped: a
// request must never bring a site down.
func (s *fuzzSite) checkRunning(t *testing.T, req *fedschedv1.SubmitJobRequest) {
	t.Helper()
	select {
	case <-s.stopped:
		t.Fatalf("the node stopped (%v) after request %v", s.runErr, req)
	default:
	}
}

// startFuzzSite starts a node with fuzzProcs processors on an in-memory
// store, serving gRPC on loopback; the node stops when the fuzz target
// ends.
func startFuzzSite(f *testing.F) *fuzzSite {
	f.Helper()
	cfg := testConfig(f.TempDir())
	cfg.Procs, cfg.TimeScale = fuzzProcs, 1
	clk := clock.Real()
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(cfg, node.Deps{Store: store.NewMemStore(), Executor: ex, Clock: clk, Logger: log, Version: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	site := &fuzzSite{stopped: make(chan struct{})}
	go func() { done <- ex.Run(ctx) }()
	go func() {
		err := n.Run(ctx)
		site.runErr = err
		close(site.stopped)
		done <- err
	}()
	go func() { done <- n.Serve(ctx, lis, time.Second) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				f.Errorf("stop: %v", err)
			}
		}
		conn.Close()
	})
	hc := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			f.Fatal("node never became SERVING")
		}
	}
	site.client = fedschedv1.NewSiteServiceClient(conn)
	return site
}
