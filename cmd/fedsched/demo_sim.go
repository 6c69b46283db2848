package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fedsched/fedsched/e2e"
	"github.com/fedsched/fedsched/sim"
	"github.com/fedsched/fedsched/swf"
)

// demoHistoryJobs is how many KTH jobs before the replayed ones the
// overbooking sites have seen: the demo skips them and writes them as the
// sites' overbooking.history, so that their runtime statistics hold the
// samples overbooking needs (overbooking.min_samples) from the first job.
const demoHistoryJobs = 2000

// demoSlice is the demo's workload: f.jobs KTH jobs after the history, one
// to twenty minutes long (ten for short demos), twenty virtual seconds of
// submissions per job, an offered load of 1 over the federation.
func demoSlice(f demoFlags) e2e.TraceSlice {
	span := int64(f.jobs) * 20
	ts := e2e.TraceSlice{Trace: demoTrace, Skip: demoHistoryJobs, Jobs: f.jobs, Span: span, MinEstimate: 60,
		MaxEstimate: min(1200, max(600, span/10)), Load: 1, Seed: f.seed}
	for _, s := range demoSites {
		ts.Sites = append(ts.Sites, e2e.SliceSite{Name: s.Name, Procs: s.Procs, Share: s.share})
	}
	return ts
}

// writeDemoHistory writes the trace jobs before the demo's slice, scaled as
// the slice, as an SWF file: the overbooking sites' overbooking.history.
func writeDemoHistory(ts e2e.TraceSlice, info sim.SliceInfo, path string) (int, error) {
	past, err := sim.TraceSlice(ts).History(demoHistoryJobs, info)
	if err != nil {
		return 0, err
	}
	jobs := make([]swf.Job, len(past))
	for i, j := range past {
		p := int64(j.Procs)
		jobs[i] = swf.Job{ID: j.TraceID, Submit: j.At, Runtime: j.Runtime, AllocProcs: p, AvgCPU: -1, UsedMem: -1, ReqProcs: p,
			ReqTime: j.Estimate, ReqMem: -1, Status: 1, User: -1, Group: -1, Executable: -1, Queue: -1, Partition: -1, PrecedingJob: -1, ThinkTime: -1}
	}
	fh, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	header := []string{fmt.Sprintf("fedsched demo: the %d %s jobs before the replayed ones, scaled as they are", len(jobs), demoTrace)}
	if err := swf.Write(fh, header, jobs); err != nil {
		fh.Close()
		return 0, err
	}
	return len(jobs), fh.Close()
}

// demoScenario is the demo as a simulator scenario: the same sites,
// admission, SLA terms, jobs and history; on-reject delegation as the live
// node does it. scenarios/demo.yaml is this with the default flags
// (TestDemoScenarioFile).
func demoScenario(f demoFlags) (*sim.Scenario, error) {
	ts := demoSlice(f)
	sc := sim.Scenario{Name: "demo", Seed: f.seed, Transfer: "on-reject",
		Workload: &sim.ScenarioWorkload{Trace: ts.Trace, Skip: ts.Skip, History: demoHistoryJobs, Jobs: ts.Jobs, Span: ts.Span,
			MinEstimate: ts.MinEstimate, MaxEstimate: ts.MaxEstimate, Load: ts.Load}}
	for _, s := range demoSites {
		o := s.Overbooking
		ob := sim.ScenarioOverbooking{Enabled: o.Enabled, Mode: o.Mode, RiskTest: o.RiskTest}
		if o.Enabled && o.RiskTest != "risk" {
			pm := o.PoFMax
			ob.PoFMax = &pm
		}
		sc.Sites = append(sc.Sites, sim.ScenarioSite{Name: s.Name, Procs: s.Procs, Policy: "conservative", Share: s.share,
			Overbooking: ob, Deadlines: sim.ScenarioDeadlines{Factor: 2}, Fees: sim.ScenarioFees{Enabled: true}})
	}
	// Through the parser, so that the scenario is checked as a file is.
	b, err := yaml.Marshal(&sc)
	if err != nil {
		return nil, err
	}
	return sim.ParseScenario(b)
}

// demoCounterfactual is the demo's workload replayed in the simulator in
// one configuration, with its SLA totals.
type demoCounterfactual struct {
	what string
	sla  sim.FedSLA
}

// simulateDemo replays the demo's jobs in the simulator as the live sites
// ran them, without federation, without overbooking, and with neither.
func simulateDemo(ctx context.Context, f demoFlags) ([]demoCounterfactual, error) {
	sc, err := demoScenario(f)
	if err != nil {
		return nil, fmt.Errorf("the demo's scenario: %w", err)
	}
	cfg, err := sc.Build()
	if err != nil {
		return nil, err
	}
	noOverbooking := cfg
	noOverbooking.Sites = append([]sim.FedSite(nil), cfg.Sites...)
	for i := range noOverbooking.Sites {
		noOverbooking.Sites[i].Overbooking = nil
	}
	var out []demoCounterfactual
	for _, c := range []struct {
		what     string
		cfg      sim.FedConfig
		federate bool
	}{
		{"simulated, as live", cfg, true},
		{"simulated, no federation", cfg, false},
		{"simulated, no overbooking", noOverbooking, true},
		{"simulated, neither", noOverbooking, false},
	} {
		c.cfg.Federate = c.federate
		r, err := sim.RunFederation(ctx, c.cfg)
		if err != nil {
			return nil, err
		}
		var t sim.FedSLA
		for k := range c.cfg.Sites {
			t = addSLA(t, r.SLA(k))
		}
		out = append(out, demoCounterfactual{what: c.what, sla: t})
	}
	return out, nil
}

// printDemoComparison prints the live totals beside the simulator's
// replays of the same jobs, and what federation and overbooking bought.
func printDemoComparison(w io.Writer, timeScale float64, live []e2e.SiteSummary, rows []demoCounterfactual) {
	fmt.Fprintln(w, "\nThe same jobs in the simulator (same sites, SLAs and history; one run each):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	width := len("simulated, no overbooking")
	fmt.Fprintf(tw, "%-*s\taccepted\trejected\toverbooked\tmet\tviolated\tgain\t\n", width, "")
	l := demoTotal(live)
	fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%.1f\t\n", width, "live (above)", l.Accepted, l.Rejected, l.Overbooked, l.Met, l.Violated, l.Gain)
	for _, r := range rows {
		s := r.sla
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%.1f\t\n", width, r.what, s.Accepted, s.Rejected, s.Overbooked, s.Met, s.Violated, s.Gain)
	}
	tw.Flush()
	if len(rows) == 4 {
		all, noFed, noOB := rows[0].sla.Gain, rows[1].sla.Gain, rows[2].sla.Gain
		fmt.Fprintf(w, "In the simulator, federation bought %+.1f of gain (%+.0f %%) and overbooking %+.1f (%+.0f %%) on these jobs.\n",
			all-noFed, change(all, noFed), all-noOB, change(all, noOB))
	}
	// The simulator's network is instant; live, every millisecond a quote
	// takes is timeScale milliseconds of the jobs' deadlines.
	fmt.Fprintf(w, "Live, every millisecond the sites spend on the network and on quotes is %.2g virtual seconds at %gx: some jobs\n"+
		"near their deadline lose it and are rejected, where the simulator's network is instant. With --time-scale 100\n"+
		"the live figures come close to the simulated ones (docs/demo.md).\n", timeScale/1000, timeScale)
}

// change is (a - b) / b in per cent, 0 when b is 0.
func change(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * (a - b) / b
}

// demoHistoryPath is where the demo writes the overbooking history.
func demoHistoryPath(dir string) string { return filepath.Join(dir, "history.swf") }

// liveStartErrors are actual - promised start, in virtual seconds, of the
// jobs their own site accepted at submission (promised: Replay's answers)
// and that started, sorted.
func liveStartErrors(ctx context.Context, c *e2e.Cluster, promised map[string]time.Time) ([]int64, error) {
	var errs []int64
	for _, s := range c.Sites() {
		jobs, err := e2e.ListAllJobs(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			p, ok := promised[j.GetId()]
			if !ok || j.GetSite() != s.Name || j.GetStartTime() == nil {
				continue
			}
			errs = append(errs, int64(j.GetStartTime().AsTime().Sub(p).Round(time.Second)/time.Second))
		}
	}
	slices.Sort(errs)
	return errs, nil
}

// printDemoStartAccuracy compares the start each job was promised at
// submission with its actual start on the live sites (the federated
// simulator does not record promises; fedsched sim on one site does, see
// docs/start-accuracy.md).
func printDemoStartAccuracy(w io.Writer, errs []int64, timeScale float64) {
	a := sim.StartAccuracyOf(errs)
	if a == nil {
		return
	}
	late := 0
	for _, e := range errs {
		if e > 60 {
			late++
		}
	}
	fmt.Fprintf(w, "\nStart promised at submission against the actual start, live, for the %d jobs their own site accepted:\n"+
		"  %.0f %% within a minute, %.0f %% earlier by more (jobs before them ended early), %d later by more; the latest %+d s\n"+
		"  (virtual seconds: at %gx a few milliseconds of the node's own latency).\n", a.Jobs, 100*a.Within1m, 100*a.Early, late, errs[len(errs)-1], timeScale)
}
