package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
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
	// that of the jobs the site executed. With --runs, Federated is the
	// first replication's (the scenario's own seed).
	Alone     sim.Metrics `json:"alone"`
	Federated sim.Metrics `json:"federated"`
	// AWRTChange is (alone - federated) / alone: positive is better, as in
	// the federation literature. With --runs: the mean over replications.
	AWRTChange        float64 `json:"awrt_change"`
	UtilizationAlone  float64 `json:"utilization_alone"`
	UtilizationFed    float64 `json:"utilization_federated"`
	DelegatedOut      float64 `json:"delegated_out"`
	DelegatedIn       float64 `json:"delegated_in"`
	DelegatedOutShare float64 `json:"delegated_out_share"`
	// With --runs: the mean federated AWRT and the half-widths of the 95 %
	// intervals (Student's t) of the figures above.
	AWRTFederatedMean *float64 `json:"awrt_federated_mean,omitempty"`
	AWRTFederatedCI95 *float64 `json:"awrt_federated_ci95,omitempty"`
	AWRTChangeCI95    *float64 `json:"awrt_change_ci95,omitempty"`
	DelegatedOutCI95  *float64 `json:"delegated_out_ci95,omitempty"`
	DelegatedInCI95   *float64 `json:"delegated_in_ci95,omitempty"`
	// Offers under a delegation protocol (absent for the study's central
	// strategies): the jobs the site offered to peers, those it kept
	// after all, and those of the kept ones a peer it did not ask could
	// have started at once (sim.FedResult.KeptStartable).
	Offered                  *float64 `json:"offered,omitempty"`
	OfferedCI95              *float64 `json:"offered_ci95,omitempty"`
	Kept                     *float64 `json:"kept,omitempty"`
	KeptCI95                 *float64 `json:"kept_ci95,omitempty"`
	KeptStartableUnasked     *float64 `json:"kept_startable_unasked,omitempty"`
	KeptStartableUnaskedCI95 *float64 `json:"kept_startable_unasked_ci95,omitempty"`
	// SLA appears when the scenario gives jobs deadlines, fees or
	// overbooking.
	SLA *fedSLAReport `json:"sla,omitempty"`
	// Lease appears with the study's leasing (lease-blos, lease-clos):
	// the site's lease requests, leases and peaks (the first
	// replication's).
	Lease *sim.LeaseStats `json:"lease,omitempty"`
}

// fedSLAReport is the SLA outcome at a site (sim.FedSLA: counted where the
// jobs ran, as the live demo counts), or over all sites in totals; with
// --runs, means and 95 % half-widths.
type fedSLAReport struct {
	Accepted                      float64  `json:"accepted"`
	AcceptedCI95                  *float64 `json:"accepted_ci95,omitempty"`
	Rejected                      float64  `json:"rejected"`
	RejectedCI95                  *float64 `json:"rejected_ci95,omitempty"`
	Overbooked                    float64  `json:"overbooked"`
	OverbookedCI95                *float64 `json:"overbooked_ci95,omitempty"`
	Met                           float64  `json:"met"`
	MetCI95                       *float64 `json:"met_ci95,omitempty"`
	Violated                      float64  `json:"violated"`
	ViolatedCI95                  *float64 `json:"violated_ci95,omitempty"`
	Gain                          float64  `json:"gain"`
	GainCI95                      *float64 `json:"gain_ci95,omitempty"`
	AcceptedByOverbookingPeer     float64  `json:"accepted_by_overbooking_peer"`
	AcceptedByOverbookingPeerCI95 *float64 `json:"accepted_by_overbooking_peer_ci95,omitempty"`
	GainByOverbookingPeer         float64  `json:"gain_by_overbooking_peer"`
	GainByOverbookingPeerCI95     *float64 `json:"gain_by_overbooking_peer_ci95,omitempty"`
	// Fees, PriceEarned and PricePaid appear when a site prices its
	// quotes (sim.FedSLA: gain = fees + price_earned − price_paid −
	// penalties).
	Fees            *float64 `json:"fees,omitempty"`
	FeesCI95        *float64 `json:"fees_ci95,omitempty"`
	PriceEarned     *float64 `json:"price_earned,omitempty"`
	PriceEarnedCI95 *float64 `json:"price_earned_ci95,omitempty"`
	PricePaid       *float64 `json:"price_paid,omitempty"`
	PricePaidCI95   *float64 `json:"price_paid_ci95,omitempty"`
	// Failed and FailureViolations appear when a site's processors fail.
	Failed                *float64 `json:"failed,omitempty"`
	FailedCI95            *float64 `json:"failed_ci95,omitempty"`
	FailureViolations     *float64 `json:"failure_violations,omitempty"`
	FailureViolationsCI95 *float64 `json:"failure_violations_ci95,omitempty"`
}

type fedTotals struct {
	Jobs      int     `json:"jobs"`
	Delegated float64 `json:"delegated"`
	// Under a delegation protocol: the sites' offers summed (as each
	// site's), and the messages the sites sent (mean per replication),
	// in all and by kind (quote_request, quote, agree, agreed, release,
	// report, report_ack, queue_request, queue, take, taken).
	Offered              *float64           `json:"offered,omitempty"`
	Kept                 *float64           `json:"kept,omitempty"`
	KeptStartableUnasked *float64           `json:"kept_startable_unasked,omitempty"`
	Messages             *float64           `json:"messages,omitempty"`
	MessagesCI95         *float64           `json:"messages_ci95,omitempty"`
	MessagesByKind       map[string]float64 `json:"messages_by_kind,omitempty"`
	SLA                  *fedSLAReport      `json:"sla,omitempty"`
}

type fedReport struct {
	Scenario string          `json:"scenario"`
	Transfer string          `json:"transfer"`
	Runs     int             `json:"runs"`
	Sites    []fedSiteReport `json:"sites"`
	Totals   fedTotals       `json:"totals"`
	// MigrationsN[k][l] is the share of jobs submitted at k that ran at l;
	// MigrationsSA the same weighted by squashed area (first replication).
	MigrationsN  [][]float64 `json:"migrations_n"`
	MigrationsSA [][]float64 `json:"migrations_sa"`
}

// meanCI returns the mean of xs and, with more than one value, a pointer
// to the half-width of its 95 % interval.
func meanCI(xs []float64) (float64, *float64) {
	m, h := sim.MeanCI95(xs)
	if len(xs) < 2 {
		return m, nil
	}
	return m, &h
}

func fedSLAOf(runs []sim.FedSLA, failures, prices bool) *fedSLAReport {
	pick := func(f func(sim.FedSLA) float64) []float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return xs
	}
	var r fedSLAReport
	r.Accepted, r.AcceptedCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.Accepted) }))
	r.Rejected, r.RejectedCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.Rejected) }))
	r.Overbooked, r.OverbookedCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.Overbooked) }))
	r.Met, r.MetCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.Met) }))
	r.Violated, r.ViolatedCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.Violated) }))
	r.Gain, r.GainCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return s.Gain }))
	r.AcceptedByOverbookingPeer, r.AcceptedByOverbookingPeerCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.AcceptedByOverbookingPeer) }))
	r.GainByOverbookingPeer, r.GainByOverbookingPeerCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return s.GainByOverbookingPeer }))
	if prices {
		var f, e, p float64
		f, r.FeesCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return s.Fees }))
		e, r.PriceEarnedCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return s.PriceEarned }))
		p, r.PricePaidCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return s.PricePaid }))
		r.Fees, r.PriceEarned, r.PricePaid = &f, &e, &p
	}
	if failures {
		var f, v float64
		f, r.FailedCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.Failed) }))
		v, r.FailureViolationsCI95 = meanCI(pick(func(s sim.FedSLA) float64 { return float64(s.FailureViolations) }))
		r.Failed, r.FailureViolations = &f, &v
	}
	return &r
}

func addSLA(a, b sim.FedSLA) sim.FedSLA {
	return sim.FedSLA{Accepted: a.Accepted + b.Accepted, Rejected: a.Rejected + b.Rejected, Overbooked: a.Overbooked + b.Overbooked,
		Met: a.Met + b.Met, Violated: a.Violated + b.Violated, Fees: a.Fees + b.Fees, Penalties: a.Penalties + b.Penalties, Gain: a.Gain + b.Gain,
		PriceEarned: a.PriceEarned + b.PriceEarned, PricePaid: a.PricePaid + b.PricePaid,
		AcceptedByOverbookingPeer: a.AcceptedByOverbookingPeer + b.AcceptedByOverbookingPeer, GainByOverbookingPeer: a.GainByOverbookingPeer + b.GainByOverbookingPeer,
		Failed: a.Failed + b.Failed, FailureViolations: a.FailureViolations + b.FailureViolations}
}

// runScenario replays a federation scenario with and without delegation;
// with --runs N, N independent replications with seeds derived from the
// scenario's seed.
func runScenario(cmd *cobra.Command, f simFlags) error {
	runs := 1
	if cmd.Flags().Changed("runs") {
		runs = f.sla.runs
	}
	if runs < 1 || runs > 1000 {
		return fmt.Errorf("InvalidArgument: --runs %d: want 1 to 1000 replications", runs)
	}
	sc, err := sim.LoadScenario(f.scenario)
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	cfg, err := sc.Build()
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	// Each replication runs federated; its baseline (every site alone) is
	// shared unless the replications differ in their jobs or failures.
	// The replays are independent: they run two at a time, the baseline
	// beside its federated replay, and the results are gathered before
	// anything is printed, so the output does not depend on which ends
	// first.
	own := sc.ReplicationVaries() || sc.HasFailures()
	feds, alones := make([]*sim.FedResult, runs), make([]*sim.FedResult, runs)
	cfgs := make([]sim.FedConfig, runs)
	for i := range runs {
		cfgs[i] = cfg
		cfgs[i].Seed = sim.ReplicationSeed(cfg.Seed, i)
		if sc.ReplicationVaries() && i > 0 {
			if cfgs[i], err = sc.BuildReplication(i); err != nil {
				return err
			}
		}
	}
	type replay struct {
		i        int
		federate bool
	}
	var replays []replay
	for i := range runs {
		replays = append(replays, replay{i, true})
		if i == 0 || own {
			replays = append(replays, replay{i, false})
		}
	}
	errs := make([]error, len(replays))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for x, r := range replays {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c := cfgs[r.i]
			c.Federate = r.federate
			res, err := sim.RunFederation(cmd.Context(), c)
			if err == nil {
				// The per-site metrics the report reads, while the
				// other replay may still run (the baseline ends first).
				for k := range c.Sites {
					res.OriginMetrics(k)
					res.ExecMetrics(k)
				}
			}
			if r.federate {
				feds[r.i] = res
			} else {
				alones[r.i] = res
			}
			errs[x] = err
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	for i := range alones {
		if alones[i] == nil {
			alones[i] = alones[0]
		}
	}
	alone := alones[0]
	fed := feds[0]
	transfer := sc.Transfer
	if transfer == "" {
		transfer = cfg.Transfer.String()
	}
	rep := fedReport{Scenario: sc.Name, Transfer: transfer, Runs: runs}
	rep.MigrationsN, rep.MigrationsSA = fed.Migrations()
	slas, failures, prices := sc.HasSLAs(), sc.HasFailures(), sc.HasPrices()
	totals := make([]sim.FedSLA, runs)
	delegated := make([]float64, runs)
	protocol := fed.Offered != nil
	var offers [3][]float64 // offered, kept, kept startable unasked: sums over the sites, per replication
	for i := range offers {
		offers[i] = make([]float64, runs)
	}
	for k, s := range cfg.Sites {
		r := fedSiteReport{Name: s.Name, Procs: s.Procs, Policy: s.Policy.String(), Jobs: len(s.Jobs),
			Alone: alone.OriginMetrics(k), Federated: fed.OriginMetrics(k)}
		r.UtilizationAlone = alone.ExecMetrics(k).Utilization
		r.UtilizationFed = fed.ExecMetrics(k).Utilization
		awrt, change, out, in := make([]float64, runs), make([]float64, runs), make([]float64, runs), make([]float64, runs)
		perRun := make([]sim.FedSLA, runs)
		for i, fr := range feds {
			awrt[i] = fr.OriginMetrics(k).AWRT
			if a := alones[i].OriginMetrics(k).AWRT; a > 0 {
				change[i] = (a - awrt[i]) / a
			}
			o, n := fr.Delegations(k)
			out[i], in[i] = float64(o), float64(n)
			delegated[i] += float64(o)
			if slas {
				perRun[i] = fr.SLA(k)
				totals[i] = addSLA(totals[i], perRun[i])
			}
		}
		if protocol {
			var per [3][]float64
			for i, fr := range feds {
				for x, v := range []int{fr.Offered[k], fr.Kept[k], fr.KeptStartable[k]} {
					per[x] = append(per[x], float64(v))
					offers[x][i] += float64(v)
				}
			}
			var o, kp, ks float64
			o, r.OfferedCI95 = meanCI(per[0])
			kp, r.KeptCI95 = meanCI(per[1])
			ks, r.KeptStartableUnaskedCI95 = meanCI(per[2])
			r.Offered, r.Kept, r.KeptStartableUnasked = &o, &kp, &ks
		}
		r.AWRTChange, r.AWRTChangeCI95 = meanCI(change)
		r.DelegatedOut, r.DelegatedOutCI95 = meanCI(out)
		r.DelegatedIn, r.DelegatedInCI95 = meanCI(in)
		if runs > 1 {
			m, h := meanCI(awrt)
			r.AWRTFederatedMean, r.AWRTFederatedCI95 = &m, h
		}
		if r.Jobs > 0 {
			r.DelegatedOutShare = r.DelegatedOut / float64(r.Jobs)
		}
		if slas {
			r.SLA = fedSLAOf(perRun, failures, prices)
		}
		if fed.Leasing != nil {
			r.Lease = &fed.Leasing[k]
		}
		rep.Totals.Jobs += r.Jobs
		rep.Sites = append(rep.Sites, r)
	}
	rep.Totals.Delegated, _ = meanCI(delegated)
	if protocol {
		var o, kp, ks float64
		o, _ = meanCI(offers[0])
		kp, _ = meanCI(offers[1])
		ks, _ = meanCI(offers[2])
		rep.Totals.Offered, rep.Totals.Kept, rep.Totals.KeptStartableUnasked = &o, &kp, &ks
		msgs := make([]float64, runs)
		rep.Totals.MessagesByKind = make(map[string]float64)
		for i, fr := range feds {
			for kind, c := range fr.Messages {
				msgs[i] += float64(c)
				rep.Totals.MessagesByKind[strings.ReplaceAll(kind, "-", "_")] += float64(c) / float64(runs)
			}
		}
		var m float64
		m, rep.Totals.MessagesCI95 = meanCI(msgs)
		rep.Totals.Messages = &m
	}
	if slas {
		rep.Totals.SLA = fedSLAOf(totals, failures, prices)
	}
	printFedTable(tableOut(cmd, f.jsonOut), rep)
	if f.utilPlot != "" || f.queuePlot != "" {
		if err := writeFedTimelinePlots(f, sc.Name, alone, fed); err != nil {
			return err
		}
	}
	if f.jobsCSV != "" {
		if err := writeJobRows(f.jobsCSV, fedRows(feds)); err != nil {
			return err
		}
	}
	if f.jsonOut != "" {
		return writeJSON(cmd.OutOrStdout(), f.jsonOut, rep)
	}
	return nil
}

func printFedTable(out io.Writer, r fedReport) {
	// Buffered: the tables and the two matrices are a few hundred
	// thousand small writes (a write system call each on a terminal or a
	// pipe: a tenth of the grid proxy's command).
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush() //nolint:errcheck // as the unbuffered writes were, unchecked
	runs := ""
	if r.Runs > 1 {
		runs = fmt.Sprintf("; means of %d replications ± 95 %% half-width", r.Runs)
	}
	fmt.Fprintf(w, "scenario %s (%s): each site alone vs federated (AWRT over the jobs submitted at the site; + is better%s)\n", r.Scenario, r.Transfer, runs)
	pm := func(x float64, h *float64, f string) string {
		if h == nil {
			return fmt.Sprintf(f, x)
		}
		return fmt.Sprintf(f+" ± "+strings.ReplaceAll(f, "+", ""), x, *h)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "site\tpolicy\tprocs\tjobs\tAWRT alone (s)\tAWRT federated (s)\tchange (%%)\tutilisation alone\tutilisation federated\tdelegated out\tdelegated in\t\n")
	for _, s := range r.Sites {
		awrt := s.Federated.AWRT
		if s.AWRTFederatedMean != nil {
			awrt = *s.AWRTFederatedMean
		}
		var ch *float64
		if s.AWRTChangeCI95 != nil {
			c := 100 * *s.AWRTChangeCI95
			ch = &c
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%s\t%s\t%.1f %%\t%.1f %%\t%s\t%s\t\n", s.Name, s.Policy, s.Procs, s.Jobs,
			s.Alone.AWRT, pm(awrt, s.AWRTFederatedCI95, "%.0f"), pm(100*s.AWRTChange, ch, "%+.1f"), 100*s.UtilizationAlone, 100*s.UtilizationFed,
			pm(s.DelegatedOut, s.DelegatedOutCI95, "%.0f"), pm(s.DelegatedIn, s.DelegatedInCI95, "%.0f"))
	}
	tw.Flush()
	if r.Totals.SLA != nil {
		fmt.Fprintln(w, "SLAs where the jobs ran (rejected: submitted there, taken by no site; by overbooking peer: submitted there, accepted by a peer only by overbooking)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fails, priced := r.Totals.SLA.Failed != nil, r.Totals.SLA.Fees != nil
		fmt.Fprintf(tw, "site\taccepted\trejected\toverbooked\tmet\tviolated\tgain\tby overbooking peer\tgain by overbooking peer\t")
		if priced {
			fmt.Fprintf(tw, "fees\tprice earned\tprice paid\t")
		}
		if fails {
			fmt.Fprintf(tw, "failed\tfailure violations\t")
		}
		fmt.Fprintln(tw)
		row := func(name string, s *fedSLAReport) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", name, pm(s.Accepted, s.AcceptedCI95, "%.0f"), pm(s.Rejected, s.RejectedCI95, "%.0f"),
				pm(s.Overbooked, s.OverbookedCI95, "%.0f"), pm(s.Met, s.MetCI95, "%.0f"), pm(s.Violated, s.ViolatedCI95, "%.0f"),
				pm(s.Gain, s.GainCI95, "%.0f"), pm(s.AcceptedByOverbookingPeer, s.AcceptedByOverbookingPeerCI95, "%.0f"),
				pm(s.GainByOverbookingPeer, s.GainByOverbookingPeerCI95, "%.0f"))
			if priced {
				fmt.Fprintf(tw, "%s\t%s\t%s\t", pm(*s.Fees, s.FeesCI95, "%.0f"), pm(*s.PriceEarned, s.PriceEarnedCI95, "%.0f"), pm(*s.PricePaid, s.PricePaidCI95, "%.0f"))
			}
			if fails {
				fmt.Fprintf(tw, "%s\t%s\t", pm(*s.Failed, s.FailedCI95, "%.0f"), pm(*s.FailureViolations, s.FailureViolationsCI95, "%.0f"))
			}
			fmt.Fprintln(tw)
		}
		for _, s := range r.Sites {
			row(s.Name, s.SLA)
		}
		row("total", r.Totals.SLA)
		tw.Flush()
	}
	if len(r.Sites) > 0 && r.Sites[0].Lease != nil {
		fmt.Fprintln(w, "leasing (requests: one per partner asked; peak: most processors leased at one time; area: SA^λ as a share of the squashed area the site submitted)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "site\trequests\trefused\tjobs with a lease\tleases granted\tpeak leased in\tpeak leased out\tarea leased in\tarea leased out\t\n")
		for _, s := range r.Sites {
			l, own := s.Lease, s.Federated.SquashedArea
			share := func(a float64) string {
				if own == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f %%", 100*a/own)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", s.Name, l.Requests, l.Refused, l.Leases, l.Lent, l.PeakIn, l.PeakOut,
				share(l.AreaIn), share(l.AreaOut))
		}
		tw.Flush()
	}
	if t := r.Totals; t.Messages != nil {
		fmt.Fprintf(w, "offers: %.0f jobs offered to peers, %.0f kept at home after all, %.0f of these startable at once by a peer not asked; %s messages sent\n",
			*t.Offered, *t.Kept, *t.KeptStartableUnasked, pm(*t.Messages, t.MessagesCI95, "%.0f"))
	}
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
