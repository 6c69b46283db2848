package main

import (
	"context"
	"encoding/xml"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/config"
)

// liveSite runs a real node (simulated executor, real time) in-process and
// returns its API address.
func liveSite(t *testing.T, procs int) string {
	t.Helper()
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor = "live", t.TempDir(), procs, "simulated"
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- node.Launch(ctx, cfg, node.LaunchOptions{Listener: lis, Ready: ready}) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case addr := <-ready:
		return addr
	case err := <-done:
		t.Fatalf("node: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("node not ready")
	}
	return ""
}

// TestPlanJobsAndExplainOnALiveSite: the planned start, what a waiting job
// waits for (named jobs, a named window) and the plan's text and SVG
// pictures, as a user sees them on a live site.
func TestPlanJobsAndExplainOnALiveSite(t *testing.T) {
	addr := liveSite(t, 8)
	mustRun(t, "submit", "--addr", addr, "--procs", "6", "--estimate", "30m", "--user", "alice", "--", "true")
	start := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	end := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	mustRun(t, "reserve", "--addr", addr, "--procs", "8", "--start", start, "--end", end, "--name", "maintenance")
	mustRun(t, "submit", "--addr", addr, "--procs", "4", "--estimate", "20m", "--user", "bob", "--", "true")
	late := strings.TrimSpace(mustRun(t, "submit", "--addr", addr, "--procs", "4", "--estimate", "45m", "--user", "carol", "--json", "--", "true"))
	lateID := regexp.MustCompile(`"id": "([^"]+)"`).FindStringSubmatch(late)[1]

	jobs := mustRun(t, "jobs", "--addr", addr, "--format", "id,state,planned,reason")
	lines := strings.Split(strings.TrimSpace(jobs), "\n")
	if len(lines) != 4 {
		t.Fatalf("jobs:\n%s", jobs)
	}
	// running first, then by planned start; planned starts are times, not "-".
	if !strings.Contains(lines[1], "RUNNING") || !strings.Contains(lines[2], "live.000000000002") || !strings.Contains(lines[3], lateID) {
		t.Errorf("order:\n%s", jobs)
	}
	timeZ := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`)
	for _, l := range lines[2:] {
		if !timeZ.MatchString(l) {
			t.Errorf("a waiting job without a planned start (UTC, with its zone): %q", l)
		}
	}
	if !strings.Contains(lines[2], "resources: processors held by live.000000000001 until") {
		t.Errorf("bob's job should wait for alice's: %q", lines[2])
	}
	if !strings.Contains(lines[3], `fixed_reservation: behind the fixed reservation "maintenance"`) {
		t.Errorf("carol's job should wait behind the window: %q", lines[3])
	}
	ex := mustRun(t, "explain", "--addr", addr, lateID)
	if !strings.Contains(ex, `"maintenance"`) || !strings.Contains(ex, "waits for") || !strings.Contains(ex, "0 (reserved for its full estimate)") {
		t.Errorf("explain:\n%s", ex)
	}

	plan := mustRun(t, "plan", "--addr", addr, "--width", "40")
	for _, want := range []string{"plan of site live", "live.000000000001", "running", "█", "▓", "╳", "maintenance", "load", "waiting:"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	svg := filepath.Join(t.TempDir(), "plan.svg")
	mustRun(t, "plan", "--addr", addr, "--svg", svg)
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil || strings.Count(string(b), "data-job=") != 3 {
		t.Errorf("plan --svg: %v, %d job elements", err, strings.Count(string(b), "data-job="))
	}
}
