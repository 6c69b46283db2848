package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/sim"
)

// TestSimScenarioDemo: the demo scenario reports SLAs per site and in
// total; --runs adds the 95 % half-width of every SLA figure.
func TestSimScenarioDemo(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	csvPath := filepath.Join(dir, "jobs.csv")
	if _, err := run(t, "sim", "--scenario", "../../scenarios/demo.yaml", "--json", out, "--jobs-csv", csvPath, "--runs", "3"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Runs  int                          `json:"runs"`
		Sites []map[string]json.RawMessage `json:"sites"`
		Total struct {
			SLA map[string]float64 `json:"sla"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 3 || len(rep.Sites) != 3 {
		t.Fatalf("runs %d, %d sites", rep.Runs, len(rep.Sites))
	}
	for _, s := range rep.Sites {
		for _, k := range []string{"name", "procs", "alone", "federated", "awrt_change", "delegated_in", "delegated_out", "sla", "awrt_change_ci95"} {
			if _, ok := s[k]; !ok {
				t.Fatalf("site without %q: %s", k, b)
			}
		}
		var sla map[string]float64
		if err := json.Unmarshal(s["sla"], &sla); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"accepted", "overbooked", "met", "violated", "gain", "accepted_by_overbooking_peer"} {
			if _, ok := sla[k]; !ok {
				t.Fatalf("sla without %q", k)
			}
			if _, ok := sla[k+"_ci95"]; !ok {
				t.Fatalf("sla without %q with --runs", k+"_ci95")
			}
		}
	}
	if rep.Total.SLA["accepted"] < 500 || rep.Total.SLA["overbooked"] == 0 {
		t.Fatalf("totals: %v", rep.Total.SLA)
	}
	fh, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rows, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+3*600 || !slices.Contains(rows[0], "site") || !slices.Contains(rows[0], "route") { // every replication
		t.Fatalf("%d rows, header %v", len(rows), rows[0])
	}
}

// TestSimScenarioRefusesFlagsWithoutEffect: flags the scenario mode would
// ignore are refused, naming them.
func TestSimScenarioRefusesFlagsWithoutEffect(t *testing.T) {
	for _, flags := range [][]string{{"--policy", "easy"}, {"--seed", "4"}, {"--strategy", "backfill"}, {"--procs", "8"}} {
		_, err := run(t, append([]string{"sim", "--scenario", "../../scenarios/demo.yaml"}, flags...)...)
		if err == nil || !strings.Contains(err.Error(), flags[0]) || !strings.Contains(err.Error(), "InvalidArgument") {
			t.Errorf("%v: %v", flags, err)
		}
	}
	if _, err := run(t, "sim", "--scenario", "../../scenarios/demo.yaml", "--runs", "0"); err == nil {
		t.Error("--runs 0 accepted")
	}
}

// TestSimScenarioFailures: a scenario whose sites' processors fail reports
// the jobs failures hit (failed, failure_violations) in each site's sla
// object, with their 95 % half-widths under --runs; a scenario without
// failure rates has no such keys.
func TestSimScenarioFailures(t *testing.T) {
	b, err := os.ReadFile("../../scenarios/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := strings.ReplaceAll(string(b), "    fees:\n      enabled: true\n", "    fees:\n      enabled: true\n    failures: {failure_rate: 0.02, repair_rate: 0.5}\n")
	path := filepath.Join(dir, "failing.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	slaOf := func(path string, runs string) []map[string]float64 {
		return scenarioSLAs(t, path, "--runs", runs)
	}
	failed := 0.0
	for _, sla := range slaOf(path, "4") {
		for _, k := range []string{"failed", "failed_ci95", "failure_violations", "failure_violations_ci95"} {
			if _, ok := sla[k]; !ok {
				t.Fatalf("sla without %q: %v", k, sla)
			}
		}
		failed += sla["failed"]
	}
	if failed == 0 {
		t.Fatal("no job failed at sites whose processors fail")
	}
	for _, sla := range slaOf("../../scenarios/demo.yaml", "1") {
		if _, ok := sla["failed"]; ok {
			t.Fatalf("failed reported without failure rates: %v", sla)
		}
	}
}

// TestSimScenarioLease: a leasing scenario reports each site's leasing
// (requests, refusals, leases, peaks, leased area) in the table and in
// --json; another transfer reports none.
func TestSimScenarioLease(t *testing.T) {
	dir := t.TempDir()
	doc := "name: lease\ntransfer: %s\nspan: 10d\nsites:\n  - name: kth96\n    trace: kth\n    procs: 100\n  - name: ctc96\n    trace: ctc\n    procs: 430\n"
	for _, tr := range []string{"lease-clos", "p-easy"} {
		sc := filepath.Join(dir, tr+".yaml")
		if err := os.WriteFile(sc, []byte(strings.Replace(doc, "%s", tr, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Sites []struct {
				Name  string          `json:"name"`
				Lease *map[string]any `json:"lease"`
			} `json:"sites"`
		}
		text, b := scenarioJSON(t, sc, &rep)
		if tr != "lease-clos" {
			for _, s := range rep.Sites {
				if s.Lease != nil || strings.Contains(text, "leasing (") {
					t.Errorf("%s: site %s reports leasing: %s\n%s", tr, s.Name, b, text)
				}
			}
			continue
		}
		if !strings.Contains(text, "leasing (") {
			t.Errorf("no leasing table in:\n%s", text)
		}
		lent := 0.0
		for _, s := range rep.Sites {
			if s.Lease == nil {
				t.Fatalf("site %s without lease: %s", s.Name, b)
			}
			l := *s.Lease
			for _, k := range []string{"requests", "refused", "leases", "lent", "peak_leased_in_procs", "peak_leased_out_procs", "leased_area_in", "leased_area_out"} {
				if _, ok := l[k]; !ok {
					t.Fatalf("site %s lease without %q: %v", s.Name, k, l)
				}
			}
			lent += l["lent"].(float64)
		}
		if lent == 0 {
			t.Errorf("no lease in ten days of KTH96 and CTC96: %s", b)
		}
	}
}

// TestExecRecordsLease: the timeline plots count a job that ran on leased
// processors at each site with the processors it held there, and as
// waiting only at its own site.
func TestExecRecordsLease(t *testing.T) {
	job := sim.Record{Job: sim.Job{ID: 1, Submit: 10, Procs: 5, Runtime: 100, Estimate: 100}, Started: true, Start: 50, End: 150}
	res := &sim.FedResult{Sites: []sim.FedSite{{Name: "a", Procs: 4}, {Name: "b", Procs: 8}},
		Records: []sim.FedRecord{{Record: job, Origin: 0, Exec: 0, Leased: 3, Lender: 1}}}
	a, b := execRecords(res, 0), execRecords(res, 1)
	if len(a) != 1 || a[0].Procs != 2 || a[0].Submit != 10 {
		t.Errorf("at a: %+v, want 2 processors, waiting from 10", a)
	}
	if len(b) != 1 || b[0].Procs != 3 || b[0].Submit != 50 || b[0].Start != 50 {
		t.Errorf("at b: %+v, want 3 processors from 50, never waiting", b)
	}
	bins := sim.Timeline(b, 0, 200, 200)
	if bins[0].Busy != 3*100.0/200 || bins[0].Waiting != 0 {
		t.Errorf("b's timeline %+v", bins)
	}
}

// TestSimScenarioPrices: with a site that prices its quotes each site's sla
// has fees, price_earned and price_paid, the prices balance, and gain =
// fees + price_earned − price_paid − penalties (none here); without prices
// these keys are absent.
func TestSimScenarioPrices(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../scenarios/three-sites-sla-priced.yaml")
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "priced.yaml")
	if err := os.WriteFile(short, []byte(strings.Replace(string(b), "span: 60d", "span: 10d", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	slaOf := func(path string) []map[string]float64 { return scenarioSLAs(t, path) }
	var earned, paid float64
	for _, sla := range slaOf(short) {
		for _, k := range []string{"fees", "price_earned", "price_paid"} {
			if _, ok := sla[k]; !ok {
				t.Fatalf("sla without %q: %v", k, sla)
			}
		}
		if sla["violated"] == 0 && math.Abs(sla["gain"]-(sla["fees"]+sla["price_earned"]-sla["price_paid"])) > 1e-6 {
			t.Errorf("gain %v != fees %v + price earned %v - price paid %v", sla["gain"], sla["fees"], sla["price_earned"], sla["price_paid"])
		}
		earned += sla["price_earned"]
		paid += sla["price_paid"]
	}
	if earned == 0 || math.Abs(earned-paid) > 1e-6 {
		t.Errorf("prices earned %v, paid %v: want equal and not zero", earned, paid)
	}
	for _, sla := range slaOf("../../scenarios/demo.yaml") {
		if _, ok := sla["price_paid"]; ok {
			t.Fatalf("prices reported without pricing: %v", sla)
		}
	}
}

// scenarioSLAs runs the scenario at path (with args) and returns each
// site's sla object from --json.
func scenarioSLAs(t *testing.T, path string, args ...string) []map[string]float64 {
	t.Helper()
	var rep struct {
		Sites []struct {
			SLA map[string]float64 `json:"sla"`
		} `json:"sites"`
	}
	scenarioJSON(t, path, &rep, args...)
	var slas []map[string]float64
	for _, s := range rep.Sites {
		slas = append(slas, s.SLA)
	}
	return slas
}

// scenarioJSON runs `fedsched sim --scenario path --json F` (with args),
// decodes F into rep, and returns the text output and F's bytes.
func scenarioJSON(t *testing.T, path string, rep any, args ...string) (string, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	text, err := run(t, append([]string{"sim", "--scenario", path, "--json", out}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, rep); err != nil {
		t.Fatal(err)
	}
	return text, b
}
