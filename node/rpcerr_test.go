package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func TestToStatusCodes(t *testing.T) {
	tests := map[string]struct {
		err  error
		code codes.Code
	}{
		"invalid job":             {fmt.Errorf("submit: procs 0: %w", ErrInvalidJob), codes.InvalidArgument},
		"invalid request":         {ErrInvalidRequest, codes.InvalidArgument},
		"bad page token":          {fmt.Errorf("list: %w", store.ErrInvalidPageToken), codes.InvalidArgument},
		"job not found":           {fmt.Errorf("get x: %w", ErrJobNotFound), codes.NotFound},
		"store not found":         {fmt.Errorf("get x: %w", store.ErrNotFound), codes.NotFound},
		"key reused":              {ErrIdempotencyConflict, codes.AlreadyExists},
		"key reused in the store": {fmt.Errorf("submit: %w", store.ErrIdempotencyConflict), codes.AlreadyExists},
		"cancel a finished job":   {ErrJobFinished, codes.FailedPrecondition},
		"overloaded":              {ErrOverloaded, codes.ResourceExhausted},
		"shutting down":           {ErrUnavailable, codes.Unavailable},
		"store closed":            {store.ErrClosed, codes.Unavailable},
		"log not replayed":        {fmt.Errorf("open store: %w", store.ErrLogNotReplayed), codes.FailedPrecondition},
		"deadline":                {context.DeadlineExceeded, codes.DeadlineExceeded},
		"cancelled":               {fmt.Errorf("wait: %w", context.Canceled), codes.Canceled},
		"anything else":           {errors.New("disk on fire"), codes.Internal},
		"a status passes through": {status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ToStatus(tc.err)
			if status.Code(got) != tc.code || CodeOf(tc.err) != tc.code {
				t.Fatalf("ToStatus(%v) = %v, want code %v", tc.err, got, tc.code)
			}
			if _, isStatus := status.FromError(tc.err); isStatus {
				return
			}
			if st, _ := status.FromError(got); st.Message() != tc.err.Error() {
				t.Errorf("message %q, want %q", st.Message(), tc.err.Error())
			}
		})
	}
	if ToStatus(nil) != nil {
		t.Error("ToStatus(nil) != nil")
	}
}

func TestEveryRowRoundTrips(t *testing.T) {
	for _, row := range errorTable {
		back := FromStatus(ToStatus(fmt.Errorf("context: %w", row.err)))
		// The first row with the same reason is the one FromStatus returns.
		var want error
		for _, r := range errorTable {
			if r.reason == row.reason {
				want = r.err
				break
			}
		}
		if !errors.Is(back, want) {
			t.Errorf("%v: round trip gave %v (reason %q), want errors.Is %v", row.err, back, back.(*RemoteError).Reason, want)
		}
		if status.Code(back) != row.code {
			t.Errorf("%v: code %v after round trip, want %v", row.err, status.Code(back), row.code)
		}
	}
	if FromStatus(nil) != nil {
		t.Error("FromStatus(nil) != nil")
	}
	plain := errors.New("not a status")
	if FromStatus(plain) != plain {
		t.Error("FromStatus changed a non-status error")
	}
	foreign := FromStatus(status.Error(codes.NotFound, "elsewhere"))
	if errors.Is(foreign, ErrJobNotFound) {
		t.Error("a status without ErrorInfo matched a sentinel")
	}
}

// fakeSite answers GetJob with an error or a job, to carry errors over real
// gRPC.
type fakeSite struct {
	fedschedv1.UnimplementedSiteServiceServer
}

func (fakeSite) GetJob(_ context.Context, req *fedschedv1.GetJobRequest) (*fedschedv1.GetJobResponse, error) {
	switch req.GetJobId() {
	case "":
		return nil, ToStatus(fmt.Errorf("get job: %w", ErrInvalidRequest))
	case "site-a.000000000001":
		return &fedschedv1.GetJobResponse{Job: &fedschedv1.Job{Id: req.GetJobId(), State: fedschedv1.JobState_JOB_STATE_PENDING}}, nil
	}
	return nil, ToStatus(fmt.Errorf("get job %s: %w", req.GetJobId(), ErrJobNotFound))
}

func (fakeSite) SubmitJob(context.Context, *fedschedv1.SubmitJobRequest) (*fedschedv1.SubmitJobResponse, error) {
	return nil, ToStatus(fmt.Errorf("submit: %w", store.ErrIdempotencyConflict))
}

func TestErrorsOverGRPC(t *testing.T) {
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	fedschedv1.RegisterSiteServiceServer(srv, fakeSite{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := fedschedv1.NewSiteServiceClient(conn)
	ctx := context.Background()

	resp, err := client.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: "site-a.000000000001"})
	if err != nil || resp.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
		t.Fatalf("GetJob = %v, %v", resp, err)
	}
	_, err = client.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: "nope"})
	if err = FromStatus(err); !errors.Is(err, ErrJobNotFound) || status.Code(err) != codes.NotFound {
		t.Fatalf("GetJob(unknown) = %v, want ErrJobNotFound/NotFound", err)
	}
	_, err = client.GetJob(ctx, &fedschedv1.GetJobRequest{})
	if err = FromStatus(err); !errors.Is(err, ErrInvalidRequest) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GetJob(no id) = %v", err)
	}
	_, err = client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "k"})
	if err = FromStatus(err); !errors.Is(err, ErrIdempotencyConflict) || status.Code(err) != codes.AlreadyExists {
		t.Fatalf("SubmitJob = %v", err)
	}
	_, err = client.Explain(ctx, &fedschedv1.ExplainRequest{JobId: "x"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Explain = %v, want Unimplemented", err)
	}
}

func TestSpecHash(t *testing.T) {
	spec := func() *fedschedv1.JobSpec {
		return &fedschedv1.JobSpec{
			Procs: 4, EstimateSeconds: 60, User: "alice", Command: []string{"sleep", "1"},
			Env:      map[string]string{"A": "1", "B": "2", "C": "3", "D": "4"},
			Deadline: timestamppb.New(timestamppb.Now().AsTime().Truncate(1e9)),
		}
	}
	a, b := spec(), spec()
	b.Deadline = a.Deadline
	ha, err := SpecHash(a)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // map order varies between runs of the encoder
		hb, _ := SpecHash(b)
		if string(ha) != string(hb) {
			t.Fatal("equal specs hash differently")
		}
	}
	b.Procs = 5
	if hb, _ := SpecHash(b); string(ha) == string(hb) {
		t.Fatal("different specs hash equal")
	}
	if h, err := SpecHash(nil); err != nil || len(h) != 32 {
		t.Fatalf("SpecHash(nil) = %x, %v", h, err)
	}
}

func TestReservationConflictStatus(t *testing.T) {
	c := &ReservationConflictError{Jobs: []string{"s.000000000001", "s.000000000002"}, Running: []string{"s.000000000002"}, Displace: true}
	err := ToStatus(fmt.Errorf("create: %w", c))
	st, _ := status.FromError(err)
	if st.Code() != codes.FailedPrecondition || !errors.Is(FromStatus(err), ErrReservationConflict) {
		t.Fatalf("status %v", st)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info.GetReason() != "RESERVATION_CONFLICT" || info.GetMetadata()["job_ids"] != "s.000000000001,s.000000000002" ||
		info.GetMetadata()["running_job_ids"] != "s.000000000002" {
		t.Fatalf("ErrorInfo %v", info)
	}
	for _, e := range []error{err, FromStatus(err), c} {
		d, ok := ReservationConflictOf(e)
		if !ok || len(d.GetJobIds()) != 2 || d.GetRunningJobIds()[0] != "s.000000000002" || !d.GetDisplace() {
			t.Fatalf("ReservationConflictOf(%v) = %v, %v", e, d, ok)
		}
	}
	if _, ok := ReservationConflictOf(ToStatus(ErrJobFinished)); ok {
		t.Fatal("a conflict detail on another error")
	}
	if !strings.Contains(c.Error(), "running jobs are never displaced: s.000000000002") {
		t.Fatalf("message %q", c.Error())
	}
}
