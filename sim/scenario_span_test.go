package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSWF writes a trace of one-processor jobs submitted at the given
// times (seconds), each running 10 s of a 20 s estimate.
func writeSWF(t *testing.T, dir, name string, procs int, submits ...int64) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "; MaxProcs: %d\n", procs)
	for i, s := range submits {
		fmt.Fprintf(&b, "%d %d 0 10 1 -1 -1 1 20 -1 1 1 1 1 1 1 -1 -1\n", i+1, s)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScenarioSpan: the scenario's span, or a site's own, keeps the jobs
// submitted within it of the site's first job, whatever that job's time in
// the trace.
func TestScenarioSpan(t *testing.T) {
	dir := t.TempDir()
	a := writeSWF(t, dir, "a.swf", 4, 1000, 1050, 1099, 1100, 1500)
	b := writeSWF(t, dir, "b.swf", 4, 5000, 5010, 5020, 5030, 5040)
	for _, tc := range []struct {
		yaml  string
		wantA int
		wantB int
	}{
		{"span: 100s\nsites:\n  - {name: a, trace: %q}\n  - {name: b, trace: %q}\n", 3, 5},
		{"span: 101s\nsites:\n  - {name: a, trace: %q}\n  - {name: b, trace: %q, span: 25s}\n", 4, 3},
		{"sites:\n  - {name: a, trace: %q, span: 1s}\n  - {name: b, trace: %q}\n", 1, 5},
		{"sites:\n  - {name: a, trace: %q}\n  - {name: b, trace: %q}\n", 5, 5},
	} {
		sc, err := ParseScenario(fmt.Appendf(nil, tc.yaml, a, b))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := sc.Build()
		if err != nil {
			t.Fatal(err)
		}
		if got := []int{len(cfg.Sites[0].Jobs), len(cfg.Sites[1].Jobs)}; got[0] != tc.wantA || got[1] != tc.wantB {
			t.Errorf("%q: kept %v jobs, want [%d %d]", tc.yaml, got, tc.wantA, tc.wantB)
		}
	}
	if _, err := ParseScenario(fmt.Appendf(nil, "sites:\n  - {name: a, trace: %q, span: -5s}\n  - {name: b, trace: %q}\n", a, b)); err == nil || !strings.Contains(err.Error(), "sites[0].span") {
		t.Errorf("negative site span: err %v, want one naming sites[0].span", err)
	}
}

// TestScenarioPool: a pool transfer runs RunPool and refuses the settings
// it would ignore, naming them.
func TestScenarioPool(t *testing.T) {
	dir := t.TempDir()
	a := writeSWF(t, dir, "a.swf", 1, 0, 1, 2)
	b := writeSWF(t, dir, "b.swf", 4, 0)
	sc, err := ParseScenario(fmt.Appendf(nil, "transfer: p-easy\nsites:\n  - {name: a, trace: %q}\n  - {name: b, trace: %q}\n", a, b))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pool == nil || cfg.Pool.Policy.String() != "easy" {
		t.Fatalf("pool config %+v", cfg.Pool)
	}
	res, err := RunFederation(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Site a has one processor and three jobs at once: two go through
	// the pool to b.
	if mn, _ := res.Migrations(); mn[0][1] < 0.6 {
		t.Errorf("M_n = %v: want a's waiting jobs run at b", mn)
	}
	for _, bad := range []struct{ extra, field string }{
		{"latency: 5\n", "latency"},
		{"max_hops: 2\n", "max_hops"},
		{"max_candidates: 2\n", "max_candidates"},
	} {
		_, err := ParseScenario(fmt.Appendf(nil, "transfer: p-list\n%ssites:\n  - {name: a, trace: %q}\n  - {name: b, trace: %q}\n", bad.extra, a, b))
		if err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("%s: err %v, want one naming %s", bad.extra, err, bad.field)
		}
	}
	_, err = ParseScenario(fmt.Appendf(nil, "transfer: p-fcfs\nsites:\n  - {name: a, trace: %q, fixed: [{procs: 1, start: 0, end: 10}]}\n  - {name: b, trace: %q}\n", a, b))
	if err == nil || !strings.Contains(err.Error(), "sites[0].fixed") {
		t.Errorf("fixed with a pool: err %v, want one naming sites[0].fixed", err)
	}
}

// TestScenarioPullInterval: a scenario's pull_interval is the node's
// delegation.pull_interval (RQF's interval): whole seconds, only with
// transfer rqf, and it reaches the sites' agents.
func TestScenarioPullInterval(t *testing.T) {
	const sites = "sites:\n  - {name: a, trace: kth, procs: 100, span: 2d}\n  - {name: b, trace: ctc, procs: 430, span: 2d}\n"
	sc, err := ParseScenario([]byte("transfer: rqf\npull_interval: 5m\n" + sites))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PullSeconds != 300 {
		t.Fatalf("PullSeconds %d, want 300", cfg.PullSeconds)
	}
	slow, err := RunFederation(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PullSeconds = 0 // 60 s
	fast, err := RunFederation(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if slow.Messages["queue-request"] >= fast.Messages["queue-request"] {
		t.Errorf("queue requests every 5 min %d, every minute %d: the interval has no effect", slow.Messages["queue-request"], fast.Messages["queue-request"])
	}
	for _, bad := range []string{"transfer: rqf\npull_interval: 1500ms\n", "transfer: acf\npull_interval: 60s\n", "transfer: rqf\npull_interval: -1m\n"} {
		if _, err := ParseScenario([]byte(bad + sites)); err == nil || !strings.Contains(err.Error(), "line 2: pull_interval") {
			t.Errorf("%q: err %v, want one naming pull_interval at line 2", bad, err)
		}
	}
}
