package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// monday is the start of the reservation tests' clock: Monday 7 January
// 2030, 00:00 UTC.
var monday = time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)

// startManual starts a site like startSite, on a clock that moves only when
// the test advances it, with the given standing horizon (0: the default).
func startManual(t *testing.T, cfg config.Config, st store.Store, clk *clock.Manual, horizon time.Duration) *testSite {
	t.Helper()
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(cfg, node.Deps{Store: st, Executor: ex, Clock: clk, Logger: log, Version: "test", StandingHorizon: horizon})
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

// at is a timestamp d after the reservation tests' origin.
func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(monday.Add(d)) }

func window(start, end time.Duration) *fedschedv1.TimeWindow {
	return &fedschedv1.TimeWindow{Start: at(start), End: at(end)}
}

func sameWindows(got []*fedschedv1.TimeWindow, want ...*fedschedv1.TimeWindow) bool {
	return slices.EqualFunc(got, want, func(a, b *fedschedv1.TimeWindow) bool {
		return a.GetStart().AsTime().Equal(b.GetStart().AsTime()) && a.GetEnd().AsTime().Equal(b.GetEnd().AsTime())
	})
}

func submitAt(t *testing.T, c fedschedv1.SiteServiceClient, procs int32, est time.Duration, release time.Duration, deadline time.Duration) *fedschedv1.Job {
	t.Helper()
	sp := spec(procs, int64(est/time.Second))
	if release != 0 {
		sp.Release = at(release)
	}
	if deadline != 0 {
		sp.Deadline, sp.Fee, sp.Penalty = at(deadline), 10, 5
	}
	r, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: sp})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetJob()
}

// storedJob is a job as its record in st has it.
func storedJob(t *testing.T, st store.Store, id string) *fedschedv1.Job {
	t.Helper()
	rec, err := st.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Job
}

// onlyFixedStored fails unless every reservation record in st is an
// operator's fixed one: a job's reservation is stored in its record only.
func onlyFixedStored(t *testing.T, st store.Store) {
	t.Helper()
	recs, err := st.ListReservations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if !r.Fixed {
			t.Errorf("reservation record of a job stored: %+v", r)
		}
	}
}

func getJob(t *testing.T, c fedschedv1.SiteServiceClient, id string) *fedschedv1.Job {
	t.Helper()
	r, err := c.GetJob(context.Background(), &fedschedv1.GetJobRequest{JobId: id})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetJob()
}

func listRes(t *testing.T, c fedschedv1.SiteServiceClient) []*fedschedv1.FixedReservation {
	t.Helper()
	r, err := c.ListReservations(context.Background(), &fedschedv1.ListReservationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetReservations()
}

func resSlot(r *fedschedv1.Reservation) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("[%s, %s) x%d", r.GetStart().AsTime().Sub(monday), r.GetEnd().AsTime().Sub(monday), r.GetProcs())
}

func TestReservationCreateListDelete(t *testing.T) {
	clk := clock.NewManual(monday)
	st := store.NewMemStore()
	s := startManual(t, testConfig(t.TempDir()), st, clk, 0)
	defer s.stop(t)
	ctx := context.Background()

	fixed, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "maintenance", Procs: 8, Start: at(2 * time.Hour), End: at(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	f := fixed.GetReservation()
	if f.GetId() != "t.r000000000001" || f.GetName() != "maintenance" || f.GetProcs() != 8 || f.GetSite() != "t" || f.GetEverySeconds() != 0 ||
		!sameWindows(f.GetInstances(), window(2*time.Hour, 4*time.Hour)) || len(fixed.GetDisplaced()) != 0 {
		t.Fatalf("fixed reservation: %v", fixed)
	}
	// Durable: a fixed ReservationRecord named by its note.
	rec, err := st.GetReservation(ctx, f.GetId())
	if err != nil || !rec.Fixed || rec.Note != "maintenance" || rec.Procs != 8 || !rec.Start.Equal(monday.Add(2*time.Hour)) || !rec.End.Equal(monday.Add(4*time.Hour)) {
		t.Fatalf("stored fixed reservation: %+v, %v", rec, err)
	}

	// Every day at 20:00 for 2 hours on 4 processors, Monday and Friday
	// only (UTC), until Friday next week: instances on the 7th, 11th and
	// 14th (the 18th is at 20:00, after until).
	standing, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "course", Procs: 4,
		Start: at(20 * time.Hour), End: at(22 * time.Hour), EverySeconds: 86400, Until: at(11*24*time.Hour + 12*time.Hour),
		Weekdays: []fedschedv1.Weekday{fedschedv1.Weekday_WEEKDAY_MONDAY, fedschedv1.Weekday_WEEKDAY_FRIDAY}})
	if err != nil {
		t.Fatal(err)
	}
	sr := standing.GetReservation()
	day := 24 * time.Hour
	wantInst := []*fedschedv1.TimeWindow{window(20*time.Hour, 22*time.Hour), window(4*day+20*time.Hour, 4*day+22*time.Hour),
		window(7*day+20*time.Hour, 7*day+22*time.Hour)}
	if sr.GetId() != "t.r000000000002" || sr.GetEverySeconds() != 86400 || !sr.GetUntil().AsTime().Equal(monday.Add(11*day+12*time.Hour)) ||
		fmt.Sprint(sr.GetWeekdays()) != "[WEEKDAY_MONDAY WEEKDAY_FRIDAY]" || !sameWindows(sr.GetInstances(), wantInst...) {
		t.Fatalf("standing reservation: %v", sr)
	}
	rule, err := st.GetStanding(ctx, sr.GetId())
	if err != nil || rule.Name != "course" || rule.EverySeconds != 86400 || fmt.Sprint(rule.Weekdays) != "[Monday Friday]" ||
		!rule.Until.Equal(monday.Add(11*day+12*time.Hour)) {
		t.Fatalf("stored rule: %+v, %v", rule, err)
	}

	list := listRes(t, s.client)
	if len(list) != 2 || list[0].GetId() != f.GetId() || list[1].GetId() != sr.GetId() || !sameWindows(list[1].GetInstances(), wantInst...) {
		t.Fatalf("list: %v", list)
	}
	if r, _ := s.client.ListReservations(ctx, &fedschedv1.ListReservationsRequest{}); r.GetHorizonSeconds() != 7*86400 {
		t.Fatalf("horizon %d", r.GetHorizonSeconds())
	}

	// Delete both; the second delete of one is NOT_FOUND.
	for _, id := range []string{f.GetId(), sr.GetId()} {
		d, err := s.client.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: id})
		if err != nil || d.GetReservation().GetId() != id {
			t.Fatalf("delete %s: %v, %v", id, d, err)
		}
	}
	_, err = s.client.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: f.GetId()})
	if status.Code(err) != codes.NotFound || !errors.Is(node.FromStatus(err), node.ErrReservationNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.client.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("delete without id: %v", err)
	}
	if list := listRes(t, s.client); len(list) != 0 {
		t.Fatalf("list after delete: %v", list)
	}
	if _, err := st.GetReservation(ctx, f.GetId()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted fixed reservation still stored: %v", err)
	}
	if _, err := st.GetStanding(ctx, sr.GetId()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted rule still stored: %v", err)
	}
	// Its processors are free again: a full-width job fits at 20:00.
	j := submitAt(t, s.client, 8, 2*time.Hour, 20*time.Hour, 0)
	if got := resSlot(j.GetReservation()); got != "[20h0m0s, 22h0m0s) x8" {
		t.Fatalf("job after delete: %s", got)
	}
}

func TestReservationBlocksPlacement(t *testing.T) {
	clk := clock.NewManual(monday)
	s := startManual(t, testConfig(t.TempDir()), store.NewMemStore(), clk, 0)
	defer s.stop(t)
	ctx := context.Background()
	if _, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Procs: 6, Start: at(time.Hour), End: at(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// 4 processors for 2 hours from 30 minutes: 2 are left during the
	// reservation, so the job goes after it.
	a := submitAt(t, s.client, 4, 2*time.Hour, 30*time.Minute, 0)
	// 2 processors fit beside it.
	b := submitAt(t, s.client, 2, 2*time.Hour, 30*time.Minute, 0)
	// 4 processors for 30 minutes fit before it.
	c := submitAt(t, s.client, 4, 30*time.Minute, 30*time.Minute, 0)
	for _, tc := range []struct {
		j    *fedschedv1.Job
		want string
	}{{a, "[3h0m0s, 5h0m0s) x4"}, {b, "[30m0s, 2h30m0s) x2"}, {c, "[30m0s, 1h0m0s) x4"}} {
		if got := resSlot(tc.j.GetReservation()); got != tc.want {
			t.Errorf("job %s: %s, want %s", tc.j.GetId(), got, tc.want)
		}
	}
}

func TestReservationConflictChangesNothing(t *testing.T) {
	clk := clock.NewManual(monday)
	st := store.NewMemStore()
	s := startManual(t, testConfig(t.TempDir()), st, clk, 0)
	defer s.stop(t)
	ctx := context.Background()
	run := submitAt(t, s.client, 2, time.Hour, 0, 0)            // runs now on 2 processors
	a := submitAt(t, s.client, 4, time.Hour, time.Hour, 0)      // [1h, 2h)
	b := submitAt(t, s.client, 4, time.Hour, 90*time.Minute, 0) // [1h30m, 2h30m)
	c := submitAt(t, s.client, 2, time.Hour, 5*time.Hour, 0)    // [5h, 6h): not in the way
	waitState(t, s.client, run.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
	before := map[string]string{}
	for _, j := range []*fedschedv1.Job{a, b, c} {
		before[j.GetId()] = resSlot(getJob(t, s.client, j.GetId()).GetReservation())
	}

	req := &fedschedv1.CreateReservationRequest{Name: "full", Procs: 8, Start: at(90 * time.Minute), End: at(3 * time.Hour)}
	_, err := s.client.CreateReservation(ctx, req)
	if status.Code(err) != codes.FailedPrecondition || !errors.Is(node.FromStatus(err), node.ErrReservationConflict) {
		t.Fatalf("conflicting reservation: %v", err)
	}
	msg := status.Convert(err).Message()
	if !strings.Contains(msg, a.GetId()+", "+b.GetId()) || strings.Contains(msg, c.GetId()) {
		t.Errorf("message %q does not list exactly %s and %s", msg, a.GetId(), b.GetId())
	}
	detail, ok := node.ReservationConflictOf(err)
	if !ok || !slices.Equal(detail.GetJobIds(), []string{a.GetId(), b.GetId()}) || len(detail.GetRunningJobIds()) != 0 || detail.GetDisplace() {
		t.Fatalf("conflict detail: %v (%v)", detail, ok)
	}

	// A running job in the way refuses even with displace.
	req = &fedschedv1.CreateReservationRequest{Procs: 8, Start: at(30 * time.Minute), End: at(90 * time.Minute), Displace: true}
	_, err = s.client.CreateReservation(ctx, req)
	detail, _ = node.ReservationConflictOf(err)
	if status.Code(err) != codes.FailedPrecondition || !slices.Equal(detail.GetRunningJobIds(), []string{run.GetId()}) ||
		!slices.Equal(detail.GetJobIds(), []string{run.GetId(), a.GetId()}) || !detail.GetDisplace() {
		t.Fatalf("running job in the way: %v, detail %v", err, detail)
	}

	// Another fixed reservation in the way refuses too.
	if _, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Procs: 2, Start: at(10 * time.Hour), End: at(11 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, err = s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Procs: 7, Start: at(10 * time.Hour), End: at(12 * time.Hour), Displace: true})
	if detail, _ = node.ReservationConflictOf(err); !slices.Equal(detail.GetReservationIds(), []string{"t.r000000000001"}) {
		t.Fatalf("fixed reservation in the way: %v, detail %v", err, detail)
	}

	// Nothing changed: no new reservation, every job where it was.
	if list := listRes(t, s.client); len(list) != 1 {
		t.Fatalf("reservations after refusals: %v", list)
	}
	recs, _ := st.ListReservations(ctx)
	fixed := 0
	for _, r := range recs {
		if r.Fixed {
			fixed++
		}
	}
	if fixed != 1 {
		t.Fatalf("%d fixed reservations stored, want 1", fixed)
	}
	for _, j := range []*fedschedv1.Job{a, b, c} {
		g := getJob(t, s.client, j.GetId())
		if got := resSlot(g.GetReservation()); got != before[j.GetId()] || g.GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
			t.Errorf("job %s: %s %v, was %s PENDING", j.GetId(), got, g.GetState(), before[j.GetId()])
		}
	}
}

func TestReservationDisplace(t *testing.T) {
	clk := clock.NewManual(monday)
	st := store.NewMemStore()
	s := startManual(t, testConfig(t.TempDir()), st, clk, 0)
	defer s.stop(t)
	ctx := context.Background()
	// Two jobs share [1h, 2h): an SLA job that must end by 2h, and a
	// best-effort one.
	sla := submitAt(t, s.client, 4, time.Hour, time.Hour, 2*time.Hour)
	be := submitAt(t, s.client, 4, time.Hour, time.Hour, 0)
	if resSlot(sla.GetReservation()) != "[1h0m0s, 2h0m0s) x4" || resSlot(be.GetReservation()) != "[1h0m0s, 2h0m0s) x4" {
		t.Fatalf("setup: %s %s", resSlot(sla.GetReservation()), resSlot(be.GetReservation()))
	}
	w, err := s.client.WatchJobs(ctx, &fedschedv1.WatchJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Header(); err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "urgent", Procs: 8,
		Start: at(time.Hour), End: at(2 * time.Hour), Displace: true})
	if err != nil {
		t.Fatal(err)
	}
	ds := resp.GetDisplaced()
	if len(ds) != 2 {
		t.Fatalf("displaced: %v", ds)
	}
	rej, moved := ds[0], ds[1]
	if rej.GetJobId() != sla.GetId() || rej.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED || rej.GetReservation() != nil ||
		rej.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED || rej.GetReason() != fedschedv1.Reason_REASON_DISPLACED ||
		resSlot(rej.GetPrevious()) != "[1h0m0s, 2h0m0s) x4" || !strings.Contains(rej.GetMessage(), "SLA is violated") {
		t.Errorf("rejected: %v", rej)
	}
	if moved.GetJobId() != be.GetId() || moved.GetState() != fedschedv1.JobState_JOB_STATE_PENDING ||
		resSlot(moved.GetReservation()) != "[2h0m0s, 3h0m0s) x4" || resSlot(moved.GetPrevious()) != "[1h0m0s, 2h0m0s) x4" {
		t.Errorf("re-planned: %v", moved)
	}
	// The jobs, their reservations and the SLA are stored so.
	j := getJob(t, s.client, sla.GetId())
	if j.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED || j.GetReason() != fedschedv1.Reason_REASON_DISPLACED ||
		j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED || j.GetReservation() != nil {
		t.Errorf("rejected job: %v", j)
	}
	if o, err := st.GetSLAOutcome(ctx, sla.GetId()); err != nil || o.Outcome != fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED || o.DecidedAt.IsZero() {
		t.Errorf("SLA record: %+v, %v", o, err)
	}
	if r := storedJob(t, st, sla.GetId()).GetReservation(); r != nil {
		t.Errorf("rejected job's reservation still stored: %v", r)
	}
	j = getJob(t, s.client, be.GetId())
	if j.GetState() != fedschedv1.JobState_JOB_STATE_PENDING || j.GetReason() != fedschedv1.Reason_REASON_DISPLACED || resSlot(j.GetReservation()) != "[2h0m0s, 3h0m0s) x4" {
		t.Errorf("re-planned job: %v", j)
	}
	if r := storedJob(t, st, be.GetId()).GetReservation(); resSlot(r) != "[2h0m0s, 3h0m0s) x4" {
		t.Errorf("re-planned job's stored reservation: %v", r)
	}
	onlyFixedStored(t, st)
	// Watchers see both changes.
	seen := map[string]fedschedv1.JobState{}
	for len(seen) < 2 {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetJob().GetReason() == fedschedv1.Reason_REASON_DISPLACED {
			seen[ev.GetJob().GetId()] = ev.GetJob().GetState()
		}
	}
	if seen[sla.GetId()] != fedschedv1.JobState_JOB_STATE_REJECTED || seen[be.GetId()] != fedschedv1.JobState_JOB_STATE_PENDING {
		t.Errorf("watched %v", seen)
	}
}

// startWithMaintenance starts a node on a bolt store in a fresh directory
// (to crash and start again on), on a manual clock at monday, holding the
// fixed reservation "maintenance": 8 processors from 2h to 3h.
func startWithMaintenance(t *testing.T) (string, config.Config, *clock.Manual, *store.BoltStore, *testSite, *fedschedv1.CreateReservationResponse) {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(dir)
	clk := clock.NewManual(monday)
	st, err := store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := startManual(t, cfg, st, clk, 0)
	fixed, err := s.client.CreateReservation(context.Background(), &fedschedv1.CreateReservationRequest{Name: "maintenance", Procs: 8,
		Start: at(2 * time.Hour), End: at(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return dir, cfg, clk, st, s, fixed
}

// TestReservationSurvivesCrash crashes a node holding a fixed and a
// standing reservation with jobs placed around them; the new node has the
// reservations, the jobs where they were, and places new jobs around them.
func TestReservationSurvivesCrash(t *testing.T) {
	dir, cfg, clk, st, s, fixed := startWithMaintenance(t)
	ctx := context.Background()
	standing, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "nightly", Procs: 6,
		Start: at(22 * time.Hour), End: at(24 * time.Hour), EverySeconds: 86400})
	if err != nil {
		t.Fatal(err)
	}
	a := submitAt(t, s.client, 4, 2*time.Hour, time.Hour, 0)    // after the maintenance
	b := submitAt(t, s.client, 4, 3*time.Hour, 21*time.Hour, 0) // after the nightly instance
	if resSlot(a.GetReservation()) != "[3h0m0s, 5h0m0s) x4" || resSlot(b.GetReservation()) != "[24h0m0s, 27h0m0s) x4" {
		t.Fatalf("setup: %s %s", resSlot(a.GetReservation()), resSlot(b.GetReservation()))
	}
	before := listRes(t, s.client)
	s.crash()

	clk.Advance(30 * time.Minute)
	st, err = store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s = startManual(t, cfg, st, clk, 0)
	defer s.stop(t)
	after := listRes(t, s.client)
	if len(after) != 2 || after[0].GetId() != fixed.GetReservation().GetId() || after[1].GetId() != standing.GetReservation().GetId() {
		t.Fatalf("reservations after the crash: %v", after)
	}
	for i := range after {
		if after[i].GetName() != before[i].GetName() || !sameWindows(after[i].GetInstances(), before[i].GetInstances()...) {
			t.Errorf("reservation %s came back as %v, was %v", after[i].GetId(), after[i], before[i])
		}
	}
	for _, j := range []*fedschedv1.Job{a, b} {
		if got := getJob(t, s.client, j.GetId()); got.GetState() != fedschedv1.JobState_JOB_STATE_PENDING || !sameReservation(got.GetReservation(), j.GetReservation()) {
			t.Errorf("job %s came back as %v %s, was %s", j.GetId(), got.GetState(), resSlot(got.GetReservation()), resSlot(j.GetReservation()))
		}
	}
	// New jobs go around both.
	c := submitAt(t, s.client, 8, time.Hour, 90*time.Minute, 0)
	d := submitAt(t, s.client, 4, 2*time.Hour, 45*time.Hour, 0)
	if resSlot(c.GetReservation()) != "[5h0m0s, 6h0m0s) x8" || resSlot(d.GetReservation()) != "[48h0m0s, 50h0m0s) x4" {
		t.Errorf("new jobs: %s %s", resSlot(c.GetReservation()), resSlot(d.GetReservation()))
	}
	// The ids go on from where they were.
	e, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Procs: 1, Start: at(100 * time.Hour), End: at(101 * time.Hour)})
	if err != nil || e.GetReservation().GetId() != "t.r000000000003" {
		t.Fatalf("third reservation: %v, %v", e, err)
	}
}

// TestJobReservationRecordsDropped: a job's reservation is stored in its
// record only. A store written by an earlier node also holds a
// ReservationRecord per job (and may hold one of a job long gone); the
// node deletes them when it starts, keeps the fixed ones, and the jobs
// keep their reservations.
func TestJobReservationRecordsDropped(t *testing.T) {
	dir, cfg, clk, st, s, fixed := startWithMaintenance(t)
	ctx := context.Background()
	a := submitAt(t, s.client, 4, 2*time.Hour, time.Hour, 0)
	if resSlot(a.GetReservation()) != "[3h0m0s, 5h0m0s) x4" {
		t.Fatalf("setup: %s", resSlot(a.GetReservation()))
	}
	onlyFixedStored(t, st)
	s.crash()

	// The records an earlier node wrote for its jobs.
	st, err := store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.ReservationRecord{
		{ID: a.GetId(), JobID: a.GetId(), Procs: 4, Start: monday.Add(3 * time.Hour), End: monday.Add(5 * time.Hour)},
		{ID: "t.000000000099", JobID: "t.000000000099", Procs: 1, Start: monday, End: monday.Add(time.Hour)},
	} {
		if err := st.PutReservation(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	s = startManual(t, cfg, st, clk, 0)
	defer s.stop(t)
	submitAt(t, s.client, 1, time.Hour, 0, 0) // a turn, committed after recovery's changes
	onlyFixedStored(t, st)
	if rec, err := st.GetReservation(ctx, fixed.GetReservation().GetId()); err != nil || !rec.Fixed {
		t.Fatalf("fixed reservation after the restart: %+v, %v", rec, err)
	}
	if got := resSlot(getJob(t, s.client, a.GetId()).GetReservation()); got != "[3h0m0s, 5h0m0s) x4" {
		t.Fatalf("job after the restart: %s", got)
	}
	if got := resSlot(storedJob(t, st, a.GetId()).GetReservation()); got != "[3h0m0s, 5h0m0s) x4" {
		t.Fatalf("stored job after the restart: %s", got)
	}
}

// TestStandingInstancesMaterialise checks that instances come into the plan
// as time passes, stay a horizon ahead, drop out when over, and that a job
// placed beyond the horizon is kept clear of instances not laid yet.
func TestStandingInstancesMaterialise(t *testing.T) {
	clk := clock.NewManual(monday)
	const day = 24 * time.Hour
	s := startManual(t, testConfig(t.TempDir()), store.NewMemStore(), clk, 2*day)
	defer s.stop(t)
	ctx := context.Background()
	// Every day 01:00-03:00 on the whole site. The horizon is 2 days,
	// extended 2/7 of a day at a time.
	r, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "nightly", Procs: 8,
		Start: at(time.Hour), End: at(3 * time.Hour), EverySeconds: 86400})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetReservation().GetInstances(); !sameWindows(got, window(time.Hour, 3*time.Hour), window(day+time.Hour, day+3*time.Hour),
		window(2*day+time.Hour, 2*day+3*time.Hour)) {
		t.Fatalf("instances at creation: %v", got)
	}
	// Five days later the first instances are over and new ones are laid.
	for range 5 * 12 {
		clk.Advance(2 * time.Hour)
		listRes(t, s.client) // a turn of the loop at the new time
	}
	got := listRes(t, s.client)[0].GetInstances()
	if !sameWindows(got, window(5*day+time.Hour, 5*day+3*time.Hour), window(6*day+time.Hour, 6*day+3*time.Hour),
		window(7*day+time.Hour, 7*day+3*time.Hour)) {
		t.Fatalf("instances after five days: %v", got)
	}
	// A job released 10 days ahead, far beyond the horizon, is placed
	// clear of the instance of that night.
	j := submitAt(t, s.client, 4, 2*time.Hour, 10*day, 0)
	if got := resSlot(j.GetReservation()); got != "[243h0m0s, 245h0m0s) x4" {
		t.Fatalf("job beyond the horizon: %s", got)
	}
	if got := listRes(t, s.client)[0].GetInstances(); len(got) != 6 || !sameWindows(got[5:], window(10*day+time.Hour, 10*day+3*time.Hour)) {
		t.Fatalf("instances after the far job: %v", got)
	}
	// Deleting the rule removes every instance: the whole site is free
	// tonight.
	if _, err := s.client.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: r.GetReservation().GetId()}); err != nil {
		t.Fatal(err)
	}
	k := submitAt(t, s.client, 8, 2*time.Hour, 6*day+time.Hour, 0)
	if got := resSlot(k.GetReservation()); got != "[145h0m0s, 147h0m0s) x8" {
		t.Fatalf("job after delete: %s", got)
	}
}

func TestDigestOutlookReflectsReservations(t *testing.T) {
	clk := clock.NewManual(monday)
	s := startManual(t, testConfig(t.TempDir()), store.NewMemStore(), clk, 0)
	defer s.stop(t)
	if d := s.node.Digest(); d.FreeNow != 8 || d.Free1h != 8 || d.Free4h != 8 {
		t.Fatalf("digest before: %+v", d)
	}
	// 6 of 8 processors from 30 minutes to 2 hours: the outlook in 1 hour
	// drops to 2 (rounded down to a sixteenth of the site: 2).
	if _, err := s.client.CreateReservation(context.Background(), &fedschedv1.CreateReservationRequest{Procs: 6, Start: at(30 * time.Minute), End: at(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := s.node.Digest()
		if d.FreeNow == 8 && d.Free1h == 2 && d.Free4h == 8 && d.Free24h == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("digest after the reservation: %+v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReservationBadInput(t *testing.T) {
	clk := clock.NewManual(monday)
	s := startManual(t, testConfig(t.TempDir()), store.NewMemStore(), clk, 0)
	defer s.stop(t)
	ctx := context.Background()
	ok := func(f func(r *fedschedv1.CreateReservationRequest)) *fedschedv1.CreateReservationRequest {
		r := &fedschedv1.CreateReservationRequest{Name: "x", Procs: 2, Start: at(time.Hour), End: at(2 * time.Hour)}
		f(r)
		return r
	}
	standing := func(f func(r *fedschedv1.CreateReservationRequest)) *fedschedv1.CreateReservationRequest {
		return ok(func(r *fedschedv1.CreateReservationRequest) { r.EverySeconds = 86400; f(r) })
	}
	withUnknownReq := ok(func(*fedschedv1.CreateReservationRequest) {})
	withUnknownReq.ProtoReflect().SetUnknown([]byte{0xf8, 0x07, 0x01})
	tests := []struct {
		name string
		req  *fedschedv1.CreateReservationRequest
		msg  string
	}{
		{"zero procs", ok(func(r *fedschedv1.CreateReservationRequest) { r.Procs = 0 }), "procs must be at least 1"},
		{"negative procs", ok(func(r *fedschedv1.CreateReservationRequest) { r.Procs = -1 }), "procs must be at least 1"},
		{"wider than the site", ok(func(r *fedschedv1.CreateReservationRequest) { r.Procs = 9 }), "exceeds the site's 8"},
		{"no start", ok(func(r *fedschedv1.CreateReservationRequest) { r.Start = nil }), "start is required"},
		{"no end", ok(func(r *fedschedv1.CreateReservationRequest) { r.End = nil }), "end is required"},
		{"end before start", ok(func(r *fedschedv1.CreateReservationRequest) { r.End = at(30 * time.Minute) }), "is not after start"},
		{"end equals start", ok(func(r *fedschedv1.CreateReservationRequest) { r.End = r.Start }), "is not after start"},
		{"start in the past", ok(func(r *fedschedv1.CreateReservationRequest) { r.Start = at(-2 * time.Minute) }), "more than a minute in the past"},
		{"over already", ok(func(r *fedschedv1.CreateReservationRequest) {
			r.Start, r.End = at(-50*time.Second), at(-10*time.Second)
		}), "is not after the site's time"},
		{"eleven years ahead", ok(func(r *fedschedv1.CreateReservationRequest) { r.End = at(11 * 366 * 24 * time.Hour) }), "ten years"},
		{"invalid timestamp", ok(func(r *fedschedv1.CreateReservationRequest) { r.Start = &timestamppb.Timestamp{Seconds: 1, Nanos: -1} }), "start"},
		{"oversize name", ok(func(r *fedschedv1.CreateReservationRequest) { r.Name = strings.Repeat("n", 200) }), "name"},
		{"control in name", ok(func(r *fedschedv1.CreateReservationRequest) { r.Name = "a\nb" }), "name"},
		{"negative period", ok(func(r *fedschedv1.CreateReservationRequest) { r.EverySeconds = -1 }), "every_seconds must not be negative"},
		{"period shorter than length", standing(func(r *fedschedv1.CreateReservationRequest) { r.EverySeconds = 1800 }), "shorter than the reservation's length"},
		{"period under an hour", standing(func(r *fedschedv1.CreateReservationRequest) { r.End, r.EverySeconds = at(70*time.Minute), 1800 }), "least period"},
		{"until without period", ok(func(r *fedschedv1.CreateReservationRequest) { r.Until = at(48 * time.Hour) }), "until is only for standing"},
		{"weekdays without period", ok(func(r *fedschedv1.CreateReservationRequest) {
			r.Weekdays = []fedschedv1.Weekday{fedschedv1.Weekday_WEEKDAY_MONDAY}
		}), "weekdays are only for standing"},
		{"until before start", standing(func(r *fedschedv1.CreateReservationRequest) { r.Until = at(30 * time.Minute) }), "until"},
		{"unspecified weekday", standing(func(r *fedschedv1.CreateReservationRequest) {
			r.Weekdays = []fedschedv1.Weekday{fedschedv1.Weekday_WEEKDAY_UNSPECIFIED}
		}), "weekdays[0]"},
		{"weekday twice", standing(func(r *fedschedv1.CreateReservationRequest) {
			r.Weekdays = []fedschedv1.Weekday{fedschedv1.Weekday_WEEKDAY_MONDAY, fedschedv1.Weekday_WEEKDAY_MONDAY}
		}), "given twice"},
		{"no instance ever", standing(func(r *fedschedv1.CreateReservationRequest) {
			r.EverySeconds = 7 * 86400 // always a Monday
			r.Weekdays = []fedschedv1.Weekday{fedschedv1.Weekday_WEEKDAY_TUESDAY}
		}), "no instance"},
		{"unknown fields", withUnknownReq, "fields this site does not know"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.client.CreateReservation(ctx, tc.req)
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("got %v %q, want InvalidArgument containing %q", st.Code(), st.Message(), tc.msg)
			}
		})
	}
	if list := listRes(t, s.client); len(list) != 0 {
		t.Fatalf("bad requests made reservations: %v", list)
	}
}

// TestStandingUnderEASY: a queue policy's job long enough to reach an
// instance beyond the horizon does not start into it.
func TestStandingUnderEASY(t *testing.T) {
	clk := clock.NewManual(monday)
	cfg := testConfig(t.TempDir())
	cfg.Policy = "easy"
	const day = 24 * time.Hour
	s := startManual(t, cfg, store.NewMemStore(), clk, day)
	defer s.stop(t)
	ctx := context.Background()
	// Weekly, first on Wednesday at noon, beyond the 1-day horizon.
	r, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Procs: 8, Start: at(2*day + 12*time.Hour),
		End: at(2*day + 13*time.Hour), EverySeconds: 7 * 86400})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.GetReservation().GetInstances()); n != 0 {
		t.Fatalf("%d instances laid beyond the horizon at creation", n)
	}
	long := submitAt(t, s.client, 8, 3*day, 0, 0)
	short := submitAt(t, s.client, 4, day, 0, 0)
	// The long job would run into Wednesday noon: it waits; the short one
	// fits before it and starts.
	waitState(t, s.client, short.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)
	if j := getJob(t, s.client, long.GetId()); j.GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
		t.Fatalf("long job: %v", j.GetState())
	}
	if got := listRes(t, s.client)[0].GetInstances(); !sameWindows(got, window(2*day+12*time.Hour, 2*day+13*time.Hour)) {
		t.Fatalf("instances: %v", got)
	}
}

// TestFarJobClearOfInstancesFromTheStart: a job planned far further ahead
// than instances are laid (ten horizons) is placed clear of the instance
// of its night at once (the node lays as far as the job reaches), and
// keeps its slot when that night comes into the horizon: no instance
// claims a slot promised to a job. (The node used to lay at most eight
// horizons ahead and displace such a job later.)
func TestFarJobClearOfInstancesFromTheStart(t *testing.T) {
	clk := clock.NewManual(monday)
	const day = 24 * time.Hour
	st := store.NewMemStore()
	s := startManual(t, testConfig(t.TempDir()), st, clk, day)
	defer s.stop(t)
	ctx := context.Background()
	if _, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "nightly", Procs: 8, Start: at(time.Hour),
		End: at(3 * time.Hour), EverySeconds: 86400}); err != nil {
		t.Fatal(err)
	}
	j := submitAt(t, s.client, 4, 2*time.Hour, 10*day, 0)
	if got := resSlot(j.GetReservation()); got != "[243h0m0s, 245h0m0s) x4" {
		t.Fatalf("job ten days ahead: %s", got)
	}
	for range 10 * 12 {
		clk.Advance(2 * time.Hour)
		listRes(t, s.client)
	}
	g := getJob(t, s.client, j.GetId())
	if g.GetReason() == fedschedv1.Reason_REASON_DISPLACED || resSlot(g.GetReservation()) != "[243h0m0s, 245h0m0s) x4" {
		t.Fatalf("job after its night came into the horizon: %v %v %s", g.GetState(), g.GetReason(), resSlot(g.GetReservation()))
	}
	if r := storedJob(t, st, j.GetId()).GetReservation(); resSlot(r) != "[243h0m0s, 245h0m0s) x4" {
		t.Fatalf("stored reservation: %v", r)
	}
	onlyFixedStored(t, st)
}

// TestStandingSameInNodeAndAgent: a node and a site agent with the same
// standing reservation place the same jobs in the same slots, and reject
// the same: both keep every placement clear of every instance, however
// far ahead (the node lays its instances 2 days ahead here), and reject a
// job the rule leaves no room for (plan.StandingExcludes).
func TestStandingSameInNodeAndAgent(t *testing.T) {
	clk := clock.NewManual(monday)
	const day = 24 * time.Hour
	s := startManual(t, testConfig(t.TempDir()), store.NewMemStore(), clk, 2*day)
	defer s.stop(t)
	// Every day 01:00-03:00 on 6 of the 8 processors.
	if _, err := s.client.CreateReservation(context.Background(), &fedschedv1.CreateReservationRequest{Name: "nightly", Procs: 6,
		Start: at(time.Hour), End: at(3 * time.Hour), EverySeconds: 86400}); err != nil {
		t.Fatal(err)
	}
	t0 := monday.Unix()
	ag, err := site.New(site.Config{Name: "t", Procs: 8, Policy: plan.Conservative, TrackMoves: true, NoGrowBack: true,
		Standing: []plan.Standing{{Name: "nightly", Procs: 6, Start: t0 + 3600, Every: 86400, Length: 7200}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range []struct {
		procs        int32
		est, release time.Duration
	}{
		{4, 2 * time.Hour, 0}, {8, 5 * time.Hour, 0}, {2, 30 * time.Hour, day}, {4, 30 * time.Hour, day},
		{6, 20 * time.Hour, 9 * day}, {8, 4 * time.Hour, 20*day + 2*time.Hour}, {3, 22 * time.Hour, 12 * day}, {2, 70 * time.Hour, 30 * day},
	} {
		got := submitAt(t, s.client, j.procs, j.est, j.release, 0)
		ag.Submit(t0, int64(i+1), plan.Job{Procs: int(j.procs), Estimate: int64(j.est / time.Second), Release: t0 + int64(j.release/time.Second),
			Deadline: plan.Forever})
		ds := ag.Ready().Decisions
		if len(ds) != 1 {
			t.Fatalf("job %d: the agent decided %v", i+1, ds)
		}
		want := ds[0].Placement
		switch r := got.GetReservation(); {
		case ds[0].Kind == site.DecideReject:
			if got.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED {
				t.Errorf("job %d: the node placed it %s, the agent rejects it (%v)", i+1, resSlot(r), want.Reason)
			}
		case r == nil || r.GetStart().AsTime().Unix() != want.Start || r.GetEnd().AsTime().Unix() != want.End:
			t.Errorf("job %d: the node placed it %s (%v), the agent [%s, %s)", i+1, resSlot(r), got.GetState(),
				time.Unix(want.Start, 0).Sub(monday), time.Unix(want.End, 0).Sub(monday))
		}
	}
}
