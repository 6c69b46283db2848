package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simCLI runs `fedsched sim` in-process.
func simCLI(args ...string) (string, error) {
	cmd := newSimCmd()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func readSimJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Sites []map[string]any `json:"sites"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Sites) != 1 {
		t.Fatalf("%d sites", len(r.Sites))
	}
	return r.Sites[0]
}

func TestSimDeadlinePolicies(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--policy", "edf", "--deadline-model", "modal"},
		{"--policy", "lttr", "--forecast", "estimate", "--offered-load", "0.8"},
	} {
		path := filepath.Join(dir, "out.json")
		out, err := simCLI(append([]string{"--trace", "kth", "--sanitize", "--json", path}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out, "deadlines met") {
			t.Fatalf("%v: no deadline table:\n%s", args, out)
		}
		s := readSimJSON(t, path)
		met, _ := s["deadlines_met"].(float64)
		if s["deadline_jobs"] != s["jobs"] || !(met > 0 && met <= 1) || s["mean_tardiness_s"] == nil {
			t.Fatalf("%v: site %v", args, s)
		}
		if want := map[string]string{"edf": "modal", "lttr": "uniform"}[args[1]]; s["deadline_model"] != want {
			t.Fatalf("%v: deadline model %v, want %s", args, s["deadline_model"], want)
		}
	}
	// Without deadlines nothing changes: no deadline fields.
	// (FCFS is the fastest replay.)
	path := filepath.Join(dir, "plain.json")
	if _, err := simCLI("--trace", "kth", "--policy", "fcfs", "--json", path); err != nil {
		t.Fatal(err)
	}
	if s := readSimJSON(t, path); s["deadlines_met"] != nil || s["deadline_model"] != nil {
		t.Fatalf("deadline fields without deadlines: %v", s)
	}
}

func TestSimDeadlineFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--policy", "edf", "--deadline-model", "none"},
		{"--policy", "lttr", "--deadline-model", "tight"},
		{"--policy", "lttr", "--forecast", "psychic"},
		{"--policy", "easy", "--offered-load", "-1"},
		{"--strategy", "heuristic-overbook", "--stats", "tea-leaves"},
		{"--strategy", "heuristic-overbook", "--deadline-model", "modal"},
	} {
		_, err := simCLI(append([]string{"--trace", "kth"}, args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), "InvalidArgument") {
			t.Fatalf("%v: %v, want InvalidArgument", args, err)
		}
	}
}

func TestSimSLAForecastStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sla.json")
	out, err := simCLI("--trace", "kth", "--strategy", "heuristic-overbook", "--stats", "forecast", "--pof-max", "0.5",
		"--runs", "1", "--jobs", "300", "--train-jobs", "800", "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "forecast statistics") {
		t.Fatalf("output:\n%s", out)
	}
	sla, _ := readSimJSON(t, path)["sla"].(map[string]any)
	if sla["stats"] != "forecast" || sla["baseline"] == nil {
		t.Fatalf("sla %v", sla)
	}
}

// TestSimJSONIsByteIdentical runs the same command twice and compares the
// JSON byte for byte, and checks the contract's fields and units.
func TestSimJSONIsByteIdentical(t *testing.T) {
	dir := t.TempDir()
	var outs [2][]byte
	for i := range outs {
		path := filepath.Join(dir, "out"+string(rune('a'+i))+".json")
		if _, err := simCLI("--trace", "kth", "--policy", "easy", "--sanitize", "--json", path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = b
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("two runs wrote different JSON")
	}
	site := readSimJSON(t, filepath.Join(dir, "outa.json"))
	for _, k := range []string{"name", "procs", "jobs", "awrt_s", "awwt_s", "utilization", "makespan_s", "bounded_slowdown", "dropped"} {
		if _, ok := site[k]; !ok {
			t.Errorf("JSON site object lacks %q", k)
		}
	}
	if u := site["utilization"].(float64); u <= 0 || u > 1 {
		t.Errorf("utilization %v is not a fraction", u)
	}
	if site["jobs"].(float64) != 28467 || site["dropped"].(float64) != 9 {
		t.Errorf("jobs %v dropped %v, want 28467 and 9", site["jobs"], site["dropped"])
	}
}

// TestSimTrainJobsNone: --train-jobs none starts every run from empty
// statistics (0 and all mean every earlier job). Without learning nothing
// is then ever overbooked; trained on the prefix, jobs are.
func TestSimTrainJobsNone(t *testing.T) {
	dir := t.TempDir()
	overbooked := map[string]float64{}
	for _, train := range []string{"none", "all"} {
		path := filepath.Join(dir, train+".json")
		if _, err := simCLI("--trace", "kth", "--strategy", "heuristic-overbook", "--pof-max", "0.5", "--runs", "2", "--jobs", "200",
			"--train-jobs", train, "--json", path); err != nil {
			t.Fatal(err)
		}
		sla, _ := readSimJSON(t, path)["sla"].(map[string]any)
		overbooked[train], _ = sla["overbooked"].(float64)
	}
	if overbooked["none"] != 0 || overbooked["all"] == 0 {
		t.Fatalf("overbooked per run: %v; want none without a history, some with one", overbooked)
	}
	for _, args := range [][]string{{"--train-jobs", "-3"}, {"--train-jobs", "some"}, {"--min-samples", "0"}} {
		_, err := simCLI(append([]string{"--trace", "kth", "--strategy", "heuristic-overbook"}, args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), "InvalidArgument") {
			t.Fatalf("%v: %v, want InvalidArgument", args, err)
		}
	}
}

// TestSimLibraStrategies runs Yeo's baselines as SLA experiments: each
// against Libra, with Yeo's utility, no runtime statistics and no start
// accuracy; the planning strategies' flags are refused.
func TestSimLibraStrategies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libra.json")
	out, err := simCLI("--trace", "kth", "--strategy", "libra-sla", "--urgency", "libra-sla", "--runs", "2", "--jobs", "300", "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "time-shared nodes") || !strings.Contains(out, "urgency classes") {
		t.Fatalf("output:\n%s", out)
	}
	site := readSimJSON(t, path)
	sla, _ := site["sla"].(map[string]any)
	base, _ := sla["baseline"].(map[string]any)
	if site["policy"] != "time-shared" || sla["strategy"] != "libra-sla" || base["strategy"] != "libra" ||
		sla["utility"] == nil || sla["stats"] != nil || sla["start_accuracy"] != nil || sla["accepted"].(float64) <= 0 {
		t.Fatalf("site %v", site)
	}
	for _, args := range [][]string{
		{"--strategy", "libra-riskd", "--pof-max", "0.2"},
		{"--strategy", "libra", "--fixed-reservations", "6h,1h"},
		{"--strategy", "libra", "--urgency", "panic"},
	} {
		if _, err := simCLI(append([]string{"--trace", "kth"}, args...)...); err == nil || !strings.HasPrefix(err.Error(), "InvalidArgument") {
			t.Fatalf("%v: %v, want InvalidArgument", args, err)
		}
	}
}
