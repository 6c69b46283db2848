package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/sim"
	"github.com/fedsched/fedsched/swf"
)

type simFlags struct {
	trace    string
	procs    int
	policy   string
	sanitize bool
	rule4    string
	skipBad  bool
	jsonOut  string
	jobsCSV  string
	sla      slaFlags
	scenario string
	// experiment is an experiment file (a grid of scenarios), expCSV its
	// tidy CSV.
	experiment, expCSV, expPlot string
	// slurm dispatches an experiment's cells as a Slurm job array
	// (simslurm.go); cell runs one cell, as an array task does.
	slurm                    bool
	slurmDir, slurmPartition string
	cell                     int
	fixed                    []string
	deadline                 string
	forecast                 string
	offered                  float64
	span                     string
	cpuprof                  string
	accPlot                  string
	gantt                    string
	// utilPlot and queuePlot draw a replay's utilisation and queue length
	// over time, in bins of plotBin.
	utilPlot, queuePlot, plotBin string
	from, to                     int64
}

func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim --trace FILE | --scenario FILE",
		Short: "Replay a workload trace through the scheduling core and report metrics",
		Long: `Replay a Standard Workload Format trace on a simulated site, with a virtual
clock, through the same scheduling core a node runs, and print AWRT, AWWT,
utilisation, makespan, bounded slowdown and wait percentiles.

Jobs are killed at the end of their reservation (the scheduler knows only
estimates). A trace without estimates gets exact estimates (the actual
runtime). --json writes the schema documented in docs/simulation.md.

The deadline policies (--policy edf, lttr) need deadlines: --deadline-model
draws them from each job's actual runtime (uniform: submit + runtime x f,
f ~ U[1, 10]; modal: rounded values 5 min .. 24 h), seeded by --seed. They
are soft (a late job still runs) and any policy can be measured against
them: the share of jobs that met their deadline and the mean tardiness are
reported. LTTR orders by deadline - forecast; --forecast online (default)
predicts each job at its submission from the jobs completed before it
(docs/forecasting.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withCPUProfile(f.cpuprof, func() error { return runSim(cmd, f) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", "", traceFlagHelp)
	fl.IntVar(&f.procs, "procs", 0, "site size in processors (default: the trace header's MaxProcs, falling back to MaxNodes)")
	fl.StringVar(&f.policy, "policy", "conservative", "queue policy: conservative, easy, fcfs, list, edf or lttr")
	fl.StringVar(&f.deadline, "deadline-model", "", "give jobs soft deadlines drawn from their runtimes and report deadline metrics: uniform (f-model, f ~ U[1,10]), modal (rounded human values) or none (default: uniform with --policy edf|lttr, none otherwise)")
	fl.Float64Var(&f.offered, "offered-load", 0, "scale the arrival times so that the offered load at actual runtimes is this (0.9 = 90 %; 0 keeps the trace's times); not with --strategy, which has --load")
	fl.StringVar(&f.forecast, "forecast", "online", "runtime forecast of --policy lttr: online (forecaster fed the completions so far), estimate (the user's estimate) or oracle (the actual runtime: a perfect forecast, for comparison)")
	fl.StringVar(&f.span, "span", "", "keep only the jobs submitted within this span of the first, e.g. 335d for the study's eleven-month traces; empty keeps all")
	fl.BoolVar(&f.sanitize, "sanitize", false, "apply the five sanitisation rules of the federation study (see docs/simulation.md)")
	fl.StringVar(&f.rule4, "rule4", "clip", "with --sanitize, jobs that ran past their estimate: clip (cut to the estimate) or drop")
	fl.BoolVar(&f.skipBad, "skip-malformed", false, "skip and count malformed trace lines instead of failing")
	fl.StringVar(&f.jsonOut, "json", "", "write the results as JSON to this file ('-' for stdout)")
	fl.StringVar(&f.jobsCSV, "jobs-csv", "", "write one CSV row per job to this file")
	fl.StringVar(&f.scenario, "scenario", "", "replay a federation scenario (YAML; see docs/simulation.md) with and without delegation")
	fl.StringVar(&f.experiment, "experiment", "", "run an experiment file (YAML; see docs/simulation.md): a grid of scenarios x transfers x parameters x seeds on all cores")
	fl.StringVar(&f.expCSV, "csv", "", "with --experiment: write the tidy table (one row per cell and site) to this file")
	fl.BoolVar(&f.slurm, "slurm", false, "with --experiment: dispatch the cells as a Slurm job array (sbatch --array; one cell per task, each running this binary with --cell) and merge their rows in cell order: the same CSV as a local run")
	fl.StringVar(&f.slurmDir, "slurm-dir", "", "with --slurm: the directory, shared with the compute nodes, for the array's script, logs and each cell's rows (default: a new fedsched-slurm-* directory here, removed after a successful merge)")
	fl.StringVar(&f.slurmPartition, "slurm-partition", "", "with --slurm: the partition to submit to (default: Slurm's default partition)")
	fl.IntVar(&f.cell, "cell", 0, "with --experiment and --json: replay only this cell (from 0, in the CSV's order) and write its rows as JSON: what each task of --slurm runs")
	fl.StringVar(&f.expPlot, "plot", "", "with --experiment: draw each site's AWRT and utilisation change, beside the references, as an SVG plot to this file")
	fl.StringVar(&f.cpuprof, "cpuprofile", "", "write a CPU profile of the replay to this file (read it with go tool pprof)")
	fl.StringArrayVar(&f.fixed, "fixed-reservations", nil, "standing reservations EVERY,LENGTH[,SHARE] (e.g. 6h,1h or 24h,4h,0.5 for half the machine), anchored at the trace's time 0; repeatable")
	fl.StringVar(&f.gantt, "gantt", "", "draw the jobs that ran between --from and --to as an SVG Gantt chart (processors over time) to this file")
	fl.StringVar(&f.utilPlot, "utilisation-plot", "", "draw the site's utilisation (busy processors) over time between --from and --to as an SVG plot to this file")
	fl.StringVar(&f.queuePlot, "queue-plot", "", "draw the queue length (jobs accepted and waiting to start) over time between --from and --to as an SVG plot to this file")
	fl.StringVar(&f.plotBin, "plot-bin", "", "with --utilisation-plot/--queue-plot: the width of the bins the plots average over, e.g. 1h or 1d (default: the smallest of 1m, 5m, 10m, 30m, 1h, 3h, 6h, 12h, 1d, 7d, 28d giving at most 400 bins)")
	fl.Int64Var(&f.from, "from", 0, "with --gantt or the plots: start of the window, in seconds of trace time (after --offered-load scaling)")
	fl.Int64Var(&f.to, "to", 0, "with --gantt or the plots: end of the window, in seconds of trace time (0: --from plus one day for --gantt, the end of the replay for the plots)")
	fl.StringVar(&f.accPlot, "start-accuracy-plot", "", "replay under both conservative and EASY backfilling and draw the distribution of actual minus planned start of each (SVG) to this file")
	f.sla.register(fl)
	cmd.AddCommand(newSimEFSTrainCmd())
	return cmd
}

// siteReport is one site object of the --json output.
type siteReport struct {
	Name    string `json:"name"`
	Procs   int    `json:"procs"`
	Policy  string `json:"policy"`
	Dropped int    `json:"dropped"`
	// Metrics are absent where the mode computes none for the site as a
	// whole (an SLA experiment reports each run's under sla.run_metrics).
	*sim.Metrics
	// DeadlineModel, Forecast and the deadline metrics appear with
	// deadlines (--deadline-model, --policy edf|lttr).
	// Span is --span: the replay kept only the jobs submitted within it.
	Span          string  `json:"span,omitempty"`
	OfferedLoad   float64 `json:"offered_load,omitempty"`
	DeadlineModel string  `json:"deadline_model,omitempty"`
	Forecast      string  `json:"forecast,omitempty"`
	*sim.DeadlineMetrics
	Sanitize *swf.SanitizeReport `json:"sanitize,omitempty"`
	SLA      *slaReport          `json:"sla,omitempty"`
	Fixed    *sim.FixedReport    `json:"fixed,omitempty"`
	// StartAccuracy compares each job's start with the one planned at its
	// submission.
	StartAccuracy *sim.StartAccuracy `json:"start_accuracy,omitempty"`
}

type simReport struct {
	Trace string       `json:"trace"`
	Sites []siteReport `json:"sites"`
}

func runSim(cmd *cobra.Command, f simFlags) error {
	if f.experiment != "" {
		if f.scenario != "" {
			return fmt.Errorf("InvalidArgument: --experiment and --scenario: give one (an experiment names its scenarios)")
		}
		return runExperiment(cmd, f)
	}
	if f.scenario != "" {
		if f.span != "" {
			return fmt.Errorf("InvalidArgument: --span is for trace replays; a scenario aligns its sites with its own span: field")
		}
		if err := refuseUnusedFlags(cmd, "a scenario replay (--scenario; a scenario sets its sites, policies, SLAs and seed in its file)", scenarioSimFlags); err != nil {
			return err
		}
		if err := refuseIdleFlags(cmd, f, false); err != nil {
			return err
		}
		return runScenario(cmd, f)
	}
	if f.sla.strategy != "" {
		if f.offered != 0 || f.deadline != "" || f.span != "" {
			return fmt.Errorf("InvalidArgument: --offered-load, --deadline-model and --span are for plain replays; SLA experiments (--strategy) set load (--load) and deadlines themselves")
		}
		mode, used := "an SLA experiment (--strategy)", strategySimFlags
		if st, err := sim.ParseStrategy(f.sla.strategy); err == nil && st.IsLibra() {
			mode, used = "a Libra experiment (--strategy "+st.String()+": time-shared nodes, no plan, no runtime statistics)", libraSimFlags
		}
		if err := refuseUnusedFlags(cmd, mode, used); err != nil {
			return err
		}
		if f.jobsCSV != "" && f.sla.sweep != "" {
			return fmt.Errorf("InvalidArgument: --jobs-csv does not go with --sweep (a sweep runs one experiment per cell); run one cell with --pof-max and --penalty-ratio")
		}
	} else {
		if err := refuseUnusedFlags(cmd, "a plain replay (--trace without --strategy)", plainSimFlags); err != nil {
			return err
		}
		if err := refuseIdleFlags(cmd, f, true); err != nil {
			return err
		}
		if f.jobsCSV != "" && f.accPlot != "" {
			return fmt.Errorf("InvalidArgument: --jobs-csv does not go with --start-accuracy-plot (which replays twice, under conservative and EASY); replay once with --policy")
		}
		defer replayGC()()
	}
	pol, err := plan.ParsePolicy(f.policy)
	if err != nil {
		return fmt.Errorf("InvalidArgument: --policy: %w", err)
	}
	rule4, err := swf.ParseRule4(f.rule4)
	if err != nil {
		return fmt.Errorf("InvalidArgument: --rule4: %w", err)
	}
	tr, err := loadTrace(f.trace, swf.Options{SkipMalformed: f.skipBad})
	if err != nil {
		return err
	}
	procs := f.procs
	if procs <= 0 {
		procs = int(tr.Header.Procs())
	}
	if procs <= 0 {
		return fmt.Errorf("InvalidArgument: trace %s has no MaxProcs or MaxNodes header; give --procs", tr.Name)
	}
	standing, err := standingFlags(f.fixed, procs, tr.Header.UnixStartTime)
	if err != nil {
		return err
	}
	if f.sla.strategy != "" {
		return runSLA(cmd, f, tr, procs, standing)
	}
	jobs := tr.Jobs
	rep := siteReport{Name: siteName(tr.Name), Procs: procs, Policy: pol.String()}
	if f.span != "" {
		// Cut before sanitising, so that the dropped counts are the window's.
		span, err := sim.ParseSpan(f.span)
		if err != nil {
			return fmt.Errorf("InvalidArgument: --span: %w", err)
		}
		jobs = swf.KeepSpan(jobs, span)
		rep.Span = f.span
	}
	if f.sanitize {
		opts := swf.DefaultSanitizeOptions()
		opts.Rule4 = rule4
		// Rule 5 drops jobs without estimates; a trace that has none at all
		// would lose everything, so it replays with exact estimates instead.
		opts.RequireEstimate = sim.HasEstimates(jobs)
		var sr swf.SanitizeReport
		jobs, sr = swf.Sanitize(jobs, int64(procs), opts)
		rep.Dropped = sr.Dropped()
		rep.Sanitize = &sr
	}
	in := sim.FromSWF(jobs)
	if f.offered < 0 {
		return fmt.Errorf("InvalidArgument: --offered-load %v: want >= 0", f.offered)
	}
	if f.offered > 0 {
		in = sim.ScaleToLoad(in, procs, f.offered)
		rep.OfferedLoad = f.offered
	}
	cfg := sim.Config{Name: rep.Name, Site: plan.Config{Procs: procs, Policy: pol}, Standing: standing}
	var fc *sim.OnlineForecast
	if in, fc, err = deadlineSetup(f, tr, pol, in, &cfg, &rep); err != nil {
		return err
	}
	bar := newProgress(cmd.ErrOrStderr(), len(in), "replaying "+rep.Name)
	if bar != nil {
		cfg.Progress = func(n int) { bar.Set(n) } //nolint:errcheck // progress display only
	}
	if f.accPlot != "" {
		return runStartAccuracy(cmd, f, in, cfg, rep)
	}
	res, err := sim.Run(cmd.Context(), in, cfg)
	if bar != nil {
		bar.Finish() //nolint:errcheck // progress display only
		bar.Exit()   //nolint:errcheck // progress display only
	}
	if err != nil {
		return err
	}
	if fc != nil && fc.Err() != nil {
		return fmt.Errorf("forecast: %w", fc.Err())
	}
	m := sim.ComputeMetrics(res.Records, procs)
	rep.Metrics = &m
	rep.DeadlineMetrics = sim.ComputeDeadlineMetrics(res.Records)
	rep.Fixed = res.Fixed
	rep.StartAccuracy = sim.ComputeStartAccuracy(res.Records)
	if f.gantt != "" {
		if err := writeReplayGantt(f, rep.Name, procs, res.Records); err != nil {
			return err
		}
	}
	if f.utilPlot != "" || f.queuePlot != "" {
		if err := writeTimelinePlots(f, rep, res.Records); err != nil {
			return err
		}
	}
	out := simReport{Trace: tr.Name, Sites: []siteReport{rep}}
	printSimTable(tableOut(cmd, f.jsonOut), out)
	printStartAccuracy(tableOut(cmd, f.jsonOut), out.Sites)
	if f.jsonOut != "" {
		if err := writeJSON(cmd.OutOrStdout(), f.jsonOut, out); err != nil {
			return err
		}
	}
	if f.jobsCSV != "" {
		if err := writeJobRows(f.jobsCSV, siteRows(0, rep.Name, res.Records)); err != nil {
			return err
		}
	}
	return nil
}

// deadlineSetup gives the jobs deadlines (--deadline-model, default uniform
// under the deadline policies) and, under LTTR, the runtime forecast
// (--forecast), and records both in the report. It returns the jobs and the
// online forecaster, if any.
func deadlineSetup(f simFlags, tr *swf.Trace, pol plan.Policy, in []sim.Job, cfg *sim.Config, rep *siteReport) ([]sim.Job, *sim.OnlineForecast, error) {
	name := f.deadline
	if name == "" {
		name = "none"
		if pol.DeadlineOrdered() {
			name = "uniform"
		}
	}
	if name == "none" {
		if pol.DeadlineOrdered() {
			return nil, nil, fmt.Errorf("InvalidArgument: --policy %s orders by deadlines: give --deadline-model uniform or modal", pol)
		}
		return in, nil, nil
	}
	m, err := sim.DeadlineModelByName(name, in)
	if err != nil {
		return nil, nil, fmt.Errorf("InvalidArgument: --deadline-model: %w", err)
	}
	in = sim.WithDeadlines(in, m, f.sla.seed)
	cfg.SoftDeadlines = true
	rep.DeadlineModel = name
	if pol != plan.LTTR {
		return in, nil, nil
	}
	rep.Forecast = f.forecast
	switch f.forecast {
	case "online":
		fcfg := forecast.DefaultConfig()
		fcfg.Search.Epoch = forecast.EpochFromHeader(tr.Header)
		fc, err := sim.NewOnlineForecast(fcfg, nil, false)
		if err != nil {
			return nil, nil, err
		}
		cfg.Predictor = fc
		return in, fc, nil
	case "estimate":
	case "oracle":
		cfg.Predictor = sim.Oracle{}
	default:
		return nil, nil, fmt.Errorf("InvalidArgument: --forecast %q: want online, estimate or oracle", f.forecast)
	}
	return in, nil, nil
}

// standingFlags parses --fixed-reservations values for a site of procs
// processors whose trace time 0 is the Unix time epoch.
func standingFlags(vals []string, procs int, epoch int64) ([]plan.Standing, error) {
	var out []plan.Standing
	for _, v := range vals {
		st, err := sim.StandingFromFlag(v, procs, 0, 0)
		if err != nil {
			return nil, fmt.Errorf("InvalidArgument: --fixed-reservations: %w", err)
		}
		st.Epoch = epoch
		out = append(out, st)
	}
	return out, nil
}

func siteName(traceName string) string {
	base := filepath.Base(traceName)
	for _, ext := range []string{".gz", ".swf"} {
		if len(base) > len(ext) && base[len(base)-len(ext):] == ext {
			base = base[:len(base)-len(ext)]
		}
	}
	return base
}

// newProgress returns a progress bar on w when w is a terminal, else nil.
func newProgress(w io.Writer, total int, what string) *progressbar.ProgressBar {
	file, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(file.Fd())) {
		return nil
	}
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(100_000_000), progressbar.OptionClearOnFinish())
}

func printSimTable(w io.Writer, r simReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "site\tpolicy\tprocs\tjobs\tdropped\tAWRT (s)\tAWWT (s)\tutilisation\tmakespan (s)\tbounded slowdown\twait p50 (s)\twait p90 (s)\twait p99 (s)\t\n")
	for _, s := range r.Sites {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f\t%.0f\t%.1f %%\t%d\t%.2f\t%.0f\t%.0f\t%.0f\t\n",
			s.Name, s.Policy, s.Procs, s.Metrics.Jobs, s.Dropped, s.AWRT, s.AWWT, 100*s.Utilization, s.Makespan,
			s.BoundedSlowdown, s.WaitP50, s.WaitP90, s.WaitP99)
	}
	tw.Flush()
	deadlines := false
	for _, s := range r.Sites {
		deadlines = deadlines || s.DeadlineMetrics != nil
	}
	if !deadlines {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "site\tpolicy\tdeadline model\tforecast\tjobs with deadlines\tdeadlines met\tmean tardiness (s)\tmean tardiness of late jobs (s)\tmax tardiness (s)\t\n")
	for _, s := range r.Sites {
		d := s.DeadlineMetrics
		if d == nil {
			continue
		}
		fc := s.Forecast
		if fc == "" {
			fc = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.2f %%\t%.0f\t%.0f\t%d\t\n", s.Name, s.Policy, s.DeadlineModel, fc,
			d.Jobs, 100*d.Met, d.MeanTardiness, d.LateMeanTardiness, d.MaxTardiness)
	}
	tw.Flush()
}

// tableOut is where a replay prints its human table: stdout, unless the
// JSON goes there (--json -), so that stdout is JSON alone for scripts.
func tableOut(cmd *cobra.Command, jsonOut string) io.Writer {
	if jsonOut == "-" {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// writeJSON writes v as indented JSON to path, or to stdout for "-".
func writeJSON(stdout io.Writer, path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
