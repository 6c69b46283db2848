package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/sim"
)

// jobsCSVHeader is the one schema of --jobs-csv in every mode: one tidy row
// per job, times in seconds, empty cells for what does not apply (a job
// that never started has no start, wait or slowdown; a job without a
// deadline or a forecast has none), so that pandas.read_csv reads it as it
// is. docs/simulation.md lists the columns.
var jobsCSVHeader = []string{"run", "site", "exec_site", "id", "user", "group", "queue", "app", "submit_s", "procs", "estimate_s", "runtime_s",
	"forecast_s", "decision", "started", "start_s", "end_s", "wait_s", "response_s", "bounded_slowdown", "reserved_s", "killed", "deadline_s", "fee", "penalty", "hops", "route",
	"leased_procs", "lender_site"}

// jobRow is one job of one run: the record, the site it was submitted at
// and the one it ran at, its route ("site:action" hops joined by '>'), and
// the processors it ran on leased from another site (the study's leasing),
// with that site.
type jobRow struct {
	run        int
	site, exec string
	rec        *sim.Record
	hops       int
	route      string
	leased     int
	lender     string
}

// writeJobRows writes rows to path as --jobs-csv.
func writeJobRows(path string, rows func(yield func(jobRow) bool)) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("jobs csv: %w", err)
	}
	w := csv.NewWriter(fh)
	w.Write(jobsCSVHeader) //nolint:errcheck // checked by Flush
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	for x := range rows {
		r := x.rec
		start, end, wait, resp, bsld, reserved, deadline, fc := "", "", "", "", "", "", "", ""
		if r.Started {
			p := r.Ran()
			start, end, wait, resp = i64(r.Start), i64(r.End), i64(r.Start-r.Submit), i64(r.End-r.Submit)
			bsld = strconv.FormatFloat(max(1, float64(r.Start-r.Submit+p)/float64(max(p, sim.BoundedSlowdownTau))), 'f', 4, 64)
			reserved = i64(r.Reserved)
		}
		if r.Forecast > 0 {
			fc = i64(r.Forecast)
		}
		if r.Deadline < plan.Forever {
			deadline = i64(r.Deadline)
		}
		leased := ""
		if x.leased > 0 {
			leased = strconv.Itoa(x.leased)
		}
		w.Write([]string{ //nolint:errcheck // checked by Flush
			strconv.Itoa(x.run), x.site, x.exec, i64(r.ID), r.User, r.Group, r.Queue, r.App, i64(r.Submit), strconv.Itoa(r.Procs),
			i64(r.Estimate), i64(r.Runtime), fc, r.Decision.Reason.String(), strconv.FormatBool(r.Started), start, end, wait, resp, bsld,
			reserved, strconv.FormatBool(r.Killed), deadline, strconv.FormatFloat(r.Fee, 'f', -1, 64), strconv.FormatFloat(r.Penalty, 'f', -1, 64),
			strconv.Itoa(x.hops), x.route, leased, x.lender,
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		fh.Close()
		return fmt.Errorf("jobs csv: %w", err)
	}
	return fh.Close()
}

// siteRows are the rows of one site's replay (run run).
func siteRows(run int, site string, recs []sim.Record) func(func(jobRow) bool) {
	return func(yield func(jobRow) bool) {
		for i := range recs {
			if !yield(jobRow{run: run, site: site, exec: site, rec: &recs[i], route: site + ":submitted"}) {
				return
			}
		}
	}
}

// fedRows are the rows of a federated replay's runs.
func fedRows(runs []*sim.FedResult) func(func(jobRow) bool) {
	return func(yield func(jobRow) bool) {
		for run, r := range runs {
			for i := range r.Records {
				x := &r.Records[i]
				hops := make([]string, len(x.Route))
				for h, hop := range x.Route {
					hops[h] = hop.Site + ":" + hop.Action.String()
				}
				row := jobRow{run: run, site: r.Sites[x.Origin].Name, exec: r.Sites[x.Exec].Name, rec: &x.Record,
					hops: x.Route.Hops(), route: strings.Join(hops, ">")}
				if x.Leased > 0 {
					row.leased, row.lender = x.Leased, r.Sites[x.Lender].Name
				}
				if !yield(row) {
					return
				}
			}
		}
	}
}

// The flags each mode of fedsched sim uses; every other flag is refused
// rather than silently ignored.
var (
	commonSimFlags   = []string{"json", "jobs-csv", "cpuprofile"}
	plainSimFlags    = []string{"trace", "procs", "policy", "sanitize", "rule4", "skip-malformed", "fixed-reservations", "deadline-model", "forecast", "offered-load", "span", "gantt", "utilisation-plot", "queue-plot", "plot-bin", "from", "to", "start-accuracy-plot", "seed"}
	strategySimFlags = []string{"trace", "procs", "sanitize", "rule4", "skip-malformed", "fixed-reservations", "strategy", "pof-max", "risk-test", "security-factor", "penalty-ratio", "load", "runs", "jobs", "train-jobs", "min-samples", "failure-rate", "repair-rate", "seed", "classes", "learn", "stats", "gap-choice", "sweep", "start-accuracy-plot", "urgency"}
	libraSimFlags    = []string{"trace", "procs", "sanitize", "rule4", "skip-malformed", "strategy", "penalty-ratio", "load", "runs", "jobs", "seed", "urgency"}
	scenarioSimFlags = []string{"scenario", "runs", "utilisation-plot", "queue-plot", "plot-bin", "from", "to"}
)

// refuseUnusedFlags returns an InvalidArgument error naming every flag set
// on cmd that mode does not use.
func refuseUnusedFlags(cmd *cobra.Command, mode string, used []string) error {
	ok := map[string]bool{}
	for _, n := range append(used, commonSimFlags...) {
		ok[n] = true
	}
	var bad []string
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if !ok[fl.Name] {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	var list []string
	for _, n := range used {
		list = append(list, "--"+n)
	}
	return fmt.Errorf("InvalidArgument: %s: no effect in %s (it uses %s, and --json, --jobs-csv and --cpuprofile; see docs/simulation.md)",
		strings.Join(bad, ", "), mode, strings.Join(list, ", "))
}

// refuseIdleFlags refuses the flags of a replay that have no effect
// without another: each names what it needs.
func refuseIdleFlags(cmd *cobra.Command, f simFlags, plain bool) error {
	set := cmd.Flags().Changed
	plots := f.utilPlot != "" || f.queuePlot != ""
	switch {
	case set("plot-bin") && !plots:
		return fmt.Errorf("InvalidArgument: --plot-bin has no effect without --utilisation-plot or --queue-plot")
	case (set("from") || set("to")) && !plots && f.gantt == "":
		return fmt.Errorf("InvalidArgument: --from and --to have no effect without --gantt, --utilisation-plot or --queue-plot")
	}
	if !plain {
		return nil
	}
	pol, err := plan.ParsePolicy(f.policy)
	if err != nil {
		return fmt.Errorf("InvalidArgument: --policy: %w", err)
	}
	deadlines := f.deadline != "" && f.deadline != "none" || f.deadline == "" && pol.DeadlineOrdered()
	switch {
	case set("forecast") && pol != plan.LTTR:
		return fmt.Errorf("InvalidArgument: --forecast has no effect with --policy %s (only LTTR orders by a forecast)", pol)
	case set("rule4") && !f.sanitize:
		return fmt.Errorf("InvalidArgument: --rule4 has no effect without --sanitize")
	case set("seed") && !deadlines:
		return fmt.Errorf("InvalidArgument: --seed has no effect in a plain replay without deadlines (it seeds --deadline-model's draws)")
	}
	return nil
}
