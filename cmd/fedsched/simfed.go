package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/sim"
)

// fedSiteReport is one site of a federated replay's --json output.
type fedSiteReport struct {
	Name   string `json:"name"`
	Procs  int    `json:"procs"`
	Policy string `json:"policy"`
	Jobs   int    `json:"jobs"`
	// Alone and Federated are the metrics of the jobs submitted at the
	// site (AWRT over τ_k), without and with delegation; utilisation is
	// that of the jobs the site executed.
	Alone     sim.Metrics `json:"alone"`
	Federated sim.Metrics `json:"federated"`
	// AWRTChange is (alone - federated) / alone: positive is better, as in
	// the federation literature.
	AWRTChange        float64 `json:"awrt_change"`
	UtilizationAlone  float64 `json:"utilization_alone"`
	UtilizationFed    float64 `json:"utilization_federated"`
	DelegatedOut      int     `json:"delegated_out"`
	DelegatedIn       int     `json:"delegated_in"`
	DelegatedOutShare float64 `json:"delegated_out_share"`
}

type fedReport struct {
	Scenario string          `json:"scenario"`
	Sites    []fedSiteReport `json:"sites"`
	// MigrationsN[k][l] is the share of jobs submitted at k that ran at l;
	// MigrationsSA the same weighted by squashed area.
	MigrationsN  [][]float64 `json:"migrations_n"`
	MigrationsSA [][]float64 `json:"migrations_sa"`
}

// runScenario replays a federation scenario with and without delegation.
func runScenario(cmd *cobra.Command, f simFlags) error {
	sc, err := sim.LoadScenario(f.scenario)
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	cfg, err := sc.Build()
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	fed, err := sim.RunFederation(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	cfg.Federate = false
	alone, err := sim.RunFederation(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	rep := fedReport{Scenario: sc.Name}
	rep.MigrationsN, rep.MigrationsSA = fed.Migrations()
	for k, s := range cfg.Sites {
		r := fedSiteReport{Name: s.Name, Procs: s.Procs, Policy: s.Policy.String(), Jobs: len(s.Jobs),
			Alone: alone.OriginMetrics(k), Federated: fed.OriginMetrics(k)}
		if r.Alone.AWRT > 0 {
			r.AWRTChange = (r.Alone.AWRT - r.Federated.AWRT) / r.Alone.AWRT
		}
		r.UtilizationAlone = alone.ExecMetrics(k).Utilization
		r.UtilizationFed = fed.ExecMetrics(k).Utilization
		for i := range fed.Records {
			x := &fed.Records[i]
			if x.Origin == k && x.Exec != k {
				r.DelegatedOut++
			}
			if x.Exec == k && x.Origin != k {
				r.DelegatedIn++
			}
		}
		if r.Jobs > 0 {
			r.DelegatedOutShare = float64(r.DelegatedOut) / float64(r.Jobs)
		}
		rep.Sites = append(rep.Sites, r)
	}
	printFedTable(cmd.OutOrStdout(), rep)
	if f.jsonOut != "" {
		return writeJSON(cmd.OutOrStdout(), f.jsonOut, rep)
	}
	return nil
}

func printFedTable(w io.Writer, r fedReport) {
	fmt.Fprintf(w, "scenario %s: each site alone vs federated (AWRT over the jobs submitted at the site; + is better)\n", r.Scenario)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "site\tpolicy\tprocs\tjobs\tAWRT alone (s)\tAWRT federated (s)\tchange\tutilisation alone\tutilisation federated\tdelegated out\tdelegated in\t\n")
	for _, s := range r.Sites {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%+.1f %%\t%.1f %%\t%.1f %%\t%d\t%d\t\n", s.Name, s.Policy, s.Procs, s.Jobs,
			s.Alone.AWRT, s.Federated.AWRT, 100*s.AWRTChange, 100*s.UtilizationAlone, 100*s.UtilizationFed, s.DelegatedOut, s.DelegatedIn)
	}
	tw.Flush()
	printMatrix(w, "migration matrix M_n (row: submitted at, column: ran at)", r.Sites, r.MigrationsN)
	printMatrix(w, "migration matrix M_SA (by squashed area)", r.Sites, r.MigrationsSA)
}

func printMatrix(w io.Writer, title string, sites []fedSiteReport, m [][]float64) {
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, s := range sites {
		fmt.Fprintf(tw, "%s\t", s.Name)
	}
	fmt.Fprintln(tw)
	for k, row := range m {
		fmt.Fprintf(tw, "%s\t", sites[k].Name)
		for _, v := range row {
			fmt.Fprintf(tw, "%.3f\t", v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
