package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/node"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// fakeReserver is a SiteService that answers the reservation calls.
type fakeReserver struct {
	fedschedv1.UnimplementedSiteServiceServer

	mu      sync.Mutex
	calls   int
	creates []*fedschedv1.CreateReservationRequest
	deletes []string
	res     []*fedschedv1.FixedReservation
}

func (f *fakeReserver) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeReserver) GetSite(context.Context, *fedschedv1.GetSiteRequest) (*fedschedv1.GetSiteResponse, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return &fedschedv1.GetSiteResponse{Site: &fedschedv1.Site{Name: "site-a", Procs: 64, Now: ts(t0)}}, nil
}

func (f *fakeReserver) CreateReservation(_ context.Context, req *fedschedv1.CreateReservationRequest) (*fedschedv1.CreateReservationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.creates = append(f.creates, proto.Clone(req).(*fedschedv1.CreateReservationRequest))
	if req.GetName() == "conflict" {
		return nil, node.ToStatus(&node.ReservationConflictError{Jobs: []string{"site-a.000000000001", "site-a.000000000002"},
			Running: []string{"site-a.000000000002"}, Displace: req.GetDisplace()})
	}
	r := &fedschedv1.FixedReservation{Id: fmt.Sprintf("site-a.r%012d", len(f.creates)), Name: req.GetName(), Procs: req.GetProcs(),
		Start: req.GetStart(), End: req.GetEnd(), EverySeconds: req.GetEverySeconds(), Until: req.GetUntil(), Weekdays: req.GetWeekdays(),
		Site: "site-a", Instances: []*fedschedv1.TimeWindow{{Start: req.GetStart(), End: req.GetEnd()}}}
	f.res = append(f.res, r)
	resp := &fedschedv1.CreateReservationResponse{Reservation: r}
	if req.GetDisplace() {
		was := &fedschedv1.Reservation{Start: req.GetStart(), End: req.GetEnd(), Procs: 4, Site: "site-a"}
		resp.Displaced = []*fedschedv1.DisplacedJob{
			{JobId: "site-a.000000000007", Previous: was, State: fedschedv1.JobState_JOB_STATE_REJECTED, Reason: fedschedv1.Reason_REASON_DISPLACED,
				Message: "no slot left", SlaOutcome: fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED},
			{JobId: "site-a.000000000008", Previous: was, State: fedschedv1.JobState_JOB_STATE_PENDING, Reason: fedschedv1.Reason_REASON_DISPLACED,
				Reservation: &fedschedv1.Reservation{Start: req.GetEnd(), End: ts(req.GetEnd().AsTime().Add(time.Hour)), Procs: 4, Site: "site-a"}},
		}
	}
	return resp, nil
}

func (f *fakeReserver) ListReservations(context.Context, *fedschedv1.ListReservationsRequest) (*fedschedv1.ListReservationsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return &fedschedv1.ListReservationsResponse{Reservations: f.res, HorizonSeconds: 7 * 86400}, nil
}

func (f *fakeReserver) DeleteReservation(_ context.Context, req *fedschedv1.DeleteReservationRequest) (*fedschedv1.DeleteReservationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.deletes = append(f.deletes, req.GetReservationId())
	for i, r := range f.res {
		if r.GetId() == req.GetReservationId() {
			f.res = append(f.res[:i], f.res[i+1:]...)
			return &fedschedv1.DeleteReservationResponse{Reservation: r}, nil
		}
	}
	return nil, node.ToStatus(fmt.Errorf("site site-a has no reservation %q: %w", req.GetReservationId(), node.ErrReservationNotFound))
}

func TestReserveFixedAndStanding(t *testing.T) {
	f := &fakeReserver{}
	addr := serve(t, f)
	// Relative times count from the site's clock (2030), not the local one.
	out := mustRun(t, "reserve", "--addr", addr, "--procs", "8", "--start", "+1h", "--end", "+3h", "--name", "maintenance")
	for _, want := range []string{"site-a.r000000000001", "maintenance", "8", "(2h)", "site-a"} {
		if !strings.Contains(out, want) {
			t.Errorf("reserve output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "repeats") {
		t.Errorf("a fixed reservation does not repeat:\n%s", out)
	}
	req := f.creates[0]
	if !req.GetStart().AsTime().Equal(t0.Add(time.Hour)) || !req.GetEnd().AsTime().Equal(t0.Add(3*time.Hour)) || req.GetProcs() != 8 ||
		req.GetEverySeconds() != 0 || req.GetUntil() != nil || req.GetDisplace() {
		t.Errorf("request %v", req)
	}

	out = mustRun(t, "reserve", "--addr", addr, "--procs", "4", "--start", "2030-01-07T08:00:00Z", "--end", "2030-01-07T10:00:00Z",
		"--every", "1d", "--until", "+30d", "--weekday", "mon,Thursday", "--weekday", "SUN", "--name", "course")
	req = f.creates[1]
	want := []fedschedv1.Weekday{fedschedv1.Weekday_WEEKDAY_MONDAY, fedschedv1.Weekday_WEEKDAY_THURSDAY, fedschedv1.Weekday_WEEKDAY_SUNDAY}
	if req.GetEverySeconds() != 86400 || !req.GetUntil().AsTime().Equal(t0.Add(30*24*time.Hour)) || fmt.Sprint(req.GetWeekdays()) != fmt.Sprint(want) ||
		!req.GetStart().AsTime().Equal(time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("standing request %v", req)
	}
	for _, want := range []string{"every 1d on mon,thu,sun (UTC) until", "1 in the plan"} {
		if !strings.Contains(out, want) {
			t.Errorf("standing output lacks %q:\n%s", want, out)
		}
	}
}

func TestReserveJSONAndDisplace(t *testing.T) {
	f := &fakeReserver{}
	addr := serve(t, f)
	out := mustRun(t, "reserve", "--addr", addr, "--procs", "8", "--start", "2030-01-02T04:00:00Z", "--end", "2030-01-02T05:00:00Z", "--displace", "--json")
	var got reserveJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("reserve --json: %v\n%s", err, out)
	}
	if !f.creates[0].GetDisplace() {
		t.Error("--displace not sent")
	}
	r := got.Reservation
	if r.ID != "site-a.r000000000001" || r.Procs != 8 || *r.Start != "2030-01-02T04:00:00Z" || r.Until != nil || r.EveryS != 0 ||
		len(r.Instances) != 1 || r.Weekdays == nil {
		t.Errorf("reservation %+v", r)
	}
	if len(got.Displaced) != 2 || got.Displaced[0].State != "REJECTED" || got.Displaced[0].SLAOutcome != "violated" ||
		got.Displaced[0].Reservation != nil || got.Displaced[1].Reason != "displaced" || *got.Displaced[1].Reservation.Start != "2030-01-02T05:00:00Z" {
		t.Errorf("displaced %+v", got.Displaced)
	}
	// The human form lists them in a table.
	out = mustRun(t, "reserve", "--addr", addr, "--procs", "8", "--start", "2030-01-02T04:00:00Z", "--end", "2030-01-02T05:00:00Z", "--displace")
	if !strings.Contains(out, "displaced:") || !strings.Contains(out, "site-a.000000000007  REJECTED") || !strings.Contains(out, "violated") {
		t.Errorf("reserve --displace:\n%s", out)
	}
}

func TestReserveConflict(t *testing.T) {
	addr := serve(t, &fakeReserver{})
	args := []string{"reserve", "--addr", addr, "--procs", "8", "--start", "+1h", "--end", "+2h", "--name", "conflict"}
	out, err := run(t, args...)
	line := errorLine(err)
	if !strings.HasPrefix(line, "FailedPrecondition: the slot conflicts with jobs site-a.000000000001, site-a.000000000002") ||
		!errors.Is(err, node.ErrReservationConflict) || out != "" {
		t.Fatalf("error line %q, stdout %q", line, out)
	}
	// With --json, what is in the way goes to stdout too.
	out, err = run(t, append(args, "--json", "--displace")...)
	if err == nil {
		t.Fatal("a refused reservation must fail")
	}
	var got map[string]conflictJSON
	if jerr := json.Unmarshal([]byte(out), &got); jerr != nil {
		t.Fatalf("conflict --json: %v\n%s", jerr, out)
	}
	c := got["conflict"]
	if fmt.Sprint(c.JobIDs) != "[site-a.000000000001 site-a.000000000002]" || fmt.Sprint(c.RunningJobIDs) != "[site-a.000000000002]" ||
		c.HeldJobIDs == nil || c.ReservationIDs == nil || !c.Displace {
		t.Errorf("conflict %+v", c)
	}
}

func TestReservationsAndUnreserve(t *testing.T) {
	f := &fakeReserver{}
	addr := serve(t, f)
	if out := mustRun(t, "reservations", "--addr", addr, "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty reservations --json = %q", out)
	}
	mustRun(t, "reserve", "--addr", addr, "--procs", "8", "--start", "+1h", "--end", "+3h", "--name", "maintenance")
	mustRun(t, "reserve", "--addr", addr, "--procs", "2", "--start", "+1h", "--end", "+2h", "--every", "7d", "--weekday", "wed")
	out := mustRun(t, "reservations", "--addr", addr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "maintenance") ||
		!strings.Contains(lines[2], "every 7d on wed (UTC)") || !strings.Contains(lines[2], "site-a.r000000000002  -") {
		t.Errorf("reservations:\n%s", out)
	}
	var list []fixedResJSON
	if err := json.Unmarshal([]byte(mustRun(t, "reservations", "--addr", addr, "--json")), &list); err != nil || len(list) != 2 ||
		list[1].EveryS != 7*86400 || fmt.Sprint(list[1].Weekdays) != "[wed]" {
		t.Fatalf("reservations --json: %v %+v", err, list)
	}

	out = mustRun(t, "unreserve", "--addr", addr, "site-a.r000000000001")
	if !strings.Contains(out, "deleted") || !strings.Contains(out, "site-a.r000000000001") || !strings.Contains(out, "8 procs over 1 slot(s)") {
		t.Errorf("unreserve:\n%s", out)
	}
	_, err := run(t, "unreserve", "--addr", addr, "site-a.r000000000001")
	if line := errorLine(err); !strings.HasPrefix(line, `NotFound: site site-a has no reservation "site-a.r000000000001"`) ||
		!errors.Is(err, node.ErrReservationNotFound) {
		t.Errorf("second unreserve: %q", line)
	}
	var deleted fixedResJSON
	if err := json.Unmarshal([]byte(mustRun(t, "unreserve", "--addr", addr, "site-a.r000000000002", "--json")), &deleted); err != nil ||
		deleted.ID != "site-a.r000000000002" {
		t.Errorf("unreserve --json: %v %+v", err, deleted)
	}
}

func TestReserveClientSideErrors(t *testing.T) {
	f := &fakeReserver{}
	addr := serve(t, f)
	r := []string{"reserve", "--addr", addr}
	tests := map[string]struct {
		args []string
		want string
	}{
		"procs missing":         {append(r, "--start", "+1h", "--end", "+2h"), "--procs must be >= 1"},
		"start missing":         {append(r, "--procs", "1", "--end", "+2h"), "--start is required"},
		"end missing":           {append(r, "--procs", "1", "--start", "+2h"), "--end is required"},
		"end before start":      {append(r, "--procs", "1", "--start", "2030-01-02T05:00:00Z", "--end", "2030-01-02T04:00:00Z"), "is not after --start"},
		"bad time":              {append(r, "--procs", "1", "--start", "soon", "--end", "+2h"), `invalid time "soon"`},
		"until without every":   {append(r, "--procs", "1", "--start", "+1h", "--end", "+2h", "--until", "+5d"), "--until needs --every"},
		"weekday without every": {append(r, "--procs", "1", "--start", "+1h", "--end", "+2h", "--weekday", "mon"), "--weekday needs --every"},
		"bad weekday":           {append(r, "--procs", "1", "--start", "+1h", "--end", "+2h", "--every", "1d", "--weekday", "funday"), `--weekday "funday"`},
		"every fraction":        {append(r, "--procs", "1", "--start", "+1h", "--end", "+2h", "--every", "1500ms"), "whole number of seconds"},
		"every negative":        {append(r, "--procs", "1", "--start", "+1h", "--end", "+2h", "--every", "-1h"), "--every must be > 0"},
		"extra argument":        {append(r, "--procs", "1", "--start", "+1h", "--end", "+2h", "x"), "fedsched reserve"},
		"reservations arg":      {[]string{"reservations", "--addr", addr, "x"}, "fedsched reservations"},
		"unreserve without id":  {[]string{"unreserve", "--addr", addr}, "accepts 1 arg(s)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			line := errorLine(err)
			if !strings.HasPrefix(line, "InvalidArgument: ") || !strings.Contains(line, tc.want) {
				t.Errorf("error line %q, want InvalidArgument: ...%s...", line, tc.want)
			}
		})
	}
	if n := f.callCount(); n != 0 {
		t.Errorf("the site got %d calls; client-side errors must not call", n)
	}
	// Checks that need the site's clock come after GetSite, before
	// CreateReservation.
	mustRun(t, append(r, "--procs", "1", "--start", "+1h", "--end", "+2h", "--every", "1h30m")...)
	_, err := run(t, append(r, "--procs", "1", "--start", "+1h", "--end", "+3h", "--every", "1h")...)
	if line := errorLine(err); !strings.HasPrefix(line, "InvalidArgument: --every 1h is shorter than the slot (2h)") {
		t.Errorf("every shorter than the slot: %q", line)
	}
	if len(f.creates) != 1 {
		t.Errorf("%d reservations sent, want 1", len(f.creates))
	}
}

// TestReservationsShowProblem: a stored reservation the site could not put
// back into its plan (it restarted smaller) says why, in the table, the
// detail and the JSON; before, it showed only "0 in the plan".
func TestReservationsShowProblem(t *testing.T) {
	const why = "not in the plan since the restart: it holds 8 processors and the site now has 4"
	f := &fakeReserver{res: []*fedschedv1.FixedReservation{{Id: "site-a.r000000000001", Name: "wide", Procs: 8,
		Start: ts(t0.Add(time.Hour)), End: ts(t0.Add(2 * time.Hour)), Site: "site-a", Problem: why}}}
	addr := serve(t, f)
	if out := mustRun(t, "reservations", "--addr", addr); !strings.Contains(out, "not held: "+why) {
		t.Errorf("reservations:\n%s", out)
	}
	var list []fixedResJSON
	if err := json.Unmarshal([]byte(mustRun(t, "reservations", "--addr", addr, "--json")), &list); err != nil || len(list) != 1 || list[0].Problem != why {
		t.Errorf("reservations --json: %v %+v", err, list)
	}
	if out := mustRun(t, "unreserve", "--addr", addr, "site-a.r000000000001"); !strings.Contains(out, "freed    nothing: it held no processors ("+why+")") {
		t.Errorf("unreserve:\n%s", out)
	}
}
