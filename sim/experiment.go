package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Experiment file (fedsched sim --experiment): a grid of federation
// scenarios × transfer policies × parameters × seeds, every cell replayed
// federated and with every site alone, on all cores, into one tidy table
// (one row per cell and site). docs/simulation.md documents the format.
type ExperimentFile struct {
	// Name names the experiment in its rows.
	Name string `yaml:"name"`
	// Grid holds the axes; the cells are their product.
	Grid ExperimentGrid `yaml:"grid"`
	// Reference lists published figures to set beside ours (the study's
	// tables), by scenario name and site.
	Reference []ExperimentReference `yaml:"reference"`
	// Parallel bounds the cells replayed at once (default: every core).
	Parallel int `yaml:"parallel"`
	// Runs replicates every cell this many times (default 1), replication
	// i with the seed ReplicationSeed(seed, i), as --scenario --runs does;
	// Summary then gives each figure's mean and 95 % interval.
	Runs int `yaml:"runs"`

	dir string // the file's directory: scenario paths are relative to it
}

// ExperimentGrid are the axes of an experiment. Scenarios is required;
// every other axis, when empty, keeps each scenario's own value.
type ExperimentGrid struct {
	// Scenarios are scenario files, relative to the experiment file.
	Scenarios []string `yaml:"scenarios"`
	// Transfers override each scenario's transfer policy.
	Transfers []string `yaml:"transfers"`
	// Seeds override each scenario's seed.
	Seeds []uint64 `yaml:"seeds"`
	// MaxCandidates and Latencies override the delegation protocol's
	// parameters (refused, as in a scenario, with a transfer that has no
	// protocol).
	MaxCandidates []int   `yaml:"max_candidates"`
	Latencies     []int64 `yaml:"latencies"`
	// ShakingDepths override Shaking-G's search depth (shaking-g only).
	ShakingDepths []int `yaml:"shaking_depths"`
}

// ExperimentReference is a scenario's site's published figures, in per
// cent as the study prints them; either may be missing (the study's text
// gives some figures alone).
type ExperimentReference struct {
	Scenario          string   `yaml:"scenario"`
	Site              string   `yaml:"site"`
	AWRTChange        *float64 `yaml:"awrt_change"`
	UtilizationChange *float64 `yaml:"utilization_change"`
}

// ExperimentRow is one site of one cell: the tidy table's row.
type ExperimentRow struct {
	Experiment string `json:"experiment"`
	Scenario   string `json:"scenario"`
	Transfer   string `json:"transfer"`
	Seed       uint64 `json:"seed"`
	// Run is the replication (from 0); Seed is then its derived seed.
	Run int `json:"run"`
	// MaxCandidates and Latency are the delegation protocol's; absent
	// with a transfer that has none (the study's central strategies).
	MaxCandidates *int   `json:"max_candidates,omitempty"`
	Latency       *int64 `json:"latency_s,omitempty"`
	// ShakingDepth is Shaking-G's search depth; absent for the others.
	ShakingDepth  *int    `json:"shaking_depth,omitempty"`
	Site          string  `json:"site"`
	Procs         int     `json:"procs"`
	Jobs          int     `json:"jobs"`
	AWRTAlone     float64 `json:"awrt_alone_s"`
	AWRTFederated float64 `json:"awrt_federated_s"`
	// AWRTChange and UtilizationChange are relative, fractions (positive
	// AWRT change is better), as the study's tables (there in per cent).
	AWRTChange        float64 `json:"awrt_change"`
	UtilAlone         float64 `json:"utilization_alone"`
	UtilFederated     float64 `json:"utilization_federated"`
	UtilizationChange float64 `json:"utilization_change"`
	// LocalShare is the share of the site's jobs that ran there (M_n's
	// diagonal).
	LocalShare float64 `json:"local_share"`
	group      int     // the grid cell (before replication) the row belongs to

	// StudyAWRTChange and StudyUtilizationChange are the reference's
	// figures as fractions; absent without one.
	StudyAWRTChange        *float64 `json:"study_awrt_change,omitempty"`
	StudyUtilizationChange *float64 `json:"study_utilization_change,omitempty"`
}

// LoadExperiment reads and checks an experiment file and every scenario it
// names. Unknown fields are errors.
func LoadExperiment(path string) (*ExperimentFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var e ExperimentFile
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("experiment %s: %w: %w", path, ErrBadConfig, err)
	}
	e.dir = filepath.Dir(path)
	bad := func(msg string) error { return fmt.Errorf("experiment %s: %s: %w", path, msg, ErrBadConfig) }
	if len(e.Grid.Scenarios) == 0 {
		return nil, bad("grid.scenarios: name at least one scenario file")
	}
	if e.Runs < 0 || e.Runs > 1000 {
		return nil, bad(fmt.Sprintf("runs: want 1 to 1000 replications (0: 1), got %d", e.Runs))
	}
	if e.Parallel < 0 {
		return nil, bad(fmt.Sprintf("parallel: must be >= 0 (0: every core), got %d", e.Parallel))
	}
	// Build every cell's scenario once now, so that a bad cell is refused
	// before anything runs.
	if _, err := e.cells(); err != nil {
		return nil, fmt.Errorf("experiment %s: %w", path, err)
	}
	return &e, nil
}

type expCell struct {
	sc    *Scenario
	file  string
	seed  uint64
	run   int
	group int // the grid cell before replication
}

// cells are the grid's product, scenario-major, each scenario with its
// overrides applied and checked.
func (e *ExperimentFile) cells() ([]expCell, error) {
	g := e.Grid
	// The axes after the scenario, each with how to put its i-th value in
	// (an empty axis has one value: the scenario's own).
	axes := []struct {
		n   int
		set func(sc *Scenario, i int)
	}{
		{len(g.Transfers), func(sc *Scenario, i int) { sc.Transfer = g.Transfers[i] }},
		{len(g.Seeds), func(sc *Scenario, i int) { sc.Seed = g.Seeds[i] }},
		{len(g.MaxCandidates), func(sc *Scenario, i int) { sc.MaxCandidates = g.MaxCandidates[i] }},
		{len(g.Latencies), func(sc *Scenario, i int) { sc.Latency = g.Latencies[i] }},
		{len(g.ShakingDepths), func(sc *Scenario, i int) { sc.ShakingDepth = &g.ShakingDepths[i] }},
	}
	cellsPer := 1
	for _, ax := range axes {
		cellsPer *= max(ax.n, 1)
	}
	var out []expCell
	for _, file := range g.Scenarios {
		path := file
		if !filepath.IsAbs(path) {
			path = filepath.Join(e.dir, path)
		}
		for c := range cellsPer {
			sc, err := LoadScenario(path)
			if err != nil {
				return nil, err
			}
			// Decode c into one index per axis, the last axis fastest.
			rest := c
			for a := len(axes) - 1; a >= 0; a-- {
				if n := axes[a].n; n > 0 {
					axes[a].set(sc, rest%n)
					rest /= n
				}
			}
			if err := sc.check(); err != nil {
				return nil, fmt.Errorf("%s with the grid's values: %w", file, err)
			}
			seed := sc.Seed
			if seed == 0 {
				seed = 1
			}
			group := len(out) / max(e.Runs, 1)
			for run := range max(e.Runs, 1) {
				c := *sc
				c.Seed = ReplicationSeed(seed, run)
				out = append(out, expCell{sc: &c, file: file, seed: c.Seed, run: run, group: group})
			}
		}
	}
	return out, nil
}

// Run replays every cell, federated and alone, Parallel cells at a time,
// and returns the rows in cell order, then site order.
func (e *ExperimentFile) Run(ctx context.Context) ([]ExperimentRow, error) {
	cells, err := e.cells()
	if err != nil {
		return nil, err
	}
	par := e.Parallel
	if par == 0 {
		par = runtime.GOMAXPROCS(0)
	}
	rows := make([][]ExperimentRow, len(cells))
	errs := make([]error, len(cells))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, c := range cells {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rows[i], errs[i] = e.runCell(ctx, c)
		}()
	}
	wg.Wait()
	var out []ExperimentRow
	for i := range cells {
		if errs[i] != nil {
			return nil, fmt.Errorf("experiment %s: %s: %w", e.Name, cells[i].file, errs[i])
		}
		out = append(out, rows[i]...)
	}
	return out, nil
}

// NumCells is how many cells Run replays (the grid's product times the
// replications): the cells a dispatched run (RunCell) numbers from 0.
func (e *ExperimentFile) NumCells() (int, error) {
	cells, err := e.cells()
	return len(cells), err
}

// RunCell replays cell i (from 0, in Run's order) alone, federated and
// alone: one task of a grid dispatched over several machines (fedsched sim
// --experiment --slurm). Its rows are those Run gives for the cell.
func (e *ExperimentFile) RunCell(ctx context.Context, i int) ([]ExperimentRow, error) {
	cells, err := e.cells()
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(cells) {
		return nil, fmt.Errorf("experiment %s: cell %d: the grid has cells 0 to %d: %w", e.Name, i, len(cells)-1, ErrBadConfig)
	}
	rows, err := e.runCell(ctx, cells[i])
	if err != nil {
		return nil, fmt.Errorf("experiment %s: cell %d (%s): %w", e.Name, i, cells[i].file, err)
	}
	return rows, nil
}

// MergeCells puts the rows of every cell, replayed elsewhere by RunCell
// and read back, in Run's order (cell order, then site order), checking
// that part i holds cell i's rows (its scenario, replication and seed).
func (e *ExperimentFile) MergeCells(parts [][]ExperimentRow) ([]ExperimentRow, error) {
	cells, err := e.cells()
	if err != nil {
		return nil, err
	}
	if len(parts) != len(cells) {
		return nil, fmt.Errorf("experiment %s: %d parts for %d cells: %w", e.Name, len(parts), len(cells), ErrBadConfig)
	}
	var out []ExperimentRow
	for i, rows := range parts {
		c := cells[i]
		if len(rows) == 0 {
			return nil, fmt.Errorf("experiment %s: cell %d (%s): no rows: %w", e.Name, i, c.file, ErrBadConfig)
		}
		for _, r := range rows {
			if r.Experiment != e.Name || r.Scenario != c.sc.Name || r.Run != c.run || r.Seed != c.seed {
				return nil, fmt.Errorf("experiment %s: part %d holds a row of %s/%s run %d seed %d, not of cell %d (%s run %d seed %d): %w",
					e.Name, i, r.Experiment, r.Scenario, r.Run, r.Seed, i, c.sc.Name, c.run, c.seed, ErrBadConfig)
			}
			r.group = c.group
			out = append(out, r)
		}
	}
	return out, nil
}

func (e *ExperimentFile) runCell(ctx context.Context, c expCell) ([]ExperimentRow, error) {
	cfg, err := c.sc.Build()
	if err != nil {
		return nil, err
	}
	fed, err := RunFederation(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cfg.Federate = false
	alone, err := RunFederation(ctx, cfg)
	if err != nil {
		return nil, err
	}
	transfer := c.sc.Transfer
	if transfer == "" {
		transfer = cfg.Transfer.String()
	}
	mn, _ := fed.Migrations()
	var out []ExperimentRow
	for k, s := range cfg.Sites {
		r := ExperimentRow{Experiment: e.Name, Scenario: c.sc.Name, Transfer: transfer, Seed: c.seed, Run: c.run, group: c.group, Site: s.Name, Procs: s.Procs,
			Jobs: len(s.Jobs), LocalShare: mn[k][k]}
		if !c.sc.studyStrategy() {
			mc, lat := cfg.Location.EffectiveMaxCandidates(), cfg.Latency
			r.MaxCandidates, r.Latency = &mc, &lat
		}
		if cfg.Shaking != nil {
			d := cfg.Shaking.Depth
			r.ShakingDepth = &d
		}
		r.AWRTAlone, r.AWRTFederated = alone.OriginMetrics(k).AWRT, fed.OriginMetrics(k).AWRT
		if r.AWRTAlone > 0 {
			r.AWRTChange = (r.AWRTAlone - r.AWRTFederated) / r.AWRTAlone
		}
		r.UtilAlone, r.UtilFederated = alone.ExecMetrics(k).Utilization, fed.ExecMetrics(k).Utilization
		if r.UtilAlone > 0 {
			r.UtilizationChange = (r.UtilFederated - r.UtilAlone) / r.UtilAlone
		}
		for _, ref := range e.Reference {
			if ref.Scenario == c.sc.Name && ref.Site == s.Name {
				if ref.AWRTChange != nil {
					a := *ref.AWRTChange / 100
					r.StudyAWRTChange = &a
				}
				if ref.UtilizationChange != nil {
					u := *ref.UtilizationChange / 100
					r.StudyUtilizationChange = &u
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// ExperimentCSVHeader is the header of the experiment's tidy CSV; Record
// gives a row's cells in its order (empty for an absent reference).
var ExperimentCSVHeader = []string{"experiment", "scenario", "transfer", "seed", "run", "max_candidates", "latency_s", "shaking_depth", "site", "procs", "jobs",
	"awrt_alone_s", "awrt_federated_s", "awrt_change", "utilization_alone", "utilization_federated", "utilization_change", "local_share",
	"study_awrt_change", "study_utilization_change"}

// Record is the row's cells in ExperimentCSVHeader's order.
func (r ExperimentRow) Record() []string {
	f := func(x float64) string { return fmt.Sprintf("%.6g", x) }
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return f(*x)
	}
	return []string{r.Experiment, r.Scenario, r.Transfer, fmt.Sprint(r.Seed), fmt.Sprint(r.Run), r.params()[0], r.params()[1], r.params()[2], r.Site,
		fmt.Sprint(r.Procs), fmt.Sprint(r.Jobs), f(r.AWRTAlone), f(r.AWRTFederated), f(r.AWRTChange), f(r.UtilAlone), f(r.UtilFederated),
		f(r.UtilizationChange), f(r.LocalShare), opt(r.StudyAWRTChange), opt(r.StudyUtilizationChange)}
}

// params are the row's max_candidates, latency_s and shaking_depth cells
// (empty where the transfer has none).
func (r ExperimentRow) params() [3]string {
	var p [3]string
	if r.MaxCandidates != nil {
		p[0], p[1] = fmt.Sprint(*r.MaxCandidates), fmt.Sprint(*r.Latency)
	}
	if r.ShakingDepth != nil {
		p[2] = fmt.Sprint(*r.ShakingDepth)
	}
	return p
}

// ReproductionTable renders the rows that have a reference as the
// markdown table of docs/study.md: per site, the study's AWRT improvement
// and utilisation change beside ours, in per cent, with the differences.
func ReproductionTable(rows []ExperimentRow) string {
	var b strings.Builder
	b.WriteString("| setup | site | AWRT improvement: study | ours | difference (pp) | utilisation change: study | ours | difference (pp) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	// pair is the study's figure, ours and the difference, in per cent;
	// the study's and the difference empty without a reference.
	pair := func(study *float64, ours float64) string {
		if study == nil {
			return fmt.Sprintf(" | %+.2f | ", 100*ours)
		}
		return fmt.Sprintf("%+.2f | %+.2f | %+.2f", 100**study, 100*ours, 100*(ours-*study))
	}
	for _, r := range rows {
		if r.StudyAWRTChange == nil && r.StudyUtilizationChange == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Scenario, r.Site, pair(r.StudyAWRTChange, r.AWRTChange), pair(r.StudyUtilizationChange, r.UtilizationChange))
	}
	return b.String()
}

// Summary renders each figure's mean over the replications of a cell with
// the half-width of its 95 % interval (Student's t; empty for a single
// run), as a markdown table: one line per cell and site, with the cell's
// protocol or Shaking-G parameters.
func Summary(rows []ExperimentRow) string {
	type key struct {
		group int
		site  string
	}
	var order []key
	first := map[key]ExperimentRow{}
	awrt, util := map[key][]float64{}, map[key][]float64{}
	for _, r := range rows {
		k := key{r.group, r.Site}
		if _, ok := first[k]; !ok {
			order = append(order, k)
			first[k] = r
		}
		awrt[k] = append(awrt[k], 100*r.AWRTChange)
		util[k] = append(util[k], 100*r.UtilizationChange)
	}
	var b strings.Builder
	b.WriteString("| setup | transfer | parameters | site | runs | AWRT improvement (%) | ± 95 % | utilisation change (%) | ± 95 % |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		r := first[k]
		ma, ha := MeanCI95(awrt[k])
		mu, hu := MeanCI95(util[k])
		ci := func(h float64) string {
			if len(awrt[k]) < 2 {
				return ""
			}
			return fmt.Sprintf("%.2f", h)
		}
		var ps []string
		for i, v := range r.params() {
			if v != "" {
				ps = append(ps, []string{"max_candidates", "latency_s", "shaking_depth"}[i]+"="+v)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %+.2f | %s | %+.2f | %s |\n", r.Scenario, r.Transfer, strings.Join(ps, " "), r.Site,
			len(awrt[k]), ma, ci(ha), mu, ci(hu))
	}
	return b.String()
}
