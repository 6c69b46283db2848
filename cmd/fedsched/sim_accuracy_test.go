package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
