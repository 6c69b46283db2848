package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/sim"
	"github.com/fedsched/fedsched/swf"
)

// slaFlags are the options of an SLA experiment (--strategy).
type slaFlags struct {
	strategy     string
	pofMax       float64
	riskTest     bool
	sf           float64
	penaltyRatio float64
	load         float64
	runs, jobs   int
	trainJobs    string
	minSamples   float64
	failureRate  float64
	repairRate   float64
	seed         uint64
	classes      string
	learn        string
	stats        string
	gapChoice    string
	sweep        string
	urgency      string
}

func (f *slaFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.strategy, "strategy", "", "run an SLA experiment: backfill, heuristic-plan, comprehensive-overbook or heuristic-overbook (implies --sanitize and the conservative policy), or Yeo's time-shared baselines libra, libra-sla or libra-riskd (docs/overbooking.md)")
	fl.StringVar(&f.urgency, "urgency", "none", "SLA terms: none (deadline = release + 2 x estimate, fee = procs x estimate in hours, penalty = ratio x fee, every deadline SOFT) or Yeo's two urgency classes, libra-sla (Table 4.1) or bid-based (Table 6.6): deadline, budget (the fee) and penalty drawn per job with --seed, high-urgency jobs HARD")
	fl.Float64Var(&f.pofMax, "pof-max", 0.1, "threshold test: accept an overbooked placement when PoF < this")
	fl.BoolVar(&f.riskTest, "risk-test", false, "use the risk test PoS x fee > PoF x penalty x SF instead of the threshold")
	fl.Float64Var(&f.sf, "security-factor", 0, "security factor SF of the risk test (default 2 heuristic, 4 comprehensive)")
	fl.Float64Var(&f.penaltyRatio, "penalty-ratio", 1, "penalty = ratio x fee; fee = procs x estimate in hours")
	fl.Float64Var(&f.load, "load", 2.0, "offered load at estimates each run's arrivals are compressed to (2.0 = 200 %; 0 keeps the trace's times)")
	fl.IntVar(&f.runs, "runs", 20, "number of consecutive runs taken from the end of the trace")
	fl.IntVar(&f.jobs, "jobs", 1000, "jobs per run (0: one run of every job after the training jobs)")
	fl.StringVar(&f.trainJobs, "train-jobs", "all", "jobs right before the runs that train the runtime statistics: a number, all (also 0) or none (start from empty statistics, as a new site)")
	fl.Float64Var(&f.minSamples, "min-samples", overbook.DefaultAdmissionMinSamples, "samples a job's runtime statistics must hold before it may be overbooked")
	fl.Float64Var(&f.failureRate, "failure-rate", 0, "node failure rate per node per hour: processors fail during the runs and the PoF counts it (thesis: 1.2904e-4; needs --repair-rate; 0: no failures)")
	fl.Float64Var(&f.repairRate, "repair-rate", 0, "node repair rate per node per hour (thesis: 0.4333)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed of the deadline draws (--deadline-model) and of node failures; a replay is deterministic for a given seed")
	fl.StringVar(&f.classes, "classes", "runtime", "job classes of the runtime statistics: runtime, procs, user, app or general")
	fl.StringVar(&f.learn, "learn", "static", "histogram statistics: static (trained once, as in the thesis) or online (updated as jobs finish)")
	fl.StringVar(&f.stats, "stats", "histogram", "runtime-ratio distributions of the overbooking strategies: histogram (the thesis's per-class histograms) or forecast (per job, from the runtime forecaster's recent errors; always learns online)")
	fl.StringVar(&f.gapChoice, "gap-choice", "first", "which acceptable gap to take: first (first fit) or best (highest PoS)")
	fl.StringVar(&f.sweep, "sweep", "", "sweep PoF_max 0.05..1.0 and penalty ratios 0.5,1,2,4; write PREFIX.csv and PREFIX.svg")
}

func (f *slaFlags) config(procs int) (sim.SLAConfig, error) {
	cfg := sim.DefaultSLAConfig(procs)
	st, err := sim.ParseStrategy(f.strategy)
	if err != nil {
		return cfg, fmt.Errorf("InvalidArgument: --strategy: %w", err)
	}
	cfg.Strategy = st
	if cfg.StatsSource, err = sim.ParseStatsSource(f.stats); err != nil {
		return cfg, fmt.Errorf("InvalidArgument: --stats: %w", err)
	}
	if cfg.Stats.Classifier, err = overbook.ParseClassifier(f.classes); err != nil {
		return cfg, fmt.Errorf("InvalidArgument: --classes: %w", err)
	}
	switch f.learn {
	case "static":
	case "online":
		cfg.Learn = true
	default:
		return cfg, fmt.Errorf("InvalidArgument: --learn %q: want static or online", f.learn)
	}
	switch f.gapChoice {
	case "first":
	case "best":
		cfg.Choice = overbook.BestPoS
	default:
		return cfg, fmt.Errorf("InvalidArgument: --gap-choice %q: want first or best", f.gapChoice)
	}
	switch f.urgency {
	case "none":
	case "libra-sla":
		m := overbook.LibraSLAUrgency()
		cfg.Urgency = &m
	case "bid-based":
		m := overbook.BidBasedUrgency()
		cfg.Urgency = &m
	default:
		return cfg, fmt.Errorf("InvalidArgument: --urgency %q: want none, libra-sla or bid-based", f.urgency)
	}
	cfg.Failures = overbook.FailureModel{Lambda: f.failureRate, Mu: f.repairRate}
	cfg.FailureSeed = f.seed
	if err := cfg.Failures.Validate(); err != nil {
		return cfg, fmt.Errorf("InvalidArgument: --failure-rate/--repair-rate: %w", err)
	}
	if f.riskTest {
		sf := f.sf
		if sf <= 0 {
			sf = overbook.DefaultSFHeuristic
			if st == sim.ComprehensiveOverbook {
				sf = overbook.DefaultSFComprehensive
			}
		}
		cfg.Test = overbook.Risk{SecurityFactor: sf}
	} else {
		if !(f.pofMax > 0 && f.pofMax <= 1) {
			return cfg, fmt.Errorf("InvalidArgument: --pof-max %v: want a probability in (0, 1]", f.pofMax)
		}
		cfg.Test = overbook.Threshold{PoFMax: f.pofMax}
	}
	if f.penaltyRatio < 0 || f.load < 0 || f.runs < 1 || f.jobs < 0 {
		return cfg, fmt.Errorf("InvalidArgument: --penalty-ratio, --load and --jobs must be >= 0 and --runs >= 1")
	}
	if !(f.minSamples > 0) || math.IsInf(f.minSamples, 0) {
		return cfg, fmt.Errorf("InvalidArgument: --min-samples %v: want a positive number", f.minSamples)
	}
	if cfg.TrainJobs, err = parseTrainJobs(f.trainJobs); err != nil {
		return cfg, err
	}
	cfg.PenaltyRatio, cfg.Load, cfg.Runs, cfg.JobsPerRun, cfg.MinSamples = f.penaltyRatio, f.load, f.runs, f.jobs, f.minSamples
	return cfg, nil
}

// parseTrainJobs reads --train-jobs: a count, "all" (or 0) or "none".
func parseTrainJobs(s string) (int, error) {
	switch s {
	case "all":
		return 0, nil
	case "none":
		return sim.TrainNone, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("InvalidArgument: --train-jobs %q: want a number of jobs >= 0, all or none", s)
	}
	return n, nil
}

// slaReport is the "sla" object of a site in --json output. Counts and money
// are means per run; gain_runs lists every run's gain in order.
type slaReport struct {
	Strategy   string  `json:"strategy"`
	Stats      string  `json:"stats,omitempty"` // absent for the Libra strategies, which use none
	Runs       int     `json:"runs"`
	Accepted   float64 `json:"accepted"`
	Rejected   float64 `json:"rejected"`
	Overbooked float64 `json:"overbooked"`
	Met        float64 `json:"met"`
	Violated   float64 `json:"violated"`
	// FailureViolations are the violations node failures caused.
	FailureViolations float64   `json:"failure_violations"`
	Fees              float64   `json:"fees"`
	Penalties         float64   `json:"penalties"`
	Gain              float64   `json:"gain"`
	GainCI95          float64   `json:"gain_ci95"`
	GainRuns          []float64 `json:"gain_runs"`
	// Profitability is gain over fees; reliability is met over accepted.
	Profitability float64 `json:"profitability"`
	Reliability   float64 `json:"reliability"`
	// Utility is Yeo's Σ B − DY·PR per run (Libra strategies only):
	// budget minus the penalty rate times the delay past the deadline.
	Utility     *float64 `json:"utility,omitempty"`
	UtilityCI95 *float64 `json:"utility_ci95,omitempty"`
	// Baseline is the strategy's own non-overbooking baseline, run on the
	// same runs; AdditionalGain is mean gain / baseline mean gain - 1 and
	// GainDiff the mean paired per-run difference with its 95 % interval.
	Baseline       *slaReport `json:"baseline,omitempty"`
	AdditionalGain *float64   `json:"additional_gain,omitempty"`
	GainDiff       *float64   `json:"gain_diff,omitempty"`
	GainDiffCI95   *float64   `json:"gain_diff_ci95,omitempty"`
	// StartAccuracy compares each started job's start with the one planned
	// at its submission, over all runs.
	StartAccuracy *sim.StartAccuracy `json:"start_accuracy,omitempty"`
	// RunMetrics are each run's replay metrics (AWRT, utilisation, ...),
	// in run order.
	RunMetrics []sim.Metrics `json:"run_metrics"`
}

func summarise(st sim.Strategy, stats sim.StatsSource, runs []sim.SLARun) *slaReport {
	r := &slaReport{Strategy: st.String(), Stats: stats.String(), Runs: len(runs)}
	if st.IsLibra() {
		r.Stats = ""
	}
	n := float64(len(runs))
	for _, x := range runs {
		r.Accepted += float64(x.Accepted) / n
		r.Rejected += float64(x.Rejected) / n
		r.Overbooked += float64(x.Overbooked) / n
		r.Met += float64(x.Met) / n
		r.Violated += float64(x.Violated) / n
		r.FailureViolations += float64(x.FailureViolations) / n
		r.Fees += x.Fees / n
		r.Penalties += x.Penalties / n
		r.GainRuns = append(r.GainRuns, x.Gain)
		r.RunMetrics = append(r.RunMetrics, x.Metrics)
	}
	r.Gain, r.GainCI95 = sim.MeanCI95(r.GainRuns)
	if len(runs) > 0 && runs[0].Utility != nil {
		us := make([]float64, len(runs))
		for i, x := range runs {
			us[i] = *x.Utility
		}
		u, h := sim.MeanCI95(us)
		r.Utility, r.UtilityCI95 = &u, &h
	}
	if !st.IsLibra() {
		r.StartAccuracy = sim.StartAccuracyOf(mergedStartErrors(runs))
	}
	if r.Fees > 0 {
		r.Profitability = r.Gain / r.Fees
	}
	if r.Accepted > 0 {
		r.Reliability = r.Met / r.Accepted
	}
	return r
}

// runSLA runs an SLA experiment (and the strategy's baseline) on a trace.
func runSLA(cmd *cobra.Command, f simFlags, tr *swf.Trace, procs int, standing []plan.Standing) error {
	cfg, err := f.sla.config(procs)
	if err != nil {
		return err
	}
	cfg.Standing = standing
	cfg.Forecast.Search.Epoch = forecast.EpochFromHeader(tr.Header)
	opts := swf.DefaultSanitizeOptions()
	opts.Rule4, _ = swf.ParseRule4(f.rule4)
	jobs, sr := swf.Sanitize(tr.Jobs, int64(procs), opts)
	if len(jobs) == 0 {
		return fmt.Errorf("FailedPrecondition: trace %s has no jobs with runtime estimates; SLA experiments need them", tr.Name)
	}
	in := sim.FromSWF(jobs)
	if f.sla.sweep != "" {
		if f.accPlot != "" {
			return fmt.Errorf("InvalidArgument: --start-accuracy-plot does not go with --sweep; run the strategy at one PoF_max")
		}
		return runSweep(cmd, f.sla.sweep, in, cfg)
	}
	cfg.KeepRecords = f.jobsCSV != ""
	runs, err := sim.Experiment(cmd.Context(), in, cfg)
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	rep := summarise(cfg.Strategy, cfg.StatsSource, runs)
	series := []accuracySeries{{name: shortOverbookingName(cfg.Strategy), errs: mergedStartErrors(runs)}}
	if base := cfg.Strategy.Baseline(); base != cfg.Strategy {
		bcfg := cfg
		bcfg.Strategy = base
		bcfg.KeepRecords = false
		bruns, err := sim.Experiment(cmd.Context(), in, bcfg)
		if err != nil {
			return err
		}
		rep.Baseline = summarise(base, cfg.StatsSource, bruns)
		series = append(series, accuracySeries{name: shortOverbookingName(base), errs: mergedStartErrors(bruns)})
		diffs := make([]float64, len(runs))
		for i := range runs {
			diffs[i] = runs[i].Gain - bruns[i].Gain
		}
		d, h := sim.MeanCI95(diffs)
		rep.GainDiff, rep.GainDiffCI95 = &d, &h
		if rep.Baseline.Gain != 0 {
			add := rep.Gain/rep.Baseline.Gain - 1
			rep.AdditionalGain = &add
		}
	}
	// The runs are separate replays: no metric of the site as a whole is
	// computed, so none is reported; each run's are in sla.run_metrics.
	policy := "conservative"
	if cfg.Strategy.IsLibra() {
		policy = "time-shared"
	}
	site := siteReport{Name: siteName(tr.Name), Procs: procs, Policy: policy, Dropped: sr.Dropped(), Sanitize: &sr, SLA: rep}
	if f.jobsCSV != "" {
		name := site.Name
		err := writeJobRows(f.jobsCSV, func(yield func(jobRow) bool) {
			for i, r := range runs {
				for row := range siteRows(i, name, r.Records) {
					if !yield(row) {
						return
					}
				}
			}
		})
		if err != nil {
			return err
		}
	}
	printSLATable(tableOut(cmd, f.jsonOut), tr.Name, cfg, rep)
	var acc []siteReport
	for _, x := range []*slaReport{rep, rep.Baseline} {
		if x != nil {
			st, _ := sim.ParseStrategy(x.Strategy)
			acc = append(acc, siteReport{Name: site.Name, Policy: overbookingName(st), StartAccuracy: x.StartAccuracy})
		}
	}
	if !cfg.Strategy.IsLibra() { // a Libra job starts when it is submitted: no promise to keep
		printStartAccuracy(tableOut(cmd, f.jsonOut), acc)
	}
	if f.accPlot != "" {
		title := fmt.Sprintf("%s, conservative, %.0f %% load: promised start with and without overbooking", site.Name, 100*cfg.Load)
		if err := plotStartAccuracy(f.accPlot, title, series); err != nil {
			return err
		}
		fmt.Fprintf(tableOut(cmd, f.jsonOut), "wrote %s\n", f.accPlot)
	}
	if f.jsonOut != "" {
		return writeJSON(cmd.OutOrStdout(), f.jsonOut, simReport{Trace: tr.Name, Sites: []siteReport{site}})
	}
	return nil
}

// overbookingName names a strategy by its policy and whether it overbooks,
// for the start accuracy table and plot.
func overbookingName(st sim.Strategy) string {
	if st.Overbooks() {
		return "conservative + overbooking (" + st.String() + ")"
	}
	return "conservative, no overbooking (" + st.String() + ")"
}

// shortOverbookingName is overbookingName without the policy, for the
// plot's legend (its title names the policy).
func shortOverbookingName(st sim.Strategy) string {
	if st.Overbooks() {
		return "overbooking (" + st.String() + ")"
	}
	return "no overbooking (" + st.String() + ")"
}

// mergedStartErrors are the start errors of every run, sorted.
func mergedStartErrors(runs []sim.SLARun) []int64 {
	var errs []int64
	for _, r := range runs {
		errs = append(errs, r.StartErrors...)
	}
	slices.Sort(errs)
	return errs
}

func printSLATable(w io.Writer, trace string, cfg sim.SLAConfig, r *slaReport) {
	terms := fmt.Sprintf("penalty ratio %g", cfg.PenaltyRatio)
	if cfg.Urgency != nil {
		terms = fmt.Sprintf("urgency classes (%.0f %% high), seed %d", 100*cfg.Urgency.HighFraction, cfg.FailureSeed)
	}
	if cfg.Strategy.IsLibra() {
		fmt.Fprintf(w, "%s: %d runs of %d jobs at %.0f %% offered load, %s, time-shared nodes (means per run, ±95 %% CI)\n",
			trace, cfg.Runs, cfg.JobsPerRun, 100*cfg.Load, terms)
	} else {
		fmt.Fprintf(w, "%s: %d runs of %d jobs at %.0f %% offered load, %s, %s, %s statistics (means per run, ±95 %% CI)\n",
			trace, cfg.Runs, cfg.JobsPerRun, 100*cfg.Load, testString(cfg.Test), terms, cfg.StatsSource)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "strategy\taccepted\trejected\toverbooked\tmet\tviolated\tfees\tpenalties\tgain\t±CI95\tprofitability\treliability\t"
	if r.Utility != nil {
		head += "utility\t±CI95\t"
	}
	fmt.Fprintln(tw, head)
	rows := []*slaReport{r}
	if r.Baseline != nil {
		rows = append(rows, r.Baseline)
	}
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t%.3f\t", x.Strategy, x.Accepted, x.Rejected,
			x.Overbooked, x.Met, x.Violated, x.Fees, x.Penalties, x.Gain, x.GainCI95, x.Profitability, x.Reliability)
		if x.Utility != nil {
			fmt.Fprintf(tw, "%.0f\t%.0f\t", *x.Utility, *x.UtilityCI95)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if r.GainDiff != nil {
		fmt.Fprintf(w, "paired gain difference %s - %s: %.0f ± %.0f per run (95 %% CI)", r.Strategy, r.Baseline.Strategy, *r.GainDiff, *r.GainDiffCI95)
		if r.AdditionalGain != nil {
			fmt.Fprintf(w, "; additional gain %+.1f %%", 100**r.AdditionalGain)
		}
		fmt.Fprintln(w)
	}
}

func testString(t overbook.Test) string {
	switch t := t.(type) {
	case overbook.Threshold:
		return fmt.Sprintf("PoF < %g", t.PoFMax)
	case overbook.Risk:
		return fmt.Sprintf("risk test SF %g", t.SecurityFactor)
	}
	return fmt.Sprint(t)
}

// sweepRatios are the penalty ratios of the thesis's risk experiments.
var sweepRatios = []float64{0.5, 1, 2, 4}

// runSweep runs the threshold test for PoF_max = 0.05, 0.10, ..., 1.00. The
// decisions of the threshold test do not depend on the penalty, so each
// PoF_max is replayed once and its gain computed for every penalty ratio
// (penalty = ratio x fee scales every penalty alike).
func runSweep(cmd *cobra.Command, prefix string, in []sim.Job, cfg sim.SLAConfig) error {
	cfg.PenaltyRatio = 1
	fh, err := os.Create(prefix + ".csv")
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	defer fh.Close()
	w := csv.NewWriter(fh)
	w.Write([]string{"strategy", "pof_max", "penalty_ratio", "runs", "accepted", "met", "violated", "fees", "penalties", "gain", "gain_ci95"}) //nolint:errcheck // checked by Flush
	lines := make(map[float64]*ciPoints)
	for k := 1; k <= 20; k++ {
		pm := float64(k) / 20
		cfg.Test = overbook.Threshold{PoFMax: pm}
		runs, err := sim.Experiment(cmd.Context(), in, cfg)
		if err != nil {
			return err
		}
		for _, ratio := range sweepRatios {
			gains := make([]float64, len(runs))
			var acc, met, vio, fees, pens float64
			for i, r := range runs {
				gains[i] = r.Fees - ratio*r.Penalties
				acc += float64(r.Accepted)
				met += float64(r.Met)
				vio += float64(r.Violated)
				fees += r.Fees
				pens += ratio * r.Penalties
			}
			n := float64(len(runs))
			g, h := sim.MeanCI95(gains)
			w.Write([]string{cfg.Strategy.String(), ftoa(pm), ftoa(ratio), strconv.Itoa(len(runs)), ftoa(acc / n), ftoa(met / n), //nolint:errcheck // checked by Flush
				ftoa(vio / n), ftoa(fees / n), ftoa(pens / n), ftoa(g), ftoa(h)})
			if lines[ratio] == nil {
				lines[ratio] = &ciPoints{}
			}
			lines[ratio].XYs = append(lines[ratio].XYs, plotter.XY{X: pm, Y: g})
			lines[ratio].YErrors = append(lines[ratio].YErrors, struct{ Low, High float64 }{h, h})
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "sweep: PoF_max %.2f done\n", pm)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := plotSweep(prefix+".svg", cfg, lines); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s.csv and %s.svg\n", prefix, prefix)
	return nil
}

func ftoa(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// ciPoints are means with the half-widths of their 95 % intervals.
type ciPoints struct {
	plotter.XYs
	plotter.YErrors
}

// plotSweep draws the sweep's mean gain per run against PoF_max, one curve
// per penalty ratio, each point with its 95 % interval. The curves are
// shifted apart a little along x so that their intervals do not hide each
// other; the legend stands beside the plot.
func plotSweep(path string, cfg sim.SLAConfig, lines map[float64]*ciPoints) error {
	p := newPlot(fmt.Sprintf("%s: gain against PoF_max", cfg.Strategy),
		fmt.Sprintf("PoF_max (overbook when the PoF is below it); %d runs of %d jobs at %.0f %% load", cfg.Runs, cfg.JobsPerRun, 100*cfg.Load),
		"mean gain per run (processor-hours), 95 % interval")
	p.Y.Tick.Marker = plainTicks{}
	legend := plot.NewLegend()
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.ThumbnailWidth = vg.Points(22)
	legend.Padding = vg.Points(3)
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{}}
	for i, ratio := range sweepRatios {
		pts := lines[ratio]
		if pts == nil {
			continue
		}
		shift := (float64(i) - float64(len(sweepRatios)-1)/2) * 0.006
		shifted := &ciPoints{XYs: slices.Clone(pts.XYs), YErrors: pts.YErrors}
		for k := range shifted.XYs {
			shifted.XYs[k].X += shift
		}
		l, s, err := plotter.NewLinePoints(shifted)
		if err != nil {
			return fmt.Errorf("sweep plot: %w", err)
		}
		c := plotColors[i%len(plotColors)]
		l.Color, l.Width = c, vg.Points(1.4)
		s.Color, s.Shape, s.Radius = c, shapes[i%len(shapes)], vg.Points(2.5)
		eb, err := plotter.NewYErrorBars(shifted)
		if err != nil {
			return fmt.Errorf("sweep plot: %w", err)
		}
		eb.Color, eb.CapWidth = c, vg.Points(4)
		p.Add(eb, l, s)
		legend.Add("penalty = "+strings.TrimSuffix(ftoa(ratio), ".0")+" x fee", l, s)
	}
	p.X.Min, p.X.Max = 0, 1.03
	return savePlotSVG(p, &legend, 8*vg.Inch, 4.5*vg.Inch, path)
}
