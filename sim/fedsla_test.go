package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

func buildScenario(t *testing.T, path string) FedConfig {
	t.Helper()
	sc, err := LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestScenarioWithSLAs: on the three-site scenario with SLAs and
// overbooking peers, ACF still improves the most loaded site's AWRT, some
// delegated jobs are accepted only because a peer overbooked, and every
// accepted SLA is settled (accepted = met + violated).
func TestScenarioWithSLAs(t *testing.T) {
	cfg := buildScenario(t, "../scenarios/three-sites-sla.yaml")
	fed, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Federate = false
	alone, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	most, mostUtil := -1, 0.0
	for k := range cfg.Sites {
		if u := alone.ExecMetrics(k).Utilization; u > mostUtil {
			most, mostUtil = k, u
		}
	}
	a, f := alone.OriginMetrics(most).AWRT, fed.OriginMetrics(most).AWRT
	t.Logf("most loaded %s: AWRT alone %.0f, federated %.0f", cfg.Sites[most].Name, a, f)
	if (a-f)/a < 0.10 {
		t.Errorf("most loaded site %s: AWRT improved only %.1f %%", cfg.Sites[most].Name, 100*(a-f)/a)
	}
	byPeer, total := 0, 0
	for k, s := range cfg.Sites {
		sla := fed.SLA(k)
		t.Logf("%s: %+v", s.Name, sla)
		if sla.Accepted != sla.Met+sla.Violated {
			t.Errorf("%s: accepted %d != met %d + violated %d", s.Name, sla.Accepted, sla.Met, sla.Violated)
		}
		byPeer += sla.AcceptedByOverbookingPeer
		total += sla.Accepted + sla.Rejected
	}
	if total != len(fed.Records) {
		t.Errorf("%d jobs counted, %d replayed", total, len(fed.Records))
	}
	if byPeer == 0 {
		t.Error("no delegated job was accepted by an overbooking peer")
	}
	// The counter counts exactly the jobs submitted at the site that ran
	// elsewhere, overbooked there.
	for k, s := range cfg.Sites {
		want := 0
		for _, r := range fed.Records {
			if r.Origin == k && r.Exec != k && r.Decision.Reason == plan.ReasonOverbooked {
				want++
			}
		}
		if got := fed.SLA(k).AcceptedByOverbookingPeer; got != want {
			t.Errorf("%s: accepted_by_overbooking_peer %d, want %d", s.Name, got, want)
		}
	}
}

// smallFederation is two EASY sites: a small one flooded with jobs and an
// idle big one.
func smallFederation() FedConfig {
	var jobs []Job
	for i := range 40 {
		jobs = append(jobs, Job{ID: int64(i + 1), Submit: int64(i * 10), Runtime: 500, Estimate: 600, Procs: 2, Deadline: plan.Forever})
	}
	return FedConfig{Federate: true, Transfer: delegation.ACF, Location: delegation.LocationConfig{Jitter: -1},
		Sites: []FedSite{{Name: "small", Procs: 4, Policy: plan.EASY, Jobs: jobs}, {Name: "big", Procs: 64, Policy: plan.EASY}}}
}

// TestLatencyDelaysDelegation: with a message latency L, a delegated job
// starts at the peer three latencies after its submission (quote request,
// quote, agree), never earlier; every job runs exactly once.
func TestLatencyDelaysDelegation(t *testing.T) {
	cfg := smallFederation()
	cfg.Latency = 7
	res, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, r := range res.Records {
		if !r.Started {
			t.Fatalf("job %d never ran", r.ID)
		}
		if r.Exec != r.Origin {
			moved++
			if r.Start != r.Submit+3*cfg.Latency {
				t.Fatalf("job %d delegated with latency %d started at %d, submitted at %d", r.ID, cfg.Latency, r.Start, r.Submit)
			}
		}
	}
	if moved == 0 {
		t.Fatal("nothing was delegated")
	}
}

// TestLossyNetwork: with a quarter of the messages lost, the protocol's
// timeouts and retries still run every job exactly once, at one site.
func TestLossyNetwork(t *testing.T) {
	cfg := smallFederation()
	cfg.Loss = 0.25
	cfg.Seed = 3
	res, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k, s := range cfg.Sites {
		var recs []Record
		for _, r := range res.Records {
			if !r.Started {
				t.Fatalf("job %d never ran", r.ID)
			}
			if r.Exec == k {
				recs = append(recs, r.Record)
			}
		}
		checkSchedule(t, &Result{Records: recs}, s.Procs)
	}
}

// TestSharedClock: two sites cut from one trace keep their common
// timeline under clock: shared; per-site shifts each to start at 0.
func TestSharedClock(t *testing.T) {
	doc := func(clock string) string {
		return "clock: " + clock + "\nsites:\n  - name: a\n    trace: kth\n  - name: b\n    trace: kth\n    skip: 1000\n"
	}
	first := func(clock string) (int64, int64) {
		sc, err := ParseScenario([]byte(doc(clock)))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := sc.Build()
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Sites[0].Jobs[0].Submit, cfg.Sites[1].Jobs[0].Submit
	}
	if a, b := first("per-site"); a != 0 || b != 0 {
		t.Fatalf("per-site: first jobs at %d and %d, want 0 and 0", a, b)
	}
	a, b := first("shared")
	if a != 0 || b <= 0 {
		t.Fatalf("shared: first jobs at %d and %d, want 0 and the 1000th job's trace time", a, b)
	}
}

// TestRQFScenario: under RQF (idle sites pull waiting jobs from peers'
// queues) the three-site replay ends once the work does, every job runs
// once, and the most loaded site still gains.
func TestRQFScenario(t *testing.T) {
	cfg := buildScenario(t, "../scenarios/three-sites.yaml")
	cfg.Transfer = delegation.RQF
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fed, err := RunFederation(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Federate = false
	alone, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, r := range fed.Records {
		if !r.Started {
			t.Fatalf("job %d never ran", r.ID)
		}
		if r.Exec != r.Origin {
			moved++
		}
	}
	a, f := alone.OriginMetrics(2).AWRT, fed.OriginMetrics(2).AWRT
	t.Logf("RQF: %d jobs pulled; lublin AWRT alone %.0f, federated %.0f", moved, a, f)
	if moved == 0 || (a-f)/a < 0.10 {
		t.Fatalf("RQF pulled %d jobs; lublin's AWRT changed by %.1f %%", moved, 100*(a-f)/a)
	}
}

// TestPricedLedger: under Libra+$ prices the money follows the agreement.
// The small origin earns every user fee and pays the big peer the agreed
// price of each job it delegated; the peer earns the prices and no fee;
// the federation's total is the users' fees whatever the prices.
func TestPricedLedger(t *testing.T) {
	cfg := smallFederation()
	const fee = 10.0
	for i := range cfg.Sites[0].Jobs {
		j := &cfg.Sites[0].Jobs[i]
		j.Deadline, j.Fee, j.Penalty = j.Submit+100_000, fee, fee
	}
	cfg.Sites[1].Pricing = delegation.LibraPlus{PBase: 1, Alpha: 1}
	res, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// alpha only: PBase × procs × estimate in hours = 1 × 2 × 600/3600.
	const price = 2 * 600 / 3600.0
	delegated := 0
	for _, f := range res.Records {
		if f.Exec == 1 {
			delegated++
			if math.Abs(f.Price-price) > 1e-9 || f.Payer != 0 {
				t.Fatalf("job %d ran at big for %v paid by site %d, want %v paid by small", f.ID, f.Price, f.Payer, price)
			}
		}
	}
	if delegated == 0 || delegated == len(res.Records) {
		t.Fatalf("%d of %d jobs delegated: the test needs some of each", delegated, len(res.Records))
	}
	small, big := res.SLA(0), res.SLA(1)
	t.Logf("small %+v\nbig %+v", small, big)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	n, d := float64(len(res.Records)), float64(delegated)
	near("small fees", small.Fees, n*fee)
	near("small price paid", small.PricePaid, d*price)
	near("small price earned", small.PriceEarned, 0)
	near("small gain", small.Gain, n*fee-d*price)
	near("big fees", big.Fees, 0)
	near("big price earned", big.PriceEarned, d*price)
	near("big gain", big.Gain, d*price)
	near("total gain", small.Gain+big.Gain, n*fee)
	if big.Accepted != delegated || small.Accepted != len(res.Records)-delegated {
		t.Errorf("accepted small %d, big %d: counted where the jobs ran", small.Accepted, big.Accepted)
	}

	// Free quotes: the peer takes the jobs on the user's terms.
	cfg.Sites[1].Pricing = nil
	free, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fs, fb := free.SLA(0), free.SLA(1)
	if fs.PricePaid != 0 || fb.PriceEarned != 0 {
		t.Errorf("free quotes: prices paid %v, earned %v", fs.PricePaid, fb.PriceEarned)
	}
	near("free: big fees", fb.Fees, float64(fb.Met)*fee)
	near("free: total gain", fs.Gain+fb.Gain, n*fee)
}
