package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSimJobsCSVEveryMode: --jobs-csv writes the same tidy columns in a
// plain replay, an SLA experiment and a scenario, one row per job, with
// empty cells (never 0) for what does not apply, and wait and slowdown
// consistent with start and submit.
func TestSimJobsCSVEveryMode(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.swf")
	swf := "; MaxProcs: 4\n1 0 0 10 2 -1 -1 2 20 -1 1 7 1 1 3 1 -1 -1\n2 1 0 10 4 -1 -1 4 20 -1 1 8 1 1 3 1 -1 -1\n3 2 0 10 1 -1 -1 1 20 -1 1 9 1 1 3 1 -1 -1\n"
	if err := os.WriteFile(a, []byte(swf), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := filepath.Join(dir, "sc.yaml")
	if err := os.WriteFile(sc, []byte("transfer: shaking-g\nsites:\n  - {name: a, trace: "+a+"}\n  - {name: b, trace: "+a+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Leasing: at 1, a's job 2 (4 procs) finds 2 idle at a and leases 2
	// from b (idle, nothing queued yet); b's job 2 then finds a with none.
	scLease := filepath.Join(dir, "lease.yaml")
	if err := os.WriteFile(scLease, []byte("transfer: lease-blos\nsites:\n  - {name: a, trace: "+a+"}\n  - {name: b, trace: "+a+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		rows int
	}{
		{[]string{"--trace", a, "--policy", "easy"}, 3},
		{[]string{"--scenario", sc}, 6},
		{[]string{"--scenario", scLease}, 6},
		{[]string{"--scenario", sc, "--runs", "2"}, 12},
		{[]string{"--trace", "kth", "--strategy", "backfill", "--jobs", "40", "--runs", "2", "--train-jobs", "50"}, 80},
	} {
		path := filepath.Join(dir, "jobs.csv")
		if _, err := simCLI(append(tc.args, "--jobs-csv", path)...); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(fh).ReadAll()
		fh.Close()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !slices.Equal(rows[0], jobsCSVHeader) || len(rows) != 1+tc.rows {
			t.Fatalf("%v: %d rows, header %v", tc.args, len(rows)-1, rows[0])
		}
		col := map[string]int{}
		for i, h := range rows[0] {
			col[h] = i
		}
		leased := 0
		for _, r := range rows[1:] {
			if r[col["leased_procs"]] != "" || r[col["lender_site"]] != "" {
				if r[col["leased_procs"]] != "2" || r[col["lender_site"]] != "b" || r[col["site"]] != "a" || r[col["id"]] != "2" {
					t.Fatalf("%v: leased row %v, want a's job 2 with 2 processors from b", tc.args, r)
				}
				leased++
			}
			started := r[col["started"]] == "true"
			if !started {
				for _, c := range []string{"start_s", "wait_s", "bounded_slowdown"} {
					if r[col[c]] != "" {
						t.Fatalf("%v: a job that never started has %s %q, want empty: %v", tc.args, c, r[col[c]], r)
					}
				}
				continue
			}
			start, _ := strconv.ParseInt(r[col["start_s"]], 10, 64)
			submit, _ := strconv.ParseInt(r[col["submit_s"]], 10, 64)
			wait, err := strconv.ParseInt(r[col["wait_s"]], 10, 64)
			bsld, err2 := strconv.ParseFloat(r[col["bounded_slowdown"]], 64)
			if err != nil || err2 != nil || wait != start-submit || bsld < 1 || r[col["site"]] == "" || r[col["user"]] == "" {
				t.Fatalf("%v: row %v", tc.args, r)
			}
		}
		if want := tc.args[len(tc.args)-1] == scLease; (leased == 1) != want {
			t.Fatalf("%v: %d rows with a lease, want %v", tc.args, leased, want)
		}
	}
}

// TestSimMetricsAbsentNotZero: an SLA experiment computes no metric of the
// site as a whole, so its JSON site object has none (no awrt_s: 0), and
// each run's metrics are reported.
func TestSimMetricsAbsentNotZero(t *testing.T) {
	out, err := simCLI("--trace", "kth", "--strategy", "backfill", "--jobs", "40", "--runs", "2", "--train-jobs", "50", "--json", "-")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Sites []map[string]json.RawMessage `json:"sites"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	site := rep.Sites[0]
	for _, k := range []string{"awrt_s", "awwt_s", "utilization", "jobs", "makespan_s"} {
		if v, ok := site[k]; ok {
			t.Errorf("strategy run reports %s = %s; it computes none for the site as a whole", k, v)
		}
	}
	var sla struct {
		RunMetrics []map[string]float64 `json:"run_metrics"`
	}
	if err := json.Unmarshal(site["sla"], &sla); err != nil {
		t.Fatal(err)
	}
	if len(sla.RunMetrics) != 2 || sla.RunMetrics[0]["awrt_s"] <= 0 {
		t.Errorf("run_metrics %v, want two runs with their AWRT", sla.RunMetrics)
	}
}

// TestSimRefusesFlagsOfOtherModes: each mode refuses the flags it does not
// use, naming them.
func TestSimRefusesFlagsOfOtherModes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--trace", "kth", "--runs", "3"}, "--runs"},
		{[]string{"--trace", "kth", "--pof-max", "0.2"}, "--pof-max"},
		{[]string{"--trace", "kth", "--strategy", "backfill", "--policy", "easy"}, "--policy"},
		{[]string{"--trace", "kth", "--strategy", "backfill", "--gantt", "x.svg"}, "--gantt"},
		{[]string{"--trace", "kth", "--strategy", "backfill", "--sweep", "p", "--jobs-csv", "x.csv"}, "--jobs-csv"},
		{[]string{"--scenario", "../../scenarios/study/f9-shaking-g.yaml", "--sanitize"}, "--sanitize"},
		{[]string{"--trace", "kth", "--start-accuracy-plot", "a.svg", "--jobs-csv", "x.csv"}, "--jobs-csv"},
		{[]string{"--trace", "kth", "--policy", "easy", "--forecast", "oracle"}, "--forecast"},
		{[]string{"--trace", "kth", "--rule4", "drop"}, "--rule4"},
		{[]string{"--trace", "kth", "--seed", "3"}, "--seed"},
		{[]string{"--trace", "kth", "--plot-bin", "1h"}, "--plot-bin"},
		{[]string{"--trace", "kth", "--from", "10"}, "--from"},
		{[]string{"--scenario", "../../scenarios/demo.yaml", "--to", "100"}, "--to"},
	} {
		_, err := simCLI(tc.args...)
		if err == nil || !strings.Contains(err.Error(), "InvalidArgument") || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: err %v, want InvalidArgument naming %s", tc.args, err, tc.flag)
		}
	}
}

// TestSimJSONKeysSnakeCase: every key of --json is snake_case, in every
// mode.
func TestSimJSONKeysSnakeCase(t *testing.T) {
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				for _, r := range k {
					if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
						t.Errorf("key %s.%s is not snake_case", path, k)
						break
					}
				}
				walk(e, path+"."+k)
			}
		case []any:
			for _, e := range x {
				walk(e, path+"[]")
			}
		}
	}
	for _, args := range [][]string{
		{"--trace", "kth", "--span", "3d", "--sanitize", "--policy", "edf", "--fixed-reservations", "24h,1h"},
		{"--trace", "kth", "--strategy", "heuristic-overbook", "--jobs", "40", "--runs", "2", "--train-jobs", "100"},
		{"--scenario", "../../scenarios/demo.yaml"},
	} {
		out, err := simCLI(append(args, "--json", "-")...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		walk(v, "")
	}
}
