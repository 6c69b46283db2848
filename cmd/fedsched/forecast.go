package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/swf"
)

type forecastFlags struct {
	trace   string
	jsonOut string
	jobsCSV string
	chain   string
	selectB string
	noCap   bool
	logAR   bool
	unwCV   bool
	skipBad bool
}

func newForecastCmd() *cobra.Command {
	var f forecastFlags
	cmd := &cobra.Command{
		Use:   "forecast --trace FILE [--json OUT]",
		Short: "Evaluate runtime forecasting on a trace: partitioned predictors vs the users' estimates",
		Long: `Replay a Standard Workload Format trace in time order and predict every job's
runtime at its submission from the jobs completed by then (Lazarevic 2008):
per-partition histories found by the automated CV-reduction search, five
self-parametrising predictors (windowed median and mean, SES, AR, ARMA), the
one with the lowest recent error chosen per partition.

Jobs with a positive runtime and a user estimate are evaluated; the others
are counted as skipped. Reported, over the same jobs: the quartiles of the
absolute percentage error |actual - predicted| / actual of the forecast, of
the users' estimates and of the best predictor run without partitions, the
per-partition MdAPE quartiles and each predictor's Percent Best. Errors are
fractions (0.05 = 5 %) in the JSON and percentages in the table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runForecast(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", "", traceFlagHelp+"; names are case-insensitive")
	fl.StringVar(&f.jsonOut, "json", "", "write the report as JSON to this file ('-' for stdout, instead of the table)")
	fl.StringVar(&f.jobsCSV, "jobs-csv", "", "write one CSV row per evaluated job (id, submit, actual, estimate, forecast, ape, predictor, partition, cold_start) to this file")
	fl.StringVar(&f.chain, "chain", "", "fixed partition chain instead of the automated search, finest first, comma-separated, e.g. user+estimate,user (attributes: user, group, app, queue, procs, estimate, week, weekday, hour)")
	fl.StringVar(&f.selectB, "select", forecast.DefaultConfig().SelectBy.String(), "error measure that picks each partition's predictor: mae (the thesis's), ape or log")
	fl.BoolVar(&f.noCap, "no-cap", false, "do not cap forecasts at the user's estimate")
	fl.BoolVar(&f.logAR, "log-space", false, "fit AR and ARMA to log(runtime) instead of runtime")
	fl.BoolVar(&f.unwCV, "unweighted-cv", false, "score partitionings by the thesis's unweighted mean CV over partitions instead of weighting by partition size")
	fl.BoolVar(&f.skipBad, "skip-malformed", false, "skip and count malformed trace lines instead of failing")
	return cmd
}

// forecastReport is the --json output: the trace name plus the report.
type forecastReport struct {
	Trace string `json:"trace"`
	*forecast.Report
}

func runForecast(cmd *cobra.Command, f forecastFlags) error {
	cfg := forecast.DefaultEvalConfig()
	sel, err := forecast.ParseSelection(f.selectB)
	if err != nil {
		return fmt.Errorf("InvalidArgument: --select: %w", err)
	}
	cfg.Forecaster.SelectBy = sel
	cfg.Forecaster.CapAtEstimate = !f.noCap
	cfg.Forecaster.Predictor.LogSpace = f.logAR
	cfg.Forecaster.Search.Weighted = !f.unwCV
	if f.chain != "" {
		cfg.Forecaster.NoSearch = true
		for _, part := range strings.Split(f.chain, ",") {
			s, err := forecast.ParseAttrSet(part)
			if err != nil {
				return fmt.Errorf("InvalidArgument: --chain: %w", err)
			}
			if s != 0 {
				cfg.Forecaster.Chain = append(cfg.Forecaster.Chain, s)
			}
		}
	}
	tr, err := loadTrace(f.trace, swf.Options{SkipMalformed: f.skipBad})
	if err != nil {
		return err
	}
	cfg.Forecaster.Search.Epoch = forecast.EpochFromHeader(tr.Header)
	cfg.KeepJobs = f.jobsCSV != ""
	rep, err := forecast.Evaluate(forecast.FromSWF(tr.Jobs), cfg)
	if errors.Is(err, forecast.ErrNoJobs) {
		return fmt.Errorf("InvalidArgument: trace %s (forecasts are evaluated against user estimates): %w", tr.Name, err)
	}
	if err != nil {
		return fmt.Errorf("forecast %s: %w", tr.Name, err)
	}
	if f.jobsCSV != "" {
		if err := writeForecastCSV(f.jobsCSV, rep.PerJob); err != nil {
			return err
		}
		rep.PerJob = nil // not in the JSON: the CSV has them
	}
	out := forecastReport{Trace: tr.Name, Report: rep}
	if f.jsonOut != "-" {
		printForecastTable(cmd.OutOrStdout(), out)
	}
	if f.jsonOut != "" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		b = append(b, '\n')
		if f.jsonOut == "-" {
			_, err = cmd.OutOrStdout().Write(b)
			return err
		}
		if err := os.WriteFile(f.jsonOut, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.jsonOut, err)
		}
	}
	return nil
}

func pct(x float64) string { return fmt.Sprintf("%.1f %%", 100*x) }

func printForecastTable(w io.Writer, r forecastReport) {
	fmt.Fprintf(w, "trace %s: %d jobs, %d evaluated, %d skipped (%d no runtime, %d no estimate)\n",
		r.Trace, r.Jobs, r.Forecast.Jobs, r.Skipped.NoRuntime+r.Skipped.NoEstimate, r.Skipped.NoRuntime, r.Skipped.NoEstimate)
	chain := make([]string, 0, len(r.Chain)+1)
	for _, s := range r.Chain {
		chain = append(chain, s.String())
	}
	chain = append(chain, "all")
	fmt.Fprintf(w, "partition chain: %s (%d searches); cold starts %d, capped at estimate %d\n\n",
		strings.Join(chain, " > "), r.Searches, r.ColdStarts, r.Capped)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "APE of\tp25\tp50 (MdAPE)\tp75\t\n")
	fmt.Fprintf(tw, "forecast (partitioned)\t%s\t%s\t%s\t\n", pct(r.Forecast.P25), pct(r.Forecast.P50), pct(r.Forecast.P75))
	fmt.Fprintf(tw, "user estimate\t%s\t%s\t%s\t\n", pct(r.UserEstimate.P25), pct(r.UserEstimate.P50), pct(r.UserEstimate.P75))
	fmt.Fprintf(tw, "unpartitioned (%s)\t%s\t%s\t%s\t\n", r.Unpartitioned.Predictor, pct(r.Unpartitioned.P25), pct(r.Unpartitioned.P50), pct(r.Unpartitioned.P75))
	fmt.Fprintf(tw, "per-partition MdAPE (%d sequences)\t%s\t%s\t%s\t\n", r.Partitions.Sequences, pct(r.Partitions.P25), pct(r.Partitions.P50), pct(r.Partitions.P75))
	tw.Flush()
	fmt.Fprintf(w, "\nratio samples (actual/estimate distribution, %d jobs): actual below p10 %s, below p50 %s, above p90 %s\n\n",
		r.Ratios.Jobs, pct(r.Ratios.BelowP10), pct(r.Ratios.BelowP50), pct(r.Ratios.AboveP90))

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "predictor\tpercent best\tchosen\tMdAPE alone\tMdAPE unpartitioned\t\n")
	for _, name := range forecast.PredictorNames() {
		p, ok := r.Predictors[name]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%.1f %%\t%.1f %%\t%s\t%s\t\n", name, p.PercentBest, p.PercentChosen, pct(p.MdAPE), pct(r.Unpartitioned.ByPredictor[name]))
	}
	tw.Flush()
}

// writeForecastCSV writes the per-job results of an evaluation.
func writeForecastCSV(path string, jobs []forecast.JobResult) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("jobs csv: %w", err)
	}
	w := csv.NewWriter(fh)
	w.Write([]string{"id", "submit", "actual", "estimate", "forecast", "ape", "predictor", "partition", "cold_start"}) //nolint:errcheck // checked by Flush
	for _, j := range jobs {
		w.Write([]string{ //nolint:errcheck // checked by Flush
			strconv.FormatInt(j.ID, 10), strconv.FormatInt(j.Submit, 10), strconv.FormatInt(j.Actual, 10),
			strconv.FormatInt(j.Estimate, 10), strconv.FormatFloat(j.Forecast, 'f', 1, 64),
			strconv.FormatFloat(math.Abs(float64(j.Actual)-j.Forecast)/float64(j.Actual), 'f', 4, 64),
			j.Predictor, j.Partition, strconv.FormatBool(j.ColdStart),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		fh.Close()
		return fmt.Errorf("jobs csv: %w", err)
	}
	return fh.Close()
}
