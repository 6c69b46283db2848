package node_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// chromium finds a headless browser; without one the test is skipped with
// a message, unless FEDSCHED_REQUIRE_CHROMIUM=1 (CI installs chromium and
// sets it) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("FEDSCHED_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH, and FEDSCHED_REQUIRE_CHROMIUM=1")
	}
	t.Skip("SKIPPED: the status page's browser test needs chromium on PATH (apt-get install -y chromium; .ci/run installs it)")
	return ""
}

var consoleLine = regexp.MustCompile(`:CONSOLE[:(]`)

// TestStatusPageInABrowser loads the status page in headless chromium: it
// must load without a console message (the page has no script, so any
// message is an error: a failed resource, a blocked style), show the site
// and its jobs, and draw one Gantt element per job reservation.
func TestStatusPageInABrowser(t *testing.T) {
	bin := chromium(t)
	cfg := testConfig(t.TempDir())
	cfg.TimeScale = 1
	c, n := startLoggedSite(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(n.HTTPHandler(nil))
	defer srv.Close()
	ctx := context.Background()
	now := time.Now()
	if _, err := c.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "maintenance", Procs: 8,
		Start: timestamppb.New(now.Add(3 * time.Hour)), End: timestamppb.New(now.Add(4 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, sp := range []*fedschedv1.JobSpec{
		{User: "alice", Procs: 6, EstimateSeconds: 3600},
		{User: "bob", Procs: 4, EstimateSeconds: 1800},
		{User: "carol", Procs: 8, EstimateSeconds: 7200},
		{User: "dave", Procs: 2, EstimateSeconds: 600},
	} {
		r, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
		if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_PENDING && r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_RUNNING {
			t.Fatalf("job %d: %v %v", i, r, err)
		}
		ids = append(ids, r.GetJob().GetId())
	}
	bctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(bctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
		"--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(), "--enable-logging=stderr", "--v=0",
		"--dump-dom", srv.URL+"/")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if consoleLine.MatchString(line) {
			t.Errorf("console message while loading the page: %s", line)
		}
	}
	page := string(dom)
	got := map[string]int{}
	for _, m := range dataJob.FindAllStringSubmatch(page, -1) {
		got[m[1]]++
	}
	if len(got) != len(ids) {
		t.Errorf("the Gantt shows %d jobs, want %d: %v", len(got), len(ids), got)
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("job %s has %d Gantt elements, want 1", id, got[id])
		}
		if strings.Count(page, id) < 2 {
			t.Errorf("job %s is not in the jobs table", id)
		}
	}
	for _, s := range []string{"site t", "<svg", `data-reservation=`, "maintenance", "RUNNING", "PENDING"} {
		if !strings.Contains(page, s) {
			t.Errorf("the rendered page lacks %q", s)
		}
	}
}
