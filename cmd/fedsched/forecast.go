package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/forecast"
	"github.com/fedsched/fedsched/swf"
)

type forecastFlags struct {
	trace   string
	jsonOut string
	chain   string
	selectB string
	noCap   bool
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
	fl.StringVar(&f.jsonOut, "json", "", "write the report as JSON to this file ('-' for stdout)")
	fl.StringVar(&f.chain, "chain", "", "fixed partition chain instead of the automated search, finest first, comma-separated, e.g. user+estimate,user (attributes: user, group, app, queue, procs, estimate, week, weekday, hour)")
	fl.StringVar(&f.selectB, "select", forecast.DefaultConfig().SelectBy.String(), "error measure that picks each partition's predictor: mae (the thesis's), ape or log")
	fl.BoolVar(&f.noCap, "no-cap", false, "do not cap forecasts at the user's estimate")
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
	rep, err := forecast.Evaluate(forecast.FromSWF(tr.Jobs), cfg)
	if err != nil {
		return fmt.Errorf("forecast %s: %w", tr.Name, err)
	}
	out := forecastReport{Trace: tr.Name, Report: rep}
	printForecastTable(cmd.OutOrStdout(), out)
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
	fmt.Fprintln(w)

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
