package main

import (
	"encoding/csv"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/sim"
)

// experimentSimFlags are the flags an experiment file uses: the file says
// everything else.
var experimentSimFlags = []string{"experiment", "csv", "plot", "runs", "slurm", "slurm-dir", "slurm-partition", "cell"}

// runExperiment runs an experiment file's grid on all cores and writes its
// tidy CSV (--csv), its rows as JSON (--json) and, for the rows with a
// published reference, the reproduction table (markdown) to stdout.
func runExperiment(cmd *cobra.Command, f simFlags) error {
	if err := refuseUnusedFlags(cmd, "an experiment (--experiment; the file sets its scenarios, grid and references)", experimentSimFlags); err != nil {
		return err
	}
	if f.jobsCSV != "" {
		return fmt.Errorf("InvalidArgument: --jobs-csv does not go with --experiment (one row per job of every cell); run a cell's scenario with --scenario --jobs-csv")
	}
	cell := cmd.Flags().Changed("cell")
	switch {
	case (f.slurmDir != "" || f.slurmPartition != "") && !f.slurm:
		return fmt.Errorf("InvalidArgument: --slurm-dir and --slurm-partition go with --slurm")
	case cell && (f.slurm || f.expCSV != "" || f.expPlot != "" || f.jsonOut == ""):
		return fmt.Errorf("InvalidArgument: --cell replays one cell into --json OUT (as a task of --slurm does); it goes with neither --slurm, --csv nor --plot")
	case f.expCSV == "" && f.jsonOut == "":
		return fmt.Errorf("InvalidArgument: --experiment needs --csv FILE (the tidy table) or --json OUT")
	}
	e, err := sim.LoadExperiment(f.experiment)
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	if cmd.Flags().Changed("runs") {
		if f.sla.runs < 1 || f.sla.runs > 1000 {
			return fmt.Errorf("InvalidArgument: --runs %d: want 1 to 1000 replications", f.sla.runs)
		}
		e.Runs = f.sla.runs
	}
	var rows []sim.ExperimentRow
	switch {
	case cell:
		rows, err = e.RunCell(cmd.Context(), f.cell)
		if err != nil {
			return err
		}
		return writeJSON(cmd.OutOrStdout(), f.jsonOut, rows)
	case f.slurm:
		rows, err = runSlurmCells(cmd, f, e)
	default:
		rows, err = e.Run(cmd.Context())
	}
	if err != nil {
		return err
	}
	if f.expCSV != "" {
		fh, err := os.Create(f.expCSV)
		if err != nil {
			return fmt.Errorf("experiment csv: %w", err)
		}
		w := csv.NewWriter(fh)
		w.Write(sim.ExperimentCSVHeader) //nolint:errcheck // checked by Flush
		for _, r := range rows {
			w.Write(r.Record()) //nolint:errcheck // checked by Flush
		}
		w.Flush()
		if err := w.Error(); err != nil {
			fh.Close()
			return fmt.Errorf("experiment csv: %w", err)
		}
		if err := fh.Close(); err != nil {
			return fmt.Errorf("experiment csv: %w", err)
		}
	}
	if f.expPlot != "" {
		if err := plotExperiment(f.expPlot, e.Name, rows); err != nil {
			return err
		}
	}
	out := tableOut(cmd, f.jsonOut)
	fmt.Fprintf(out, "experiment %s: %d rows", e.Name, len(rows))
	if f.expCSV != "" {
		fmt.Fprintf(out, " written to %s", f.expCSV)
	}
	if f.expPlot != "" {
		fmt.Fprintf(out, ", plotted to %s", f.expPlot)
	}
	fmt.Fprintln(out)
	if e.Runs <= 1 && hasReference(rows) {
		fmt.Fprint(out, "\n"+sim.ReproductionTable(rows))
	} else {
		fmt.Fprint(out, "\n"+sim.Summary(rows))
	}
	if f.jsonOut != "" {
		return writeJSON(cmd.OutOrStdout(), f.jsonOut, rows)
	}
	return nil
}

func hasReference(rows []sim.ExperimentRow) bool {
	for _, r := range rows {
		if r.StudyAWRTChange != nil || r.StudyUtilizationChange != nil {
			return true
		}
	}
	return false
}
