package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/e2e"
	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/config"
)

type demoFlags struct {
	jobs      int
	timeScale float64
	seed      uint64
	keep      bool
}

// demoSite is one site of the demo federation.
type demoSite struct {
	e2e.SiteConfig
	share float64 // of the trace's jobs
	what  string  // for the banner
}

// demoSites are three different sites: a large one that overbooks with the
// heuristic PoF, a middle one that does not overbook, and a small, busy one
// that overbooks with the comprehensive PoF and the risk test. The small
// one gets half the jobs (scaled to its size): it delegates the most.
var demoSites = []demoSite{
	{SiteConfig: e2e.SiteConfig{Name: "alpha", Procs: 64, Overbooking: config.Overbooking{Enabled: true, PoFMax: 0.2}}, share: 0.2,
		what: "overbooks: heuristic PoF, accepted below 0.2"},
	{SiteConfig: e2e.SiteConfig{Name: "beta", Procs: 32}, share: 0.3, what: "does not overbook"},
	{SiteConfig: e2e.SiteConfig{Name: "gamma", Procs: 16, Overbooking: config.Overbooking{Enabled: true, Mode: "comprehensive", RiskTest: "risk"}},
		share: 0.5, what: "overbooks: comprehensive PoF, risk test"},
}

// demoTrace is the embedded trace the demo replays.
const demoTrace = "kth"

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a 3-site federation on loopback replaying a real trace, and show what each site did",
		Long: `Start three sites of different sizes in this process, on loopback, each with
its own temporary data directory (removed at exit), its gRPC API, gossip
membership and the simulated executor, all on one clock that runs
--time-scale times faster than real time. Then replay a slice of the KTH SP2
trace (embedded; sanitised; the jobs after its first 2,000; processors
scaled to the site a job is submitted to; times compressed to an offered
load of 1 over the federation) through the sites' public API, each job with
an SLA: deadline = release + 2 x estimate, fee = procs x estimate in hours,
penalty = fee. Jobs a site cannot take are delegated to a peer that quotes
for them. Two sites overbook (alpha and gamma), beta does not; the two have
learnt their jobs' runtimes from the 2,000 trace jobs before the slice,
written as their overbooking.history, since a site overbooks a job only
once its statistics hold enough samples (overbooking.min_samples).

At the end it prints, per site: accepted, overbooked, delegated in, delegated
out, met, violated and gain in coins (a job's fee is its processors times its
estimated hours: one coin per processor-hour; gain = fees of the SLAs met
minus penalties of those violated). Then the same jobs replayed in the
simulator, in-process: as the live sites ran them, without federation,
without overbooking and with neither, so that you see what the federation
and overbooking bought (scenarios/demo.yaml is that scenario with the
default flags). See docs/demo.md. With the defaults it takes about half a
minute.

With --keep the sites stay up after the replay, with their gRPC APIs and
their status pages (metrics and the plan's Gantt chart) on loopback, until
Ctrl-C: explore them with fedsched jobs/plan/explain --addr and a browser.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, f) },
	}
	fl := cmd.Flags()
	fl.IntVar(&f.jobs, "jobs", 600, "number of trace jobs to replay (at least 30)")
	fl.Float64Var(&f.timeScale, "time-scale", 500, "how many times faster than real time the federation's clock runs")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the choice of each job's site (>= 1)")
	fl.BoolVar(&f.keep, "keep", false, "leave the three sites running after the replay (until Ctrl-C) and print their API and status-page addresses")
	return cmd
}

func runDemo(cmd *cobra.Command, f demoFlags) (err error) {
	if f.jobs < 30 {
		return fmt.Errorf("InvalidArgument: --jobs %d: want at least 30", f.jobs)
	}
	if !(f.timeScale >= 1 && f.timeScale <= 100000) {
		return fmt.Errorf("InvalidArgument: --time-scale %v: want 1 to 100000", f.timeScale)
	}
	if f.seed == 0 {
		// A scenario reads seed 0 as "draw one": the simulator would
		// replay other jobs.
		return fmt.Errorf("InvalidArgument: --seed 0: want a seed >= 1")
	}
	began := time.Now()
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	slice := demoSlice(f)
	jobs, info, err := slice.Build()
	if err != nil {
		return fmt.Errorf("NotFound: %w", err)
	}

	dir, err := os.MkdirTemp("", "fedsched-demo-")
	if err != nil {
		return fmt.Errorf("Unavailable: temporary directory: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("Internal: removing %s: %w", dir, rerr)
		}
	}()
	history := demoHistoryPath(dir)
	seen, err := writeDemoHistory(slice, info, history)
	if err != nil {
		return fmt.Errorf("Internal: writing the overbooking history: %w", err)
	}
	var sites []e2e.SiteConfig
	for _, s := range demoSites {
		c := s.SiteConfig
		if c.Overbooking.Enabled {
			c.Overbooking.History = history
		}
		sites = append(sites, c)
	}
	ctx := cmd.Context()
	fmt.Fprintf(out, "fedsched demo: 3 sites on loopback, replaying %d jobs of the %s trace (its jobs %d to %d, %.1f days) at %gx real time\n",
		len(jobs), strings.ToUpper(demoTrace), info.From, info.To, float64(info.TraceSpan)/86400, f.timeScale)
	fmt.Fprintf(out, "  every job has an SLA: deadline = submission + 2 x estimate; fee = penalty = processors x estimated hours, in coins;\n"+
		"  gain = fees of the SLAs met - penalties of the SLAs violated, in coins (every gain below)\n")
	for _, s := range demoSites {
		fmt.Fprintf(out, "  %-6s %3d processors, conservative backfilling, %s; %2.0f %% of the jobs (offered load %.2f)\n",
			s.Name, s.Procs, s.what, 100*s.share, info.PerSite[s.Name])
	}
	var learners []string
	for _, s := range demoSites {
		if s.Overbooking.Enabled {
			learners = append(learners, s.Name)
		}
	}
	fmt.Fprintf(out, "  %s learnt their jobs' runtimes from the %d %s jobs before these (overbooking.history %s)\n",
		strings.Join(learners, " and "), seen, strings.ToUpper(demoTrace), filepath.Base(history))
	fmt.Fprintf(out, "  data in %s (removed at exit)\n", dir)
	fmt.Fprintf(out, "  secure as in production: a throwaway CA, mutual TLS between sites and clients, encrypted gossip (docs/security.md)\n\n")

	c, err := e2e.Start(ctx, e2e.Options{Dir: dir, Sites: sites, TimeScale: f.timeScale, HTTP: true})
	if err != nil {
		return fmt.Errorf("Unavailable: starting the federation: %w", err)
	}
	defer func() {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("Internal: stopping the federation: %w", cerr)
		}
	}()

	bar := newProgress(errw, len(jobs), "replaying")
	var lastLine time.Time
	progress := func(p e2e.ReplayProgress) {
		if bar != nil {
			bar.Describe(fmt.Sprintf("submitted %d/%d, delegated %d, rejected %d; settled", p.Submitted, p.Total, p.Delegated, p.Rejected))
			bar.Set(p.Settled) //nolint:errcheck // progress display only
			return
		}
		if time.Since(lastLine) < 2*time.Second && p.Settled < p.Total {
			return
		}
		lastLine = time.Now()
		fmt.Fprintf(errw, "demo: %5.1fs (virtual %s)  submitted %d/%d  delegated %d  rejected %d  settled %d\n",
			p.Wall.Seconds(), fmtVirtual(p.Virtual), p.Submitted, p.Total, p.Delegated, p.Rejected, p.Settled)
	}
	// The last jobs end within twice the longest estimate after their
	// submission; give them that and a few seconds more.
	settle := c.Clock().Wall(time.Duration(2*slice.MaxEstimate)*time.Second) + 5*time.Second
	res, err := c.Replay(ctx, jobs, e2e.ReplayOptions{Progress: progress, Interval: 200 * time.Millisecond, SettleTimeout: settle})
	if bar != nil {
		bar.Finish() //nolint:errcheck // progress display only
		bar.Exit()   //nolint:errcheck // progress display only
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("Canceled: demo interrupted: %w", err)
		}
		return fmt.Errorf("Unavailable: replay: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	sums, err := c.Summaries(sctx)
	if err != nil {
		return fmt.Errorf("Unavailable: summary: %w", err)
	}
	printDemoSummary(out, sums)
	t := demoTotal(sums)
	submitted, rejected, open := t.Submitted, t.Rejected, t.Open
	fmt.Fprintf(out, "\n%d jobs submitted, %d accepted (%d of them by a peer), %d rejected by the whole federation", submitted, submitted-rejected,
		t.DelegatedOut, rejected)
	if res.Errors > 0 {
		fmt.Fprintf(out, ", %d submissions failed (first: %v)", res.Errors, res.FirstErr)
	}
	if unsettled := res.Answered - res.Settled; unsettled > 0 || open > 0 {
		fmt.Fprintf(out, "; %d jobs had not settled (%d SLAs open) when the demo stopped waiting", unsettled, open)
	}
	fmt.Fprintln(out, ".")
	cf, err := simulateDemo(ctx, f)
	if err != nil {
		return fmt.Errorf("Internal: simulating the demo's jobs: %w", err)
	}
	printDemoComparison(out, f.timeScale, sums, cf)
	lerrs, err := liveStartErrors(sctx, c, res.Promised)
	if err != nil {
		return fmt.Errorf("Unavailable: listing the jobs: %w", err)
	}
	printDemoStartAccuracy(out, lerrs, f.timeScale)
	fmt.Fprintf(out, "\nWall time %.1f s (replay %.1f s); virtual time %s.\n", time.Since(began).Seconds(), res.Wall.Seconds(), fmtVirtual(res.Virtual))
	if !f.keep {
		return nil
	}
	fmt.Fprintf(out, "\nThe sites keep running (their clock at %gx real time) until Ctrl-C:\n", f.timeScale)
	for _, s := range c.Sites() {
		fmt.Fprintf(out, "  %-6s API %-21s status page https://%s/  metrics https://%s/metrics\n", s.Name, s.APIAddr(), s.HTTPAddr(), s.HTTPAddr())
	}
	if s := c.Sites(); len(s) > 0 {
		a := s[0].APIAddr()
		op := c.Files(auth.Operator, "e2e")
		// Every call needs a certificate of the demo's CA; the operator's
		// may do everything.
		fmt.Fprintf(out, "As the demo's operator (mutual TLS):\n  export FEDSCHED_TLS_CA=%s FEDSCHED_TLS_CERT=%s FEDSCHED_TLS_KEY=%s\n"+
			"  curl --cacert %s --cert %s --key %s https://%s/metrics\n", op.CA, op.Cert, op.Key, op.CA, op.Cert, op.Key, s[0].HTTPAddr())
		fmt.Fprintf(out, "  fedsched plan --addr %s --svg plan.svg   (the status page's Gantt chart; a browser needs the certificate as PKCS#12: docs/metrics.md)\n", a)
		fmt.Fprintf(out, "Try:\n  fedsched jobs --all --limit 20 --addr %s\n  fedsched plan --addr %s\n  fedsched peers --addr %s\n"+
			"  fedsched submit --addr %s --procs 8 --estimate 20m --deadline +1h --fee 3 --penalty 3 -- sleep 600\n", a, a, a, a)
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping the sites")
	return nil
}

// printDemoSummary prints one row per site and a total row.
func printDemoSummary(w io.Writer, sums []e2e.SiteSummary) {
	sort.SliceStable(sums, func(i, j int) bool { return sums[i].Site < sums[j].Site })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	// The site column reads left to right: its cells are padded to one
	// width, so that right alignment leaves them flush left.
	width := len("total")
	for _, s := range sums {
		width = max(width, len(s.Site))
	}
	fmt.Fprintf(tw, "%-*s\taccepted\toverbooked\tdelegated in\tdelegated out\tmet\tviolated\tgain\t\n", width, "site")
	row := func(name string, s e2e.SiteSummary) {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t\n", width, name, s.Accepted, s.Overbooked, s.DelegatedIn, s.DelegatedOut, s.Met, s.Violated, s.Gain)
	}
	for _, s := range sums {
		row(s.Site, s)
	}
	row("total", demoTotal(sums))
}

// demoTotal adds up the sites' counts and gains.
func demoTotal(sums []e2e.SiteSummary) e2e.SiteSummary {
	var t e2e.SiteSummary
	for _, s := range sums {
		t.Submitted += s.Submitted
		t.Rejected += s.Rejected
		t.Accepted += s.Accepted
		t.Overbooked += s.Overbooked
		t.DelegatedIn += s.DelegatedIn
		t.DelegatedOut += s.DelegatedOut
		t.Met += s.Met
		t.Violated += s.Violated
		t.Open += s.Open
		t.Gain += s.Gain
	}
	return t
}

// fmtVirtual renders a virtual duration to the second.
func fmtVirtual(d time.Duration) string {
	return d.Round(time.Second).String()
}
