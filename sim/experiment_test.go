package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// writeExperiment writes a two-site scenario on a small generated trace and
// an experiment file with the given grid and parallelism; it returns the
// experiment's path.
func writeExperiment(t *testing.T, grid string, parallel int) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("; MaxProcs: 8\n")
	for i := range 60 {
		// id submit wait run procs cpu mem reqprocs reqtime ...
		b.WriteString(strings.Join([]string{strconv.Itoa(i + 1), strconv.Itoa(i * 37), "0", strconv.Itoa(100 + 53*(i%7)), strconv.Itoa(1 + i%8), "-1", "-1", strconv.Itoa(1 + i%8), strconv.Itoa(400 + 10*(i%5)),
			"-1", "1", strconv.Itoa(1 + i%3), "1", "1", "1", "1", "-1", "-1"}, " ") + "\n")
	}
	tr := filepath.Join(dir, "t.swf")
	if err := os.WriteFile(tr, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := "name: two\nsites:\n  - {name: a, trace: " + tr + "}\n  - {name: b, trace: " + tr + ", time_scale: 0.5}\n"
	if err := os.WriteFile(filepath.Join(dir, "two.yaml"), []byte(sc), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := "name: e\nparallel: " + strconv.Itoa(parallel) + "\ngrid:\n  scenarios: [two.yaml]\n" + grid +
		"reference:\n  - {scenario: two, site: b, awrt_change: 10, utilization_change: -5}\n"
	p := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(p, []byte(exp), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExperimentGrid: the cells are the grid's product; every cell's rows
// are its scenario replayed federated and alone (the same figures a
// --scenario run gives); references attach to their site; the result does
// not depend on how many cells run at once.
func TestExperimentGrid(t *testing.T) {
	grid := "  transfers: [acf, shaking-g, serf]\n  seeds: [1, 2]\n"
	e, err := LoadExperiment(writeExperiment(t, grid, 0))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3*2*2 {
		t.Fatalf("%d rows, want 12 (3 transfers x 2 seeds x 2 sites)", len(rows))
	}
	for i, r := range rows {
		wantTransfer := []string{"acf", "shaking-g", "serf"}[i/4]
		if r.Transfer != wantTransfer || r.Seed != uint64(1+i/2%2) || r.Site != []string{"a", "b"}[i%2] {
			t.Errorf("row %d: %s seed %d site %s", i, r.Transfer, r.Seed, r.Site)
		}
		if (r.MaxCandidates == nil) != (r.Transfer != "acf") {
			t.Errorf("row %d (%s): max_candidates %v: want it exactly with a delegation protocol", i, r.Transfer, r.MaxCandidates)
		}
		if (r.StudyAWRTChange != nil) != (r.Site == "b") || r.Site == "b" && *r.StudyAWRTChange != 0.10 {
			t.Errorf("row %d: reference %v", i, r.StudyAWRTChange)
		}
	}
	// Cell shaking-g, seed 1 against a direct replay of its scenario.
	sc, err := LoadScenario(filepath.Join(e.dir, "two.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc.Transfer = "shaking-g"
	cfg, _ := sc.Build()
	fed, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rows[4].AWRTFederated, fed.OriginMetrics(0).AWRT; got != want {
		t.Errorf("shaking-g cell: AWRT %v, direct replay %v", got, want)
	}
	// One cell at a time gives the same rows.
	e1, _ := LoadExperiment(writeExperiment(t, grid, 1))
	rows1, err := e1.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows, rows1) {
		t.Error("rows differ between parallel 0 and parallel 1")
	}
	if tab := ReproductionTable(rows); strings.Count(tab, "\n") != 2+6 || !strings.Contains(tab, "| two | b | +10.00 |") {
		t.Errorf("reproduction table:\n%s", tab)
	}
}

// TestExperimentRuns: runs replicates every cell with ReplicationSeed's
// seeds, and Summary gives one line per cell and site over them.
func TestExperimentRuns(t *testing.T) {
	e, err := LoadExperiment(writeExperiment(t, "  transfers: [acf, p-easy]\n", 0))
	if err != nil {
		t.Fatal(err)
	}
	e.Runs = 3
	rows, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*3*2 {
		t.Fatalf("%d rows, want 12", len(rows))
	}
	for i, r := range rows {
		if run := i / 2 % 3; r.Run != run || r.Seed != ReplicationSeed(1, run) {
			t.Errorf("row %d: run %d seed %d, want run %d seed %d", i, r.Run, r.Seed, run, ReplicationSeed(1, run))
		}
	}
	sum := Summary(rows)
	if n := strings.Count(sum, "\n"); n != 2+4 || !strings.Contains(sum, "| two | p-easy |  | b | 3 |") {
		t.Errorf("summary:\n%s", sum)
	}
	// p-easy has no randomness: its interval is 0.
	if !strings.Contains(sum, "| two | p-easy |  | a | 3 | ") || !strings.Contains(strings.SplitN(sum, "| two | p-easy |  | a | 3 | ", 2)[1], "| 0.00 |") {
		t.Errorf("summary:\n%s", sum)
	}
}

// TestExperimentRefuses: a grid value the scenario would refuse is refused
// before anything runs, naming the field.
func TestExperimentRefuses(t *testing.T) {
	for _, tc := range []struct{ grid, want string }{
		{"  transfers: [bogus]\n", "transfer"},
		{"  transfers: [shaking-g]\n  max_candidates: [2]\n", "max_candidates"},
		{"  seeds: [1]\n  colour: [red]\n", "colour"},
		{"  transfers: [acf]\n  shaking_depths: [1]\n", "shaking_depth"},
	} {
		_, err := LoadExperiment(writeExperiment(t, tc.grid, 0))
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want a refusal naming %s", tc.grid, err, tc.want)
		}
	}
}

// BenchmarkStudyStrategies replays the study's three sites (KTH96, CTC96,
// SDSC00₁₁: 135,508 jobs) under each of its simulator-only strategies and
// reports the cost per job, the figure of the study's Table 7.1 (tGSF's
// decision time per job). Run with -benchtime=1x:
//
//	go test ./sim -run '^$' -bench StudyStrategies -benchtime=1x
func BenchmarkStudyStrategies(b *testing.B) {
	for _, tr := range []string{"p-easy", "central-full", "serf", "shaking-g"} {
		b.Run(tr, func(b *testing.B) {
			sc, err := LoadScenario("../scenarios/study/f9-shaking-g.yaml")
			if err != nil {
				b.Fatal(err)
			}
			sc.Transfer = tr
			cfg, err := sc.Build()
			if err != nil {
				b.Fatal(err)
			}
			jobs := 0
			for _, s := range cfg.Sites {
				jobs += len(s.Jobs)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := RunFederation(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*jobs), "ms/job")
		})
	}
}

// TestRunCellMergesAsRun: every cell replayed on its own (RunCell, what
// each task of a Slurm array runs) and merged gives Run's rows exactly,
// summary included; parts in another order, a missing one or a cell out
// of range are refused.
func TestRunCellMergesAsRun(t *testing.T) {
	e, err := LoadExperiment(writeExperiment(t, "  transfers: [acf, p-easy]\n  seeds: [1, 2]\n", 0))
	if err != nil {
		t.Fatal(err)
	}
	e.Runs = 2
	ctx := context.Background()
	want, err := e.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.NumCells()
	if err != nil || n != 8 {
		t.Fatalf("NumCells = %d, %v; want 8", n, err)
	}
	parts := make([][]ExperimentRow, n)
	for i := range n {
		if parts[i], err = e.RunCell(ctx, i); err != nil {
			t.Fatal(err)
		}
		for k := range parts[i] {
			parts[i][k].group = -1 // as read back from JSON: the merge restores it
		}
	}
	got, err := e.MergeCells(parts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || Summary(got) != Summary(want) {
		t.Fatalf("merged cells differ from Run:\n%v\n%v", got, want)
	}
	swapped := append([][]ExperimentRow{parts[1], parts[0]}, parts[2:]...)
	if _, err := e.MergeCells(swapped); !errors.Is(err, ErrBadConfig) {
		t.Errorf("parts out of order: %v", err)
	}
	if _, err := e.MergeCells(parts[:n-1]); !errors.Is(err, ErrBadConfig) {
		t.Errorf("a part missing: %v", err)
	}
	if _, err := e.RunCell(ctx, n); !errors.Is(err, ErrBadConfig) {
		t.Errorf("cell %d of %d: %v", n, n, err)
	}
}
