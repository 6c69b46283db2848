package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/sim"
)

func TestSimGanttAndStartAccuracy(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "g.svg")
	out := mustRun(t, "sim", "--trace", "kth", "--span", "20d", "--gantt", svg, "--from", "864000", "--to", "871200")
	if !strings.Contains(out, "start accuracy") || !strings.Contains(out, "conservative") {
		t.Errorf("sim output lacks the start accuracy:\n%s", out)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil {
		t.Fatalf("--gantt: not XML: %v", err)
	}
	if n := strings.Count(string(b), "data-job="); n < 10 {
		t.Errorf("--gantt: %d jobs drawn in two hours of KTH", n)
	}
	if _, err := run(t, "sim", "--trace", "kth", "--span", "2d", "--gantt", svg, "--from", "10", "--to", "5"); err == nil || !strings.Contains(errorLine(err), "InvalidArgument") {
		t.Errorf("--from after --to: %v", err)
	}
	plot := filepath.Join(dir, "acc.svg")
	out = mustRun(t, "sim", "--trace", "kth", "--span", "20d", "--start-accuracy-plot", plot)
	if !strings.Contains(out, "easy") || !strings.Contains(out, "late > 1 h") {
		t.Errorf("--start-accuracy-plot output:\n%s", out)
	}
	if st, err := os.Stat(plot); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
}

// readSVG reads an SVG file the plots wrote and checks that it is XML and
// names fonts every desktop has (Liberation Sans or its metric twins).
func readSVG(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil {
		t.Fatalf("%s: not XML: %v", path, err)
	}
	s := string(b)
	if !strings.Contains(s, svgFontFamily) || strings.Contains(s, "font-family:Liberation Serif") || strings.Contains(s, "font-family:Liberation Sans;") {
		t.Errorf("%s: text does not fall back to Arial/Helvetica", path)
	}
	return s
}

func TestSimReplayPlots(t *testing.T) {
	dir := t.TempDir()
	u, q := filepath.Join(dir, "u.svg"), filepath.Join(dir, "q.svg")
	mustRun(t, "sim", "--trace", "kth", "--span", "20d", "--utilisation-plot", u, "--queue-plot", q)
	us, qs := readSVG(t, u), readSVG(t, q)
	if !strings.Contains(us, "utilisation over time") || !strings.Contains(us, "3-hour bins") {
		t.Errorf("utilisation plot: title or automatic 3-hour bins (20 days make 480 1-hour bins, more than 400) missing")
	}
	if !strings.Contains(qs, "queue length over time") || !strings.Contains(qs, "waiting jobs") {
		t.Errorf("queue plot: title or axis missing")
	}
	mustRun(t, "sim", "--trace", "kth", "--span", "20d", "--queue-plot", q, "--from", "86400", "--to", "172800", "--plot-bin", "10m")
	if qs = readSVG(t, q); !strings.Contains(qs, "10-minute bins") || !strings.Contains(qs, "hours") {
		t.Errorf("one day at --plot-bin 10m: want hours on the axis and 10-minute bins")
	}
	for _, bad := range [][]string{{"--plot-bin", "0"}, {"--plot-bin", "soon"}, {"--from", "100", "--to", "50"}} {
		args := append([]string{"sim", "--trace", "kth", "--span", "2d", "--queue-plot", q}, bad...)
		if _, err := run(t, args...); err == nil || !strings.Contains(errorLine(err), "InvalidArgument") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestSLAStartAccuracy: an SLA experiment reports the start accuracy of
// the overbooking strategy and of its baseline, and plots both.
func TestSLAStartAccuracy(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "acc.svg")
	js := filepath.Join(dir, "out.json")
	out := mustRun(t, "sim", "--trace", "kth", "--strategy", "heuristic-overbook", "--pof-max", "0.5", "--runs", "2", "--jobs", "300",
		"--start-accuracy-plot", plot, "--json", js)
	for _, want := range []string{"conservative + overbooking (heuristic-overbook)", "conservative, no overbooking (heuristic-plan)", "late > 1 h"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Sites []struct {
			SLA struct {
				Overbooked    float64            `json:"overbooked"`
				StartAccuracy *sim.StartAccuracy `json:"start_accuracy"`
				Baseline      struct {
					StartAccuracy *sim.StartAccuracy `json:"start_accuracy"`
				} `json:"baseline"`
			} `json:"sla"`
		} `json:"sites"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Sites) != 1 {
		t.Fatalf("json: %v", err)
	}
	s := rep.Sites[0].SLA
	if s.Overbooked == 0 || s.StartAccuracy == nil || s.Baseline.StartAccuracy == nil || s.StartAccuracy.Jobs == 0 {
		t.Fatalf("start accuracy missing or nothing overbooked: %+v", s)
	}
	if svg := readSVG(t, plot); !strings.Contains(svg, "with and without overbooking") || !strings.Contains(svg, "no overbooking (heuristic-plan)") {
		t.Errorf("plot lacks the two strategies")
	}
	if _, err := run(t, "sim", "--trace", "kth", "--strategy", "heuristic-overbook", "--sweep", filepath.Join(dir, "s"), "--start-accuracy-plot", plot); err == nil {
		t.Error("--sweep with --start-accuracy-plot accepted")
	}
}

// TestSweepPlot: the sweep's plot has an error bar per point and its
// legend beside the curves.
func TestSweepPlot(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "s")
	mustRun(t, "sim", "--trace", "kth", "--strategy", "heuristic-overbook", "--runs", "2", "--jobs", "100", "--sweep", prefix)
	svg := readSVG(t, prefix+".svg")
	for _, want := range []string{"penalty = 0.5 x fee", "penalty = 4 x fee", "95 % interval"} {
		if !strings.Contains(svg, want) {
			t.Errorf("sweep plot lacks %q", want)
		}
	}
}

// TestScenarioPlots: a scenario's plots have a panel per site, alone and
// federated; flags that mean nothing with --scenario are still refused.
func TestScenarioPlots(t *testing.T) {
	dir := t.TempDir()
	u, q := filepath.Join(dir, "u.svg"), filepath.Join(dir, "q.svg")
	mustRun(t, "sim", "--scenario", "../../scenarios/demo.yaml", "--utilisation-plot", u, "--queue-plot", q, "--plot-bin", "5m")
	for _, path := range []string{u, q} {
		svg := readSVG(t, path)
		for _, want := range []string{"alpha (64 processors)", "beta (32 processors)", "gamma (16 processors)", "alone (dashed) and federated (filled)", "5-minute bins"} {
			if !strings.Contains(svg, want) {
				t.Errorf("%s lacks %q", filepath.Base(path), want)
			}
		}
	}
	if _, err := run(t, "sim", "--scenario", "../../scenarios/demo.yaml", "--gantt", u); err == nil || !strings.Contains(errorLine(err), "--gantt") {
		t.Errorf("--gantt with --scenario: %v", err)
	}
}
