package e2e

import (
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestTraceReplay replays 1,000 jobs of the KTH trace (sanitised, spread
// over three different sites with their processors scaled to the site,
// times compressed to an offered load of 1 over the federation) on the
// simulated executor and the shared clock. Every submission is answered,
// every job settles, and the totals add up: at each site (accepted = met +
// violated + cancelled), at each origin (every accepted job has a settled
// SLA) and across the federation (delegated out = delegated in). Timing is
// logged, not asserted.
func TestTraceReplay(t *testing.T) {
	t.Parallel()
	ts := TraceSlice{Trace: "kth", Jobs: 1000, Span: 12000, MinEstimate: 60, MaxEstimate: 1200, Load: 1.0, Seed: 1,
		Sites: []SliceSite{{Name: "alpha", Procs: 64, Share: 0.2}, {Name: "beta", Procs: 32, Share: 0.3}, {Name: "gamma", Procs: 16, Share: 0.5}}}
	jobs, info, err := ts.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1000 {
		t.Fatalf("%d jobs", len(jobs))
	}
	t.Logf("slice: %+v", info)
	// The replay is short: the overbooking sites may bet after 10 ended
	// jobs instead of the default 100, so that the test exercises
	// overbooking rather than the cold-start rule (node tests cover that).
	c := start(t, Options{TimeScale: 600, Sites: []SiteConfig{
		{Name: "alpha", Procs: 64, Overbooking: config.Overbooking{Enabled: true, PoFMax: 0.2, MinSamples: 10}},
		{Name: "beta", Procs: 32},
		{Name: "gamma", Procs: 16, Overbooking: config.Overbooking{Enabled: true, Mode: "comprehensive", RiskTest: "risk", MinSamples: 10}},
	}})
	ctx := bg(t)
	res, err := c.Replay(ctx, jobs, ReplayOptions{Interval: 5 * time.Second, SettleTimeout: 10 * time.Second, Progress: func(p ReplayProgress) {
		t.Logf("%5.1fs (virtual %v): submitted %d, settled %d, delegated %d, rejected %d", p.Wall.Seconds(), p.Virtual.Round(time.Second),
			p.Submitted, p.Settled, p.Delegated, p.Rejected)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replay of %d jobs: submissions took %v of wall time, settling %v more; %v of virtual time", res.Total,
		res.SubmitWall.Round(time.Millisecond), (res.Wall - res.SubmitWall).Round(time.Millisecond), res.Virtual.Round(time.Second))
	if res.Errors > 0 || res.Submitted != len(jobs) || res.Answered != len(jobs) {
		t.Errorf("replay: %+v (first error %v)", res.ReplayProgress, res.FirstErr)
	}
	sums, err := c.Summaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var submitted, out, in, overbooked int
	for _, s := range sums {
		t.Logf("%+v", s)
		submitted += s.Submitted
		out += s.DelegatedOut
		in += s.DelegatedIn
		overbooked += s.Overbooked
		if s.Open != 0 || s.NoSLA != 0 {
			t.Errorf("%s: %d SLAs still open, %d accepted jobs without an SLA", s.Site, s.Open, s.NoSLA)
		}
		for _, m := range s.Mismatches {
			t.Errorf("%s: outcome disagrees with the record: %s", s.Site, m)
		}
	}
	if submitted != len(jobs) || out == 0 || overbooked == 0 {
		t.Errorf("federation: %d submitted, %d delegated out, %d overbooked", submitted, out, overbooked)
	}
	// At each origin, every job it accepted (itself or through a peer)
	// has settled with an SLA outcome, and a delegated one names the
	// site that ran it at the end of its route.
	var stuck []*fedschedv1.Job
	for _, s := range c.Sites() {
		for _, j := range jobsOf(t, s) {
			if j.GetOriginSite() != s.Name || j.GetState() == fedschedv1.JobState_JOB_STATE_REJECTED {
				continue
			}
			switch j.GetSlaOutcome() {
			case fedschedv1.SlaOutcome_SLA_OUTCOME_MET, fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED:
				if !terminal(j) {
					stuck = append(stuck, j)
				} else if j.GetSite() != s.Name {
					checkRoute(t, j, s.Name, j.GetSite())
				}
			default:
				stuck = append(stuck, j)
			}
		}
	}
	for _, j := range stuck {
		t.Errorf("not settled at its origin: %s", brief(j))
	}
}
