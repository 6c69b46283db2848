package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/delegation"
)

// efsSlice is a small two-site training slice: the first days of KTH96 and
// CTC96 under FCFS, with transfer EFS (and no rule bases yet), their arrivals compressed by scale
// (more load: rule bases then differ in what they achieve).
func efsSlice(t *testing.T, days, scale string) FedConfig {
	t.Helper()
	doc := "name: efs-test\ntransfer: acf\nspan: " + days + "\nsites:\n" +
		"  - name: kth96\n    trace: kth\n    procs: 100\n    policy: fcfs\n    time_scale: " + scale + "\n" +
		"  - name: ctc96\n    trace: ctc\n    procs: 430\n    policy: fcfs\n    time_scale: " + scale + "\n"
	sc, err := ParseScenario([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Transfer = delegation.EFS // the tests give the sites their rule bases
	return cfg
}

func always(site, partner string, procs int, accept bool) *delegation.RuleBase {
	return &delegation.RuleBase{Site: site, Partner: partner, PartnerProcs: procs, Rules: []delegation.FuzzyRule{
		{NWP: delegation.Gaussian{Center: 0, Width: 1e6}, NJP: delegation.Gaussian{Center: 0, Width: 1e6}, Accept: accept}}}
}

// TestEFSDecides: the rule bases decide where jobs run. KTH96 declining
// everything (it offers every job) and CTC96 accepting everything sends
// every KTH96 job to CTC96 and keeps every CTC96 job home; the other way
// round, every CTC96 job narrow enough for KTH96 goes there; a site that
// keeps (accepts) everything offers nothing, one that declines everything
// takes nothing.
func TestEFSDecides(t *testing.T) {
	cfg := efsSlice(t, "5d", "1")
	run := func(kthAccepts, ctcAccepts bool) [][]float64 {
		c := cfg
		c.Sites = append([]FedSite(nil), cfg.Sites...)
		c.Sites[0].Rules = delegation.RuleBases{always("kth96", "ctc96", 430, kthAccepts)}
		c.Sites[1].Rules = delegation.RuleBases{always("ctc96", "kth96", 100, ctcAccepts)}
		res, err := RunFederation(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		mn, _ := res.Migrations()
		return mn
	}
	if mn := run(false, true); mn[0][1] != 1 || mn[1][0] != 0 {
		t.Errorf("KTH96 offers all, CTC96 takes all: M_n %v, want every KTH96 job at CTC96 and none back", mn)
	}
	var narrow, all int
	for _, j := range cfg.Sites[1].Jobs {
		all++
		if j.Procs <= 100 {
			narrow++
		}
	}
	if mn := run(true, false); mn[0][1] != 0 || math.Abs(mn[1][0]-float64(narrow)/float64(all)) > 1e-12 {
		t.Errorf("CTC96 offers all, KTH96 takes all: M_n %v, want %d of %d CTC96 jobs at KTH96 and none the other way", mn, narrow, all)
	}
	if mn := run(true, true); mn[0][1] != 0 || mn[1][0] != 0 {
		t.Errorf("both keep everything: M_n %v, want no migration", mn)
	}
	if mn := run(false, false); mn[0][1] != 0 || mn[1][0] != 0 {
		t.Errorf("both offer everything and take nothing: M_n %v, want no migration", mn)
	}
}

// TestEFSScenarioRules: rule-base files are loaded and checked against
// the site; rules without transfer efs are refused.
func TestEFSScenarioRules(t *testing.T) {
	_, err := ParseScenario([]byte("name: x\ntransfer: acf\nsites:\n  - name: a\n    trace: kth\n    rules: [r.yaml]\n  - name: b\n    trace: kth\n"))
	if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "rules") {
		t.Fatalf("rules with acf: %v, want a refusal naming rules", err)
	}
	_, err = ParseScenario([]byte("name: x\ntransfer: efs\nsites:\n  - name: a\n    trace: kth\n  - name: b\n    trace: kth\n"))
	if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "transfer: efs needs rule bases") {
		t.Fatalf("efs without rules: %v, want a refusal", err)
	}
	sc, err := ParseScenario([]byte("name: x\ntransfer: efs\nsites:\n  - name: kth96\n    trace: kth\n    rules: [../scenarios/study/rules/f14-ctc96.yaml]\n  - name: ctc96\n    trace: ctc\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Build(); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), `site "ctc96"`) {
		t.Fatalf("another site's rule base: %v, want a refusal", err)
	}
}

func randomRuleBase(rng *rand.Rand, n int) *delegation.RuleBase {
	rb := &delegation.RuleBase{Site: "kth96", Partner: "ctc96", PartnerProcs: 430}
	for range n {
		rb.Rules = append(rb.Rules, delegation.FuzzyRule{
			NWP:    delegation.Gaussian{Center: 10 * rng.Float64(), Width: 0.1 + 10*rng.Float64()},
			NJP:    delegation.Gaussian{Center: 100 * rng.Float64(), Width: 1 + 100*rng.Float64()},
			Accept: rng.IntN(2) == 0,
		})
	}
	return rb
}

// awrtWith replays the slice with rb at KTH96 (CTC96 on ACF) and returns
// KTH96's AWRT: the fitness, computed apart from the trainer.
func awrtWith(t *testing.T, cfg FedConfig, rb *delegation.RuleBase) float64 {
	t.Helper()
	c := cfg
	c.Sites = append([]FedSite(nil), cfg.Sites...)
	c.Sites[0].Rules = delegation.RuleBases{rb}
	c.Sites[1].Rules = nil
	res, err := RunFederation(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return res.OriginMetrics(0).AWRT
}

// The training tests' slice.
var trainDays, trainScale = "8d", "0.3"

func trainConfig(cfg FedConfig, seed uint64, workers int) EFSTrainConfig {
	return EFSTrainConfig{Base: cfg, Focus: 0, Partner: 1, Mu: 3, Lambda: 6, Generations: 3, Rules: 4,
		StepNWP: 0.5, StepNJP: 5, Seed: seed, Workers: workers}
}

// TestTrainEFSDeterministic: the same seed gives the same rule base,
// whatever the number of workers; another seed another.
func TestTrainEFSDeterministic(t *testing.T) {
	cfg := efsSlice(t, trainDays, trainScale)
	var out, traj []string
	for _, tc := range []struct {
		seed    uint64
		workers int
	}{{7, 1}, {7, 2}, {7, 3}, {8, 2}} {
		res, err := TrainEFS(context.Background(), trainConfig(cfg, tc.seed, tc.workers))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(res.Best.Marshal()))
		traj = append(traj, fmt.Sprint(res.Generations))
	}
	if traj[0] != traj[1] || traj[0] != traj[2] {
		t.Fatalf("seed 7 took different courses on 1, 2 and 3 workers:\n%s\n%s\n%s", traj[0], traj[1], traj[2])
	}
	if out[0] != out[1] || out[0] != out[2] {
		t.Fatalf("seed 7 gave different rule bases on 1, 2 and 3 workers:\n%s\n%s\n%s", out[0], out[1], out[2])
	}
	if out[0] == out[3] && traj[0] == traj[3] {
		t.Fatalf("seeds 7 and 8 gave the same rule base:\n%s", out[0])
	}
}

// TestTrainEFSNeverWorse: whatever the seed, the rule base training
// returns is, replayed apart from the trainer, no worse on the training
// slice than the best of the population it started from, and its fitness
// is what the trainer says. The starting population holds a good rule
// base (trained before, with another seed) beside random ones.
func TestTrainEFSNeverWorse(t *testing.T) {
	cfg := efsSlice(t, trainDays, trainScale)
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		tc := trainConfig(cfg, seed, 2)
		// Large steps: offspring stray far from their parents, and only
		// keeping the parents keeps the best.
		tc.StepNWP, tc.StepNJP = 5, 50
		prior, err := TrainEFS(context.Background(), trainConfig(cfg, seed+100, 2))
		if err != nil {
			t.Fatal(err)
		}
		tc.Start = []*delegation.RuleBase{prior.Best}
		startBest := awrtWith(t, cfg, prior.Best)
		for len(tc.Start) < tc.Mu {
			rb := randomRuleBase(rng, tc.Rules)
			tc.Start = append(tc.Start, rb)
			startBest = min(startBest, awrtWith(t, cfg, rb))
		}
		res, err := TrainEFS(context.Background(), tc)
		if err != nil {
			t.Fatal(err)
		}
		got := awrtWith(t, cfg, res.Best)
		if got != res.Fitness {
			t.Errorf("seed %d: the trained rule base replays to AWRT %v, the trainer says %v", seed, got, res.Fitness)
		}
		if got > startBest {
			t.Errorf("seed %d: trained AWRT %v worse than the starting population's best %v", seed, got, startBest)
		}
		if res.StartBest != startBest {
			t.Errorf("seed %d: the trainer's starting best %v, replayed %v", seed, res.StartBest, startBest)
		}
	}
}

// TestAbortAWRT: a replay with an AWRT bound below its AWRT stops with
// ErrAborted; one above it runs to the end with the same result as
// without.
func TestAbortAWRT(t *testing.T) {
	cfg := efsSlice(t, trainDays, trainScale)
	cfg.Sites[0].Rules = delegation.RuleBases{always("kth96", "ctc96", 430, true)}
	awrt := awrtWith(t, cfg, cfg.Sites[0].Rules[0])
	c := cfg
	c.Sites = append([]FedSite(nil), cfg.Sites...)
	c.Sites[1].Rules = nil
	c.Abort = &AbortAWRT{Site: 0, Above: awrt * 0.99}
	if _, err := RunFederation(context.Background(), c); !errors.Is(err, ErrAborted) {
		t.Fatalf("bound below the AWRT %v: err %v, want ErrAborted", awrt, err)
	}
	c.Abort = &AbortAWRT{Site: 0, Above: awrt * 1.0001}
	res, err := RunFederation(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.OriginMetrics(0).AWRT; got != awrt {
		t.Fatalf("AWRT %v with a bound above, %v without", got, awrt)
	}
}

// TestTrainEFSPartners: the fitness is the replay with the partner on ACF,
// or, with KeepPartners, on its own rule bases.
func TestTrainEFSPartners(t *testing.T) {
	cfg := efsSlice(t, trainDays, trainScale)
	rb := always("kth96", "ctc96", 430, false) // KTH96 offers everything
	cfg.Sites[1].Rules = delegation.RuleBases{always("ctc96", "kth96", 100, true)}
	tc := EFSTrainConfig{Base: cfg, Focus: 0, Partner: 1, Mu: 1, Lambda: 1, Rules: 1, Start: []*delegation.RuleBase{rb}}
	onACF, err := TrainEFS(context.Background(), tc)
	if err != nil {
		t.Fatal(err)
	}
	tc.KeepPartners = true
	onEFS, err := TrainEFS(context.Background(), tc)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg
	c.Sites = append([]FedSite(nil), cfg.Sites...)
	c.Sites[0].Rules = delegation.RuleBases{rb}
	res, err := RunFederation(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := awrtWith(t, cfg, rb); onACF.Fitness != want {
		t.Errorf("partner on ACF: fitness %v, replay %v", onACF.Fitness, want)
	}
	if want := res.OriginMetrics(0).AWRT; onEFS.Fitness != want {
		t.Errorf("partner on its rule base: fitness %v, replay %v", onEFS.Fitness, want)
	}
	if onACF.Fitness == onEFS.Fitness {
		t.Errorf("the partner's transfer policy made no difference (%v)", onACF.Fitness)
	}
}
