package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/types/known/timestamppb"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// scrape fetches /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// value is the value of the series of family name whose labels include
// want (name=value pairs); 0 if there is none.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == want[i] && l.GetValue() == want[i+1]
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func listEvery(t *testing.T, c fedschedv1.SiteServiceClient) []*fedschedv1.Job {
	t.Helper()
	var out []*fedschedv1.Job
	tok := ""
	for {
		r, err := c.ListJobs(context.Background(), &fedschedv1.ListJobsRequest{PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.GetJobs()...)
		if tok = r.GetNextPageToken(); tok == "" {
			return out
		}
	}
}

// TestMetricsMatchJobStates drives a site through completed, SLA, rejected,
// cancelled, running and waiting jobs and checks the scraped counters
// against the jobs the site lists.
func TestMetricsMatchJobStates(t *testing.T) {
	cfg := testConfig(t.TempDir())
	c, n := startLoggedSite(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(n.HTTPHandler(nil))
	defer srv.Close()
	ctx := context.Background()
	submit := func(sp *fedschedv1.JobSpec) *fedschedv1.Job {
		t.Helper()
		r, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetJob()
	}
	var short []string
	for i := range 4 {
		sp := &fedschedv1.JobSpec{User: "u", Procs: 2, EstimateSeconds: 60, SimRuntimeSeconds: 30}
		if i == 3 {
			sp.Deadline, sp.Fee, sp.Penalty = timestamppb.New(time.Now().Add(24*time.Hour)), 5, 7
		}
		short = append(short, submit(sp).GetId())
	}
	for _, id := range short {
		waitState(t, c, id, fedschedv1.JobState_JOB_STATE_COMPLETED)
	}
	long := submit(&fedschedv1.JobSpec{User: "u", Procs: 8, EstimateSeconds: 36000})
	behind := submit(&fedschedv1.JobSpec{User: "v", Procs: 4, EstimateSeconds: 3600})
	submit(&fedschedv1.JobSpec{User: "v", Procs: 8, EstimateSeconds: 60, Deadline: timestamppb.New(time.Now().Add(2 * time.Hour)), Fee: 1})
	cancelled := submit(&fedschedv1.JobSpec{User: "v", Procs: 2, EstimateSeconds: 3600})
	if _, err := c.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: cancelled.GetId()}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, long.GetId(), fedschedv1.JobState_JOB_STATE_RUNNING)

	fams := scrape(t, srv.URL)
	jobs := listEvery(t, c)
	byState := map[string]int{}
	for _, j := range jobs {
		byState[strings.TrimPrefix(j.GetState().String(), "JOB_STATE_")]++
	}
	if got := value(fams, "fedsched_jobs"); int(got) != len(jobs) {
		t.Errorf("fedsched_jobs sums to %v; the site lists %d jobs", got, len(jobs))
	}
	for s := range fedschedv1.JobState_value {
		s = strings.TrimPrefix(s, "JOB_STATE_")
		if s == "UNSPECIFIED" {
			continue
		}
		if got := value(fams, "fedsched_jobs", "state", s); int(got) != byState[s] {
			t.Errorf("fedsched_jobs{state=%q} = %v, the site lists %d", s, got, byState[s])
		}
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"fedsched_admissions_total", []string{"placement", "full"}, 7},
		{"fedsched_rejections_total", []string{"reason", "rejected_no_gap"}, 1},
		{"fedsched_sla_outcomes_total", []string{"outcome", "met"}, 1},
		{"fedsched_sla_fees_earned_total", nil, 5},
		{"fedsched_sla_penalties_owed_total", nil, 0},
		{"fedsched_job_wait_seconds", nil, 5},     // started: 4 short, 1 long
		{"fedsched_job_bounded_slowdown", nil, 4}, // ran to their end
		{"fedsched_pending_jobs", nil, 1},         // behind
		{"fedsched_pending_jobs", []string{"reason", "resources"}, 1},
		{"fedsched_procs", nil, 8},
		{"fedsched_procs_busy", nil, 8},
		{"fedsched_plan_reservations", []string{"kind", "running"}, 1},
		{"fedsched_plan_reservations", []string{"kind", "pending"}, 1},
		{"fedsched_scrape_snapshot_ok", nil, 1},
	}
	for _, ch := range checks {
		if got := value(fams, ch.name, ch.labels...); got != ch.want {
			t.Errorf("%s%v = %v, want %v", ch.name, ch.labels, got, ch.want)
		}
	}
	for _, name := range []string{"fedsched_scheduling_pass_seconds", "fedsched_store_commit_seconds", "fedsched_loop_queue_depth"} {
		if fams[name] == nil {
			t.Errorf("no series %s", name)
		}
	}
	if value(fams, "fedsched_scheduling_pass_seconds") == 0 || value(fams, "fedsched_store_commit_seconds") == 0 {
		t.Error("no scheduling pass or commit observed")
	}
	if w := value(fams, "fedsched_pending_jobs", "reason", "resources"); w != 1 || behind.GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
		t.Errorf("the job behind the long one: %v, pending resources %v", behind.GetState(), w)
	}
}

var dataJob = regexp.MustCompile(`data-job="([^"]+)"`)

// TestStatusPageAndExplainNameTheWindow: a job pushed behind a named
// maintenance window says so in explain, in ListJobs and on the status
// page, whose Gantt has one element per job reservation.
func TestStatusPageAndExplainNameTheWindow(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.TimeScale = 1 // the plan must not move while the test reads it
	c, n := startLoggedSite(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(n.HTTPHandler(nil))
	defer srv.Close()
	ctx := context.Background()
	now := time.Now()
	run, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{User: "alice", Procs: 6, EstimateSeconds: 1800}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "maintenance", Procs: 8,
		Start: timestamppb.New(now.Add(time.Hour)), End: timestamppb.New(now.Add(2 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	// 4 processors for 45 minutes: not before alice's job ends (30 min),
	// and not in the 30 minutes left before the window: after it.
	late, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{User: "bob", Procs: 4, EstimateSeconds: 2700}})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := c.Explain(ctx, &fedschedv1.ExplainRequest{JobId: late.GetJob().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if w := ex.GetJob().GetWait(); w.GetKind() != "fixed_reservation" || !strings.Contains(w.GetMessage(), `"maintenance"`) ||
		!strings.Contains(ex.GetSummary(), `"maintenance"`) {
		t.Errorf("explain of a job behind the window: wait %v, summary %q", w, ex.GetSummary())
	}
	jobs := listEvery(t, c)
	for _, j := range jobs {
		if j.GetId() == late.GetJob().GetId() && j.GetWait().GetKind() != "fixed_reservation" {
			t.Errorf("ListJobs: wait %v", j.GetWait())
		}
		if j.GetId() == run.GetJob().GetId() && j.GetWait() != nil {
			t.Errorf("a running job waits for %v", j.GetWait())
		}
	}

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got := map[string]int{}
	for _, m := range dataJob.FindAllStringSubmatch(page, -1) {
		got[m[1]]++
	}
	want := map[string]int{run.GetJob().GetId(): 1, late.GetJob().GetId(): 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Gantt data-job elements %v, want %v", got, want)
	}
	for _, s := range []string{"<svg", `data-reservation="t.r`, "maintenance", "site t", "alice", "bob", `class="now"`} {
		if !strings.Contains(page, s) {
			t.Errorf("status page lacks %q", s)
		}
	}
}
