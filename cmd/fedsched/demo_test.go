package main

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fedsched/fedsched/sim"
	"github.com/fedsched/fedsched/swf"
)

// TestDemo runs `fedsched demo` in-process with a small replay and checks
// its summary table and that it leaves no temporary directory behind.
func TestDemo(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp) // os.MkdirTemp("", ...) makes the demo's directory here
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs([]string{"demo", "--jobs", "60", "--time-scale", "400", "--seed", "3"})
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	t.Logf("demo took %v:\n%s", time.Since(began).Round(time.Millisecond), out.String())
	text := out.String()
	var header string
	rows := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "site" {
			header = line
		}
		rows[f[0]] = len(f) == 8 // a name and seven numbers
	}
	for _, col := range []string{"accepted", "overbooked", "delegated in", "delegated out", "met", "violated", "gain"} {
		if !strings.Contains(header, col) {
			t.Errorf("summary header %q lacks %q", header, col)
		}
	}
	for _, row := range []string{"alpha", "beta", "gamma", "total"} {
		if !rows[row] {
			t.Errorf("no summary row for %s", row)
		}
	}
	if !strings.Contains(text, "60 jobs submitted") {
		t.Errorf("no totals line")
	}
	for _, want := range []string{"from the 2000 KTH jobs before these", "live (above)", "simulated, as live", "simulated, no federation",
		"simulated, no overbooking", "simulated, neither", "federation bought", "Start promised at submission against the actual start, live"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// Not a terminal: plain progress lines on stderr.
	if !strings.Contains(errOut.String(), "demo: ") {
		t.Errorf("no progress lines on stderr: %q", errOut.String())
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{{"--jobs", "5"}, {"--time-scale", "0"}, {"--seed", "0"}, {"extra"}} {
		root := newRootCmd()
		root.SetArgs(append([]string{"demo"}, args...))
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.HasPrefix(errorLine(err), "InvalidArgument:") {
			t.Errorf("demo %v: %v", args, err)
		}
	}
}

// TestDemoScenarioFile: scenarios/demo.yaml is the scenario the demo
// simulates with its default flags, so that its figures are the demo's.
func TestDemoScenarioFile(t *testing.T) {
	file, err := sim.LoadScenario("../../scenarios/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := demoScenario(demoFlags{jobs: 600, timeScale: 500, seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(demo)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("scenarios/demo.yaml is not the demo's scenario:\n--- file\n%s\n--- demo\n%s", a, b)
	}
}

// TestDemoOverbooksWithHistory: the demo's overbooking sites overbook
// because their statistics are seeded from the trace's history; without
// it (every site starts empty and needs min_samples first) the same jobs
// overbook less. The simulated counterfactuals differ as they say.
func TestDemoOverbooksWithHistory(t *testing.T) {
	f := demoFlags{jobs: 600, timeScale: 500, seed: 1}
	rows, err := simulateDemo(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]sim.FedSLA{}
	for _, r := range rows {
		byName[r.what] = r.sla
	}
	live, noFed, noOB, neither := byName["simulated, as live"], byName["simulated, no federation"], byName["simulated, no overbooking"], byName["simulated, neither"]
	if live.Overbooked == 0 || noFed.Overbooked == 0 {
		t.Errorf("no job overbooked with the history: as live %d, no federation %d", live.Overbooked, noFed.Overbooked)
	}
	if noOB.Overbooked != 0 || neither.Overbooked != 0 {
		t.Errorf("overbooked without overbooking: %d, %d", noOB.Overbooked, neither.Overbooked)
	}
	if noFed.Rejected <= live.Rejected {
		t.Errorf("alone the sites reject %d, federated %d: the comparison shows nothing", noFed.Rejected, live.Rejected)
	}
	sc, err := demoScenario(f)
	if err != nil {
		t.Fatal(err)
	}
	sc.Workload.History = 0
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.RunFederation(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cold := 0
	for k := range cfg.Sites {
		cold += r.SLA(k).Overbooked
	}
	if cold >= live.Overbooked {
		t.Errorf("overbooked %d without the history, %d with it", cold, live.Overbooked)
	}
}

// TestDemoHistoryFileMatchesSimulator: the overbooking.history file the
// demo gives its nodes holds the samples its simulator seeds the same sites
// with, in the order the node learns them (by end: submit + wait +
// runtime, node.seedHistory).
func TestDemoHistoryFileMatchesSimulator(t *testing.T) {
	f := demoFlags{jobs: 600, timeScale: 500, seed: 1}
	ts := demoSlice(f)
	_, info, err := ts.Build()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "history.swf")
	n, err := writeDemoHistory(ts, info, path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := swf.ReadFile(path, swf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n != demoHistoryJobs || len(tr.Jobs) != n {
		t.Fatalf("wrote %d jobs, read %d, want %d", n, len(tr.Jobs), demoHistoryJobs)
	}
	jobs := slices.Clone(tr.Jobs)
	slices.SortStableFunc(jobs, func(a, b swf.Job) int {
		return cmp.Compare(a.Submit+max(a.Wait, 0)+a.Runtime, b.Submit+max(b.Wait, 0)+b.Runtime)
	})
	sc, err := demoScenario(f)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Sites {
		if s.Overbooking == nil {
			continue
		}
		h := s.Overbooking.History
		if len(h) != len(jobs) {
			t.Fatalf("%s: simulator seeds %d samples, the file has %d", s.Name, len(h), len(jobs))
		}
		for i, j := range jobs {
			if j.ReqTime != h[i].Job.Estimate || j.Runtime != h[i].Ran || j.Procs() != int64(h[i].Job.Procs) || j.Status == 5 {
				t.Fatalf("%s sample %d: file estimate %d ran %d procs %d status %d, simulator %+v", s.Name, i, j.ReqTime, j.Runtime, j.Procs(), j.Status, h[i])
			}
		}
	}
}
