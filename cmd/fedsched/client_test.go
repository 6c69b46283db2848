package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// fakeSite is a SiteService good enough to drive the client: it records
// what it is asked and answers from canned jobs.
type fakeSite struct {
	fedschedv1.UnimplementedSiteServiceServer

	now      time.Time // the site's clock (GetSite.now)
	pageSize int       // ListJobs page size when the request has none
	events   []*fedschedv1.JobEvent
	hold     bool // WatchJobs: after the events, wait for the client to go

	mu       sync.Mutex
	nextPull time.Time // GetSite.next_pull (zero: unset)
	pulling  bool
	calls    int
	submits  []*fedschedv1.SubmitJobRequest
	lists    []*fedschedv1.ListJobsRequest
	watches  []*fedschedv1.WatchJobsRequest
	byKey    map[string]*fedschedv1.Job
	jobs     []*fedschedv1.Job // in id order
	nextID   int
}

var t0 = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func newFakeSite() *fakeSite {
	f := &fakeSite{now: t0, pageSize: 2, byKey: map[string]*fedschedv1.Job{}}
	states := []fedschedv1.JobState{
		fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING,
		fedschedv1.JobState_JOB_STATE_COMPLETED, fedschedv1.JobState_JOB_STATE_REJECTED,
		fedschedv1.JobState_JOB_STATE_DELEGATED,
	}
	for i, st := range states {
		user := "alice"
		if i%2 == 1 {
			user = "bob"
		}
		f.jobs = append(f.jobs, &fedschedv1.Job{
			Id: fmt.Sprintf("site-a.%012d", i+1), State: st, Site: "site-a", OriginSite: "site-a",
			Reason:     fedschedv1.Reason_REASON_PLACED_IN_FULL,
			Spec:       &fedschedv1.JobSpec{Procs: int32(i + 1), EstimateSeconds: 3600, User: user},
			SubmitTime: ts(t0.Add(time.Duration(i) * time.Minute)),
		})
	}
	f.nextID = len(f.jobs) + 1
	return f
}

func (f *fakeSite) count() {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
}

func (f *fakeSite) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeSite) find(id string) *fedschedv1.Job {
	for _, j := range f.jobs {
		if j.GetId() == id {
			return j
		}
	}
	return nil
}

func (f *fakeSite) SubmitJob(_ context.Context, req *fedschedv1.SubmitJobRequest) (*fedschedv1.SubmitJobResponse, error) {
	f.count()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submits = append(f.submits, req)
	if j, ok := f.byKey[req.GetIdempotencyKey()]; ok && req.GetIdempotencyKey() != "" {
		return &fedschedv1.SubmitJobResponse{Job: j, Replayed: true}, nil
	}
	sp := req.GetSpec()
	j := &fedschedv1.Job{
		Id: fmt.Sprintf("site-a.%012d", f.nextID), Spec: sp, Site: "site-a", OriginSite: "site-a",
		SubmitTime: ts(f.now), State: fedschedv1.JobState_JOB_STATE_PENDING, Reason: fedschedv1.Reason_REASON_PLACED_IN_FULL,
		Reservation: &fedschedv1.Reservation{Start: ts(f.now), End: ts(f.now.Add(time.Duration(sp.GetEstimateSeconds()) * time.Second)),
			Procs: sp.GetProcs(), Site: "site-a"},
	}
	f.nextID++
	switch sp.GetApp() {
	case "reject":
		j.State, j.Reason, j.Message, j.Reservation = fedschedv1.JobState_JOB_STATE_REJECTED,
			fedschedv1.Reason_REASON_REJECTED_NO_GAP, "no gap of 4 procs before the deadline", nil
	case "overbook":
		j.Reason, j.Overbooked, j.Pof = fedschedv1.Reason_REASON_OVERBOOKED, true, 0.08
		j.Reservation.End = ts(f.now.Add(time.Duration(sp.GetEstimateSeconds()) * time.Second / 2))
	}
	f.jobs = append(f.jobs, j)
	if req.GetIdempotencyKey() != "" {
		f.byKey[req.GetIdempotencyKey()] = j
	}
	return &fedschedv1.SubmitJobResponse{Job: j}, nil
}

func (f *fakeSite) GetJob(ctx context.Context, req *fedschedv1.GetJobRequest) (*fedschedv1.GetJobResponse, error) {
	f.count()
	if req.GetJobId() == "slow" {
		<-ctx.Done()
		return nil, node.ToStatus(ctx.Err())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if j := f.find(req.GetJobId()); j != nil {
		return &fedschedv1.GetJobResponse{Job: j}, nil
	}
	return nil, node.ToStatus(fmt.Errorf("job %q: %w", req.GetJobId(), node.ErrJobNotFound))
}

func (f *fakeSite) ListJobs(_ context.Context, req *fedschedv1.ListJobsRequest) (*fedschedv1.ListJobsResponse, error) {
	f.count()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, proto.Clone(req).(*fedschedv1.ListJobsRequest))
	var sel []*fedschedv1.Job
	for _, j := range f.jobs {
		okState := len(req.GetStates()) == 0
		for _, s := range req.GetStates() {
			okState = okState || s == j.GetState()
		}
		if okState && (req.GetUser() == "" || req.GetUser() == j.GetSpec().GetUser()) {
			sel = append(sel, j)
		}
	}
	start := 0
	if tok := req.GetPageToken(); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(sel) {
			return nil, status.Error(codes.InvalidArgument, "bad page token")
		}
		start = n
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = f.pageSize
	}
	end := min(start+size, len(sel))
	resp := &fedschedv1.ListJobsResponse{Jobs: sel[start:end]}
	if end < len(sel) {
		resp.NextPageToken = strconv.Itoa(end)
	}
	return resp, nil
}

func (f *fakeSite) CancelJob(_ context.Context, req *fedschedv1.CancelJobRequest) (*fedschedv1.CancelJobResponse, error) {
	f.count()
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.find(req.GetJobId())
	switch {
	case j == nil:
		return nil, node.ToStatus(fmt.Errorf("job %q: %w", req.GetJobId(), node.ErrJobNotFound))
	case j.GetState() == fedschedv1.JobState_JOB_STATE_COMPLETED:
		return nil, node.ToStatus(fmt.Errorf("cancel %s: it is COMPLETED: %w", j.GetId(), node.ErrJobFinished))
	}
	j = proto.Clone(j).(*fedschedv1.Job)
	j.State, j.Reason, j.Message = fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, req.GetMessage()
	return &fedschedv1.CancelJobResponse{Job: j}, nil
}

func (f *fakeSite) WatchJobs(req *fedschedv1.WatchJobsRequest, stream grpc.ServerStreamingServer[fedschedv1.JobEvent]) error {
	f.count()
	f.mu.Lock()
	f.watches = append(f.watches, req)
	f.mu.Unlock()
	for _, ev := range f.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	if f.hold {
		<-stream.Context().Done()
		return node.ToStatus(stream.Context().Err())
	}
	return nil
}

func (f *fakeSite) Explain(_ context.Context, req *fedschedv1.ExplainRequest) (*fedschedv1.ExplainResponse, error) {
	f.count()
	if req.GetJobId() != "site-a.000000000042" {
		return nil, node.ToStatus(fmt.Errorf("job %q: %w", req.GetJobId(), node.ErrJobNotFound))
	}
	res := &fedschedv1.Reservation{Start: ts(t0.Add(time.Hour)), End: ts(t0.Add(2 * time.Hour)), Procs: 8, Site: "site-b"}
	j := &fedschedv1.Job{
		Id: req.GetJobId(), State: fedschedv1.JobState_JOB_STATE_DELEGATED, Reason: fedschedv1.Reason_REASON_DELEGATED,
		Message: "site-b offered the earliest end", Site: "site-b", OriginSite: "site-a",
		Spec:        &fedschedv1.JobSpec{Procs: 8, EstimateSeconds: 7200, User: "alice", Deadline: ts(t0.Add(3 * time.Hour))},
		Reservation: res, Pof: 0.05, Overbooked: true, SlaOutcome: fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN,
		Route: []*fedschedv1.RouteHop{
			{Site: "site-a", PeerSite: "site-b", Reason: fedschedv1.Reason_REASON_DELEGATED, Message: "taken from the queue (RQF) by site-b", Time: ts(t0), Taken: true},
			{Site: "site-b", PeerSite: "site-a", Reason: fedschedv1.Reason_REASON_RECEIVED_FROM_PEER, Time: ts(t0.Add(time.Second))},
		},
		History: []*fedschedv1.Transition{
			{To: fedschedv1.JobState_JOB_STATE_DELEGATED, Reason: fedschedv1.Reason_REASON_DELEGATED, Time: ts(t0)},
		},
	}
	return &fedschedv1.ExplainResponse{
		Job: j, Summary: "Delegated to site-b: no gap here before the deadline.", Reservation: res, Pof: 0.05, PofMax: 0.1,
		Reasons: []fedschedv1.Reason{fedschedv1.Reason_REASON_DELEGATED, fedschedv1.Reason_REASON_OVERBOOKED},
	}, nil
}

func (f *fakeSite) GetSite(context.Context, *fedschedv1.GetSiteRequest) (*fedschedv1.GetSiteResponse, error) {
	f.count()
	f.mu.Lock()
	var nextPull *timestamppb.Timestamp
	if !f.nextPull.IsZero() {
		nextPull = ts(f.nextPull)
	}
	pulling := f.pulling
	f.mu.Unlock()
	return &fedschedv1.GetSiteResponse{Site: &fedschedv1.Site{
		Name: "site-a", Procs: 64, Policy: "conservative", FreeProcs: 12, RunningJobs: 3, PendingJobs: 7,
		Version: "test", Executor: "simulated", TimeScale: 60, Overbooking: true, PofMax: 0.1, Now: ts(f.now),
		NextPull: nextPull, Pulling: pulling,
	}}, nil
}

// serve starts srv on a loopback port and returns its address.
func serve(t *testing.T, srv fedschedv1.SiteServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	fedschedv1.RegisterSiteServiceServer(g, srv)
	go g.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// runCLI runs the fedsched command line in-process.
func runCLI(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, _, err := runCLI(ctx, args...)
	return out, err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("fedsched %s: %s", strings.Join(args, " "), errorLine(err))
	}
	return out
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestSubmitPrintsDecisionAndSendsFreshKeys(t *testing.T) {
	t.Setenv("USER", "carol")
	f := newFakeSite()
	addr := serve(t, f)
	args := []string{"submit", "--addr", addr, "--procs", "4", "--estimate", "1h30m", "--app", "sim", "--env", "A=1",
		"--env", "B=x=y", "--sim-runtime", "2d", "--workdir", "/tmp/w", "--", "./run.sh", "--steps", "3"}
	out1 := mustRun(t, args...)
	out2 := mustRun(t, args...)
	for _, want := range []string{"site-a.000000000006", "PENDING", "placed_in_full", "reservation"} {
		if !strings.Contains(out1, want) {
			t.Errorf("submit output lacks %q:\n%s", want, out1)
		}
	}
	if !strings.Contains(out2, "site-a.000000000007") {
		t.Errorf("second submit output lacks the second id:\n%s", out2)
	}
	mustRun(t, append([]string{"submit", "--idempotency-key", "my-key"}, args[1:]...)...)

	if len(f.submits) != 3 {
		t.Fatalf("%d submissions, want 3", len(f.submits))
	}
	k1, k2 := f.submits[0].GetIdempotencyKey(), f.submits[1].GetIdempotencyKey()
	if !hexKey.MatchString(k1) || !hexKey.MatchString(k2) || k1 == k2 {
		t.Errorf("keys %q and %q: want two different 128-bit hex keys", k1, k2)
	}
	if k := f.submits[2].GetIdempotencyKey(); k != "my-key" {
		t.Errorf("--idempotency-key sent %q", k)
	}
	// No user: the node takes the caller's authenticated identity (over
	// plaintext, the claimed OS user, carol, sent as metadata).
	want := &fedschedv1.JobSpec{Procs: 4, EstimateSeconds: 5400, App: "sim",
		Command: []string{"./run.sh", "--steps", "3"}, Env: map[string]string{"A": "1", "B": "x=y"},
		Workdir: "/tmp/w", SimRuntimeSeconds: 2 * 86400}
	if got := f.submits[0].GetSpec(); !proto.Equal(got, want) {
		t.Errorf("spec sent:\n%v\nwant\n%v", got, want)
	}
}

func TestSubmitJSON(t *testing.T) {
	f := newFakeSite()
	addr := serve(t, f)
	out := mustRun(t, "submit", "--addr", addr, "--procs", "2", "--estimate", "2h", "--user", "u", "--app", "overbook",
		"--idempotency-key", "k1", "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("submit --json: %v\n%s", err, out)
	}
	for _, key := range []string{"id", "state", "reason", "site", "message", "reservation", "pof", "overbooked", "replayed",
		"user", "procs", "estimate_s", "route"} {
		if _, ok := got[key]; !ok {
			t.Errorf("submit --json lacks %q: %s", key, out)
		}
	}
	if got["id"] != "site-a.000000000006" || got["state"] != "PENDING" || got["reason"] != "overbooked" ||
		got["overbooked"] != true || got["pof"] != 0.08 || got["replayed"] != false || got["estimate_s"] != 7200.0 {
		t.Errorf("submit --json values: %s", out)
	}
	res, _ := got["reservation"].(map[string]any)
	if res["start"] != "2030-01-02T03:00:00Z" || res["end"] != "2030-01-02T04:00:00Z" {
		t.Errorf("reservation %v", res)
	}
	// The same key again is a replay.
	out = mustRun(t, "submit", "--addr", addr, "--procs", "2", "--estimate", "2h", "--user", "u", "--idempotency-key", "k1", "--json")
	if err := json.Unmarshal([]byte(out), &got); err != nil || got["replayed"] != true || got["id"] != "site-a.000000000006" {
		t.Errorf("replay: %v %s", err, out)
	}
}

func TestSubmitRejectedIsAnAnswer(t *testing.T) {
	addr := serve(t, newFakeSite())
	out, err := run(t, "submit", "--addr", addr, "--procs", "4", "--estimate", "1h", "--user", "u", "--app", "reject")
	if err != nil {
		t.Fatalf("a rejection is a successful call, got %s", errorLine(err))
	}
	if !strings.Contains(out, "REJECTED") || !strings.Contains(out, "rejected_no_gap: no gap of 4 procs") {
		t.Errorf("output:\n%s", out)
	}
}

func TestSubmitTimes(t *testing.T) {
	f := newFakeSite()
	addr := serve(t, f)
	// Relative times count from the site's clock (2030), not the local one.
	mustRun(t, "submit", "--addr", addr, "--procs", "1", "--estimate", "1h", "--user", "u",
		"--release", "+30m", "--deadline", "+1d", "--fee", "3", "--penalty", "1.5")
	sp := f.submits[0].GetSpec()
	if got := sp.GetRelease().AsTime(); !got.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("release %v", got)
	}
	if got := sp.GetDeadline().AsTime(); !got.Equal(t0.Add(24 * time.Hour)) {
		t.Errorf("deadline %v", got)
	}
	if sp.GetFee() != 3 || sp.GetPenalty() != 1.5 {
		t.Errorf("fee %v penalty %v", sp.GetFee(), sp.GetPenalty())
	}
	// Absolute times are sent as given; no release means "now" at the site.
	mustRun(t, "submit", "--addr", addr, "--procs", "1", "--estimate", "1h", "--user", "u", "--deadline", "2099-01-01T00:00:00+01:00")
	sp = f.submits[1].GetSpec()
	if sp.GetRelease() != nil || !sp.GetDeadline().AsTime().Equal(time.Date(2098, 12, 31, 23, 0, 0, 0, time.UTC)) {
		t.Errorf("release %v deadline %v", sp.GetRelease(), sp.GetDeadline())
	}
}

func TestClientSideErrorsAreInvalidArgument(t *testing.T) {
	f := newFakeSite()
	addr := serve(t, f)
	sub := []string{"submit", "--addr", addr, "--user", "u"}
	tests := map[string]struct {
		args []string
		want string // in the error line
	}{
		"procs 0":             {append(sub, "--procs", "0", "--estimate", "1h"), "--procs must be >= 1"},
		"procs missing":       {append(sub, "--estimate", "1h"), "--procs must be >= 1"},
		"procs not a number":  {append(sub, "--procs", "four", "--estimate", "1h"), `invalid argument "four" for "--procs"`},
		"procs too big":       {append(sub, "--procs", "99999999999", "--estimate", "1h"), "--procs"},
		"estimate missing":    {append(sub, "--procs", "1"), "--estimate must be > 0"},
		"estimate negative":   {append(sub, "--procs", "1", "--estimate", "-5m"), "--estimate must be > 0"},
		"estimate fraction":   {append(sub, "--procs", "1", "--estimate", "1500ms"), "whole number of seconds"},
		"estimate bad":        {append(sub, "--procs", "1", "--estimate", "2x"), `invalid duration "2x"`},
		"release bad":         {append(sub, "--procs", "1", "--estimate", "1h", "--release", "tomorrow"), `invalid time "tomorrow"`},
		"deadline too early":  {append(sub, "--procs", "1", "--estimate", "2h", "--release", "2030-01-01T10:00:00Z", "--deadline", "2030-01-01T11:00:00Z"), "deadline is before release + estimate"},
		"deadline rel early":  {append(sub, "--procs", "1", "--estimate", "2h", "--deadline", "+1h"), "deadline is before release + estimate"},
		"fee negative":        {append(sub, "--procs", "1", "--estimate", "1h", "--fee", "-1"), "--fee must be"},
		"penalty NaN":         {append(sub, "--procs", "1", "--estimate", "1h", "--penalty", "NaN"), "--penalty must be"},
		"env without =":       {append(sub, "--procs", "1", "--estimate", "1h", "--env", "PATH"), `--env "PATH"`},
		"env twice":           {append(sub, "--procs", "1", "--estimate", "1h", "--env", "A=1", "--env", "A=2"), "A given twice"},
		"key too long":        {append(sub, "--procs", "1", "--estimate", "1h", "--idempotency-key", strings.Repeat("k", 129)), "at most 128"},
		"unknown flag":        {append(sub, "--procs", "1", "--estimate", "1h", "--frobnicate"), "unknown flag: --frobnicate"},
		"bad timeout":         {[]string{"status", "--addr", addr, "--timeout", "-1s"}, "--timeout"},
		"bad addr":            {[]string{"status", "--addr", "nonsense"}, `--addr "nonsense"`},
		"jobs bad state":      {[]string{"jobs", "--addr", addr, "--state", "sleeping"}, `--state "sleeping": want one of PENDING, RUNNING`},
		"jobs bad limit":      {[]string{"jobs", "--addr", addr, "--limit", "-1"}, "--limit must be >= 0"},
		"jobs extra argument": {[]string{"jobs", "--addr", addr, "x"}, "fedsched jobs"},
		"cancel without id":   {[]string{"cancel", "--addr", addr}, "accepts 1 arg(s)"},
		"explain two ids":     {[]string{"explain", "--addr", addr, "a", "b"}, "accepts 1 arg(s)"},
		"status two ids":      {[]string{"status", "--addr", addr, "a", "b"}, "accepts at most 1 arg(s)"},
		"unknown command":     {[]string{"frobnicate"}, `unknown command "frobnicate"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			line := errorLine(err)
			if !strings.HasPrefix(line, "InvalidArgument: ") || !strings.Contains(line, tc.want) || strings.Contains(line, "\n") {
				t.Errorf("error line %q, want InvalidArgument: ...%s...", line, tc.want)
			}
		})
	}
	if n := f.callCount(); n != 0 {
		t.Errorf("the site got %d calls; client-side errors must not call", n)
	}
	// No command is fine: the simulated executor needs none.
	if out := mustRun(t, append(sub, "--procs", "1", "--estimate", "1h")...); !strings.Contains(out, "PENDING") {
		t.Errorf("submit without a command:\n%s", out)
	}
}

func TestServerErrorsKeepTheirCode(t *testing.T) {
	f := newFakeSite()
	addr := serve(t, f)
	closed := func() string { // a port nobody listens on
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := lis.Addr().String()
		lis.Close()
		return a
	}()
	tests := map[string]struct {
		args     []string
		prefix   string
		sentinel error
	}{
		"not found":       {[]string{"status", "--addr", addr, "site-a.999"}, `NotFound: job "site-a.999": job not found`, node.ErrJobNotFound},
		"explain unknown": {[]string{"explain", "--addr", addr, "nope"}, `NotFound: job "nope"`, node.ErrJobNotFound},
		"cancel finished": {[]string{"cancel", "--addr", addr, "site-a.000000000003"}, "FailedPrecondition: cancel site-a.000000000003: it is COMPLETED", node.ErrJobFinished},
		"unavailable":     {[]string{"status", "--addr", closed}, "Unavailable: " + closed + ": ", nil},
		"submit unavailable": {[]string{"submit", "--addr", closed, "--procs", "1", "--estimate", "1h", "--user", "u", "--idempotency-key", "kk"},
			"Unavailable: " + closed, nil},
		"timeout": {[]string{"status", "--addr", addr, "--timeout", "200ms", "slow"}, "DeadlineExceeded: " + addr + ": no answer within 200ms", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			line := errorLine(err)
			if !strings.HasPrefix(line, tc.prefix) || strings.Contains(line, "\n") || strings.Contains(line, "rpc error") {
				t.Errorf("error line %q, want prefix %q", line, tc.prefix)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.sentinel)
			}
			if name == "submit unavailable" && !strings.Contains(line, "retry safely with --idempotency-key kk") {
				t.Errorf("error line %q does not say how to retry", line)
			}
		})
	}
}

func TestErrorLine(t *testing.T) {
	simFlagErr := func() error {
		_, err := run(t, "sim", "--procs", "many")
		return err
	}()
	tests := map[string]struct {
		err  error
		want string
	}{
		"status":            {status.Error(codes.Unavailable, "site is starting"), "Unavailable: site is starting"},
		"wrapped status":    {fmt.Errorf("get x: %w", status.Error(codes.NotFound, "no such job")), "NotFound: get x: no such job"},
		"remote error":      {node.FromStatus(node.ToStatus(fmt.Errorf("job %q: %w", "j", node.ErrJobNotFound))), `NotFound: job "j": job not found`},
		"internal":          {node.ToStatus(errors.New("disk on fire")), "Internal: disk on fire"},
		"client-side":       {invalidArg("deadline is before release + estimate"), "InvalidArgument: deadline is before release + estimate"},
		"sim style":         {errors.New("InvalidArgument: --policy: unknown policy"), "InvalidArgument: --policy: unknown policy"},
		"sim style wrapped": {fmt.Errorf("NotFound: %w", errors.New("open x.swf: no such file")), "NotFound: open x.swf: no such file"},
		"not a code":        {errors.New("Oops: something"), "Unknown: Oops: something"},
		"flag parse":        {simFlagErr, `InvalidArgument: invalid argument "many" for "--procs" flag`},
		"cobra args":        {errors.New(`accepts 1 arg(s), received 2`), "InvalidArgument: accepts 1 arg(s), received 2"},
		"plain":             {errors.New("write out.json: disk full"), "Unknown: write out.json: disk full"},
		"interrupted":       {fmt.Errorf("replay: %w", context.Canceled), "Canceled: replay: context canceled"},
		"timed out":         {context.DeadlineExceeded, "DeadlineExceeded: context deadline exceeded"},
		"multi-line":        {errors.New("first\nsecond\tthird"), "Unknown: first second third"},
		"status multi-line": {status.Error(codes.Aborted, "a\nb"), "Aborted: a b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error to render")
			}
			if got := errorLine(tc.err); !strings.HasPrefix(got, tc.want) {
				t.Errorf("errorLine = %q, want prefix %q", got, tc.want)
			}
		})
	}
	if errorLine(nil) != "" {
		t.Error("errorLine(nil) != \"\"")
	}
}

func TestJobsFollowsEveryPage(t *testing.T) {
	f := newFakeSite()
	addr := serve(t, f)
	out := mustRun(t, "jobs", "--addr", addr, "--all")
	for _, j := range f.jobs {
		if !strings.Contains(out, j.GetId()) {
			t.Errorf("jobs output lacks %s:\n%s", j.GetId(), out)
		}
	}
	if !strings.Contains(out, "DELEGATED") || !strings.Contains(out, "1h") || !strings.HasPrefix(out, "ID") {
		t.Errorf("jobs table:\n%s", out)
	}
	if len(f.lists) != 3 {
		t.Fatalf("%d ListJobs calls for 5 jobs in pages of 2, want 3", len(f.lists))
	}
	for i, tok := range []string{"", "2", "4"} {
		if got := f.lists[i].GetPageToken(); got != tok {
			t.Errorf("page %d: token %q, want %q", i, got, tok)
		}
	}

	f.lists = nil
	out = mustRun(t, "jobs", "--addr", addr, "--json", "--all")
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("jobs --json: %v\n%s", err, out)
	}
	if len(got) != 5 || len(f.lists) != 3 {
		t.Fatalf("jobs --json: %d jobs in %d calls, want 5 in 3", len(got), len(f.lists))
	}
	for _, key := range []string{"id", "state", "site", "procs", "estimate_s", "user", "reason", "submit_time", "start_time", "end_time", "route"} {
		if _, ok := got[0][key]; !ok {
			t.Errorf("jobs --json lacks %q", key)
		}
	}
	// Active first (running, pending, delegated), then the ended newest
	// first.
	var order []string
	for _, j := range got {
		order = append(order, j["id"].(string)[len("site-a.00000000000"):]+" "+j["state"].(string))
	}
	if want := "2 RUNNING,1 PENDING,5 DELEGATED,4 REJECTED,3 COMPLETED"; strings.Join(order, ",") != want {
		t.Errorf("jobs --json --all order %v, want %s", order, want)
	}
	if got[1]["user"] != "alice" || got[1]["estimate_s"] != 3600.0 || got[1]["start_time"] != nil || got[1]["submit_time"] != "2030-01-02T03:00:00Z" {
		t.Errorf("jobs --json values: %v", got)
	}
	if route, ok := got[1]["route"].([]any); !ok || len(route) != 0 {
		t.Errorf("route %v: want an empty array", got[1]["route"])
	}

	// Empty listing: an empty array, not null.
	if out := mustRun(t, "jobs", "--addr", addr, "--json", "--user", "nobody"); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty jobs --json = %q", out)
	}
}

func TestJobsFiltersAndLimit(t *testing.T) {
	f := newFakeSite()
	addr := serve(t, f)
	out := mustRun(t, "jobs", "--addr", addr, "--state", "pending,JOB_STATE_RUNNING", "--state", "Rejected", "--user", "alice")
	req := f.lists[0]
	wantStates := []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING,
		fedschedv1.JobState_JOB_STATE_REJECTED}
	if fmt.Sprint(req.GetStates()) != fmt.Sprint(wantStates) || req.GetUser() != "alice" {
		t.Errorf("request %v", req)
	}
	// alice's jobs in those states: 1 (PENDING); 2 is bob's; 4 is bob's REJECTED.
	if !strings.Contains(out, "site-a.000000000001") || strings.Contains(out, "site-a.000000000002") {
		t.Errorf("filtered jobs:\n%s", out)
	}

	f.lists = nil
	out = mustRun(t, "jobs", "--addr", addr, "--limit", "3", "--json", "--all")
	var got []jobJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 3 {
		t.Fatalf("--limit 3: %v, %d jobs", err, len(got))
	}
	// The three most recent (3, 4, 5), not the three oldest.
	for _, j := range got {
		if j.ID < "site-a.000000000003" {
			t.Errorf("--limit 3 kept old job %s", j.ID)
		}
	}

	// Without --all or --state: the active jobs only.
	f.lists = nil
	mustRun(t, "jobs", "--addr", addr)
	if fmt.Sprint(f.lists[0].GetStates()) != fmt.Sprint(activeStates) {
		t.Errorf("default listing asks for states %v, want %v", f.lists[0].GetStates(), activeStates)
	}

	// Column choice.
	out = mustRun(t, "jobs", "--addr", addr, "--all", "--format", "id,user,reason")
	if first := strings.SplitN(out, "\n", 2)[0]; strings.Join(strings.Fields(first), " ") != "ID USER REASON" {
		t.Errorf("--format id,user,reason header %q", first)
	}
	if _, err := run(t, "jobs", "--addr", addr, "--format", "id,colour"); err == nil || !strings.Contains(errorLine(err), `unknown column "colour"`) {
		t.Errorf("--format with an unknown column: %v", err)
	}
}

// loopingSite returns the same page token forever.
type loopingSite struct {
	fedschedv1.UnimplementedSiteServiceServer
}

func (loopingSite) ListJobs(context.Context, *fedschedv1.ListJobsRequest) (*fedschedv1.ListJobsResponse, error) {
	return &fedschedv1.ListJobsResponse{NextPageToken: "again"}, nil
}

func TestJobsStopsOnARepeatedToken(t *testing.T) {
	addr := serve(t, loopingSite{})
	_, err := run(t, "jobs", "--addr", addr)
	if line := errorLine(err); !strings.HasPrefix(line, "Internal: ") || !strings.Contains(line, `"again" twice`) {
		t.Errorf("error line %q", line)
	}
}

func TestStatus(t *testing.T) {
	addr := serve(t, newFakeSite())
	out := mustRun(t, "status", "--addr", addr)
	for _, want := range []string{"site-a", "64 (12 free)", "conservative", "3 jobs", "7 jobs", "simulated", "60x", "pof_max 0.1", "test"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var site map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "status", "--addr", addr, "--json")), &site); err != nil {
		t.Fatal(err)
	}
	if site["name"] != "site-a" || site["free_procs"] != 12.0 || site["time_scale"] != 60.0 || site["now"] != "2030-01-02T03:00:00Z" {
		t.Errorf("status --json: %v", site)
	}
	if strings.Contains(out, "rqf") || site["next_pull"] != nil || site["pulling"] != false {
		t.Errorf("a site that does not pull shows RQF: %s %v", out, site)
	}
	out = mustRun(t, "status", "--addr", addr, "site-a.000000000002")
	if !strings.Contains(out, "RUNNING") || !strings.Contains(out, "bob") {
		t.Errorf("status JOB_ID:\n%s", out)
	}
}

// TestStatusShowsRQF: an idle RQF site says when it next asks its peers
// for work, and a site asking now says so.
func TestStatusShowsRQF(t *testing.T) {
	f := newFakeSite()
	f.nextPull = f.now.Add(42 * time.Second)
	addr := serve(t, f)
	if out := mustRun(t, "status", "--addr", addr); !strings.Contains(out, "asks peers for work at "+tsHuman(ts(f.nextPull))) {
		t.Errorf("status of an idle RQF site:\n%s", out)
	}
	var site map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "status", "--addr", addr, "--json")), &site); err != nil {
		t.Fatal(err)
	}
	if site["next_pull"] != "2030-01-02T03:00:42Z" || site["pulling"] != false {
		t.Errorf("status --json of an idle RQF site: %v", site)
	}
	f.mu.Lock()
	f.pulling, f.nextPull = true, time.Time{}
	f.mu.Unlock()
	if out := mustRun(t, "status", "--addr", addr); !strings.Contains(out, "asking peers for work now") {
		t.Errorf("status of a site asking now:\n%s", out)
	}
}

func TestAddrFromEnvironment(t *testing.T) {
	addr := serve(t, newFakeSite())
	t.Setenv(addrEnv, addr)
	if out := mustRun(t, "status"); !strings.Contains(out, "site-a") {
		t.Errorf("status with $%s:\n%s", addrEnv, out)
	}
	// --addr wins over the environment.
	t.Setenv(addrEnv, "127.0.0.1:1")
	if out := mustRun(t, "status", "--addr", addr); !strings.Contains(out, "site-a") {
		t.Errorf("status --addr:\n%s", out)
	}
}

func TestCancel(t *testing.T) {
	addr := serve(t, newFakeSite())
	out := mustRun(t, "cancel", "--addr", addr, "site-a.000000000001", "--message", "wrong input")
	if !strings.Contains(out, "CANCELLED") || !strings.Contains(out, "cancelled_by_user: wrong input") {
		t.Errorf("cancel:\n%s", out)
	}
}

func watchEvents() []*fedschedv1.JobEvent {
	job := func(st fedschedv1.JobState, r fedschedv1.Reason) *fedschedv1.Job {
		return &fedschedv1.Job{Id: "site-a.000000000009", State: st, Reason: r, Site: "site-a"}
	}
	return []*fedschedv1.JobEvent{
		{Job: job(fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_PLACED_IN_FULL), Time: ts(t0), Sequence: 1},
		{Job: job(fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.Reason_REASON_STARTED), PreviousState: fedschedv1.JobState_JOB_STATE_PENDING,
			Time: ts(t0.Add(time.Minute)), Sequence: 2},
		{Job: job(fedschedv1.JobState_JOB_STATE_COMPLETED, fedschedv1.Reason_REASON_EXITED), PreviousState: fedschedv1.JobState_JOB_STATE_RUNNING,
			Time: ts(t0.Add(time.Hour)), Sequence: 3},
	}
}

func TestWatchPrintsEventsUntilTheStreamEnds(t *testing.T) {
	f := newFakeSite()
	f.events = watchEvents()
	addr := serve(t, f)
	out := mustRun(t, "watch", "--addr", addr, "site-a.000000000009", "--initial")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("watch printed %d lines, want 3:\n%s", len(lines), out)
	}
	for i, want := range []string{"- → PENDING", "PENDING → RUNNING", "RUNNING → COMPLETED"} {
		if !strings.Contains(lines[i], "site-a.000000000009") || !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q lacks %q", i, lines[i], want)
		}
	}
	if !strings.HasSuffix(lines[1], "started") || !strings.HasSuffix(lines[2], "exited") {
		t.Errorf("reasons missing:\n%s", out)
	}
	if w := f.watches[0]; w.GetJobId() != "site-a.000000000009" || !w.GetSendInitial() {
		t.Errorf("watch request %v", w)
	}

	out = mustRun(t, "watch", "--addr", addr, "--json")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("watch --json printed %d lines, want 3:\n%s", len(lines), out)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev["job_id"] != "site-a.000000000009" || ev["previous_state"] != "PENDING" || ev["state"] != "RUNNING" ||
		ev["reason"] != "started" || ev["sequence"] != 2.0 || ev["time"] != "2030-01-02T03:01:00Z" {
		t.Errorf("event %v", ev)
	}
	if w := f.watches[1]; w.GetJobId() != "" || w.GetSendInitial() {
		t.Errorf("watch request %v", w)
	}
}

func TestWatchStopsOnInterrupt(t *testing.T) {
	f := newFakeSite()
	f.events = watchEvents()[:1]
	f.hold = true
	addr := serve(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, _, err = runCLI(ctx, "watch", "--addr", addr)
		done <- err
	}()
	// Interrupt once the stream is open (the fake records it first).
	deadline := time.Now().Add(10 * time.Second)
	for f.callCount() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch after Ctrl-C: %s", errorLine(err))
		}
		if !strings.Contains(out, "- → PENDING") {
			t.Errorf("watch output:\n%s", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop on interrupt")
	}
}

func TestExplain(t *testing.T) {
	addr := serve(t, newFakeSite())
	out := mustRun(t, "explain", "--addr", addr, "site-a.000000000042", "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("explain --json: %v\n%s", err, out)
	}
	if got["site"] != "site-b" || got["origin_site"] != "site-a" || got["pof"] != 0.05 || got["pof_max"] != 0.1 {
		t.Errorf("explain --json: %s", out)
	}
	route, _ := got["route"].([]any)
	if len(route) != 2 {
		t.Fatalf("route %v", got["route"])
	}
	hop := route[0].(map[string]any)
	if hop["site"] != "site-a" || hop["peer_site"] != "site-b" || hop["reason"] != "delegated" ||
		hop["message"] != "taken from the queue (RQF) by site-b" || hop["time"] != "2030-01-02T03:00:00Z" || hop["taken"] != true {
		t.Errorf("hop %v", hop)
	}
	if fmt.Sprint(got["reasons"]) != "[delegated overbooked]" {
		t.Errorf("reasons %v", got["reasons"])
	}
	if job, _ := got["job"].(map[string]any); job["id"] != "site-a.000000000042" {
		t.Errorf("job %v", got["job"])
	}

	out = mustRun(t, "explain", "--addr", addr, "site-a.000000000042")
	for _, want := range []string{"Delegated to site-b", "delegated, overbooked", "pof_max 0.1: within", "route:", "received_from_peer",
		"history:", "- ", "DELEGATED", "on 8 procs at site-b"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

func TestEnumNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{stateName(fedschedv1.JobState_JOB_STATE_PENDING), "PENDING"},
		{stateName(fedschedv1.JobState_JOB_STATE_UNSPECIFIED), ""},
		{stateName(fedschedv1.JobState(99)), "99"},
		{reasonName(fedschedv1.Reason_REASON_OVERBOOKED), "overbooked"},
		{reasonName(fedschedv1.Reason_REASON_REJECTED_DEADLINE_UNREACHABLE), "rejected_deadline_unreachable"},
		{reasonName(fedschedv1.Reason_REASON_UNSPECIFIED), ""},
		{outcomeName(fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED), "violated"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	for _, in := range []string{"pending", "PENDING", "JOB_STATE_PENDING", " Pending "} {
		if st, err := parseState(in); err != nil || st != fedschedv1.JobState_JOB_STATE_PENDING {
			t.Errorf("parseState(%q) = %v, %v", in, st, err)
		}
	}
	for _, in := range []string{"", "unspecified", "JOB_STATE_", "pend"} {
		if _, err := parseState(in); status.Code(err) != codes.InvalidArgument {
			t.Errorf("parseState(%q): err %v", in, err)
		}
	}
}
