package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/sim"
)

// TestSimExperiment: --experiment writes the tidy CSV (one row per cell and
// site), its rows as JSON alone with --json -, and refuses the flags it
// does not use.
func TestSimExperiment(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.swf")
	swf := "; MaxProcs: 4\n1 0 0 10 2 -1 -1 2 20 -1 1 7 1 1 3 1 -1 -1\n2 1 0 10 4 -1 -1 4 20 -1 1 8 1 1 3 1 -1 -1\n3 2 0 10 1 -1 -1 1 20 -1 1 9 1 1 3 1 -1 -1\n"
	files := map[string]string{
		"a.swf":   swf,
		"sc.yaml": "name: sc\nsites:\n  - {name: a, trace: " + a + "}\n  - {name: b, trace: " + a + "}\n",
		"exp.yaml": "name: x\ngrid:\n  scenarios: [sc.yaml]\n  transfers: [p-easy, acf]\n" +
			"reference:\n  - {scenario: sc, site: a, awrt_change: 1, utilization_change: 2}\n" +
			// One figure alone, as the study's text gives some.
			"  - {scenario: sc, site: b, awrt_change: 3}\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exp, out, svg := filepath.Join(dir, "exp.yaml"), filepath.Join(dir, "out.csv"), filepath.Join(dir, "out.svg")
	if _, err := simCLI("--experiment", exp, "--csv", out, "--plot", svg); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "reference") {
		t.Errorf("plot: %v, %d bytes", err, len(b))
	}
	fh, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(fh).ReadAll()
	fh.Close()
	if err != nil || len(rows) != 1+4 || !slices.Equal(rows[0], sim.ExperimentCSVHeader) {
		t.Fatalf("rows %v, err %v", rows, err)
	}
	tr, mc := slices.Index(rows[0], "transfer"), slices.Index(rows[0], "max_candidates")
	if rows[1][tr] != "p-easy" || rows[1][mc] != "" || rows[3][tr] != "acf" || rows[3][mc] != "3" {
		t.Errorf("transfer and max_candidates cells: %v / %v", rows[1], rows[3])
	}
	js, err := simCLI("--experiment", exp, "--json", "-")
	if err != nil {
		t.Fatal(err)
	}
	var v []map[string]any
	if err := json.Unmarshal([]byte(js), &v); err != nil || len(v) != 4 {
		t.Fatalf("json: %v (%d rows)\n%s", err, len(v), js)
	}
	for _, args := range [][]string{
		{"--experiment", exp, "--csv", out, "--policy", "easy"},
		{"--experiment", exp, "--csv", out, "--seed", "3"},
		{"--experiment", exp, "--csv", out, "--runs", "0"},
		{"--experiment", exp},
	} {
		if _, err := simCLI(args...); err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
			t.Errorf("%v: err %v, want InvalidArgument", args, err)
		}
	}
}
