package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/fedsched/fedsched/delegation"
)

// EFSTrainConfig configures TrainEFS: the study's training of an EFS rule
// base (Papaspyrou 2013, §6.2; Fölling et al. 2010), a (μ+λ) evolution
// strategy over rule bases whose fitness is the AWRT of the jobs submitted
// at the focus site on a training slice, the focus site applying the
// candidate rule base while the other sites run ACF (the study's pairwise
// training; their rule bases in Base are set aside) or, with KeepPartners,
// their own rule bases.
type EFSTrainConfig struct {
	// Base is the federation of the training slice (Transfer EFS).
	// Base.Sites[Focus].Rules is replaced by each candidate, the other
	// sites' by none (they run ACF, as in the study's pairwise training)
	// unless KeepPartners.
	Base FedConfig
	// KeepPartners keeps the other sites' rule bases in Base: the focus
	// site is then trained against its partners' EFS (retraining).
	KeepPartners bool
	// Focus is the index of the site whose rule base evolves and whose
	// AWRT is the fitness; Partner the index of the partner it is for.
	Focus, Partner int
	// Mu, Lambda and Generations are the strategy's parent and offspring
	// counts and its length (the study: 13, 91, 150); Rules the rules per
	// rule base (the study: 10).
	Mu, Lambda, Generations, Rules int
	// StepNWP and StepNJP are the standard deviations of the Gaussian
	// mutation of the NWP and NJP genes (centre and width; the study:
	// 0.01 and 0.1); each consequent flips with probability 1/Rules.
	StepNWP, StepNJP float64
	// Seed seeds the strategy: the same seed and slice give the same rule
	// base, whatever Workers.
	Seed uint64
	// Workers is how many evaluations run at once (0: GOMAXPROCS).
	Workers int
	// Start are members of the initial population (the rest are drawn:
	// NWP genes uniform in [0, 10], NJP genes in [0, 100], as the study's).
	Start []*delegation.RuleBase
	// Progress, if set, is called after each generation (0 is the
	// initial population).
	Progress func(EFSGeneration)
}

// Study's strategy parameters (§6.2).
const (
	EFSMu          = 13
	EFSLambda      = 91
	EFSGenerations = 150
	EFSRules       = 10
	EFSStepNWP     = 0.01
	EFSStepNJP     = 0.1
)

// EFSGeneration is the state of the strategy after one generation.
type EFSGeneration struct {
	Generation  int
	Best        float64 // the best parent's fitness (AWRT, s)
	Worst       float64 // the worst parent's
	Evaluations int     // simulations run so far (repeated rule bases are not run again)
}

// EFSTrainResult is what TrainEFS found.
type EFSTrainResult struct {
	Best *delegation.RuleBase
	// Fitness is Best's fitness; StartBest the best fitness of the
	// initial population (never lower than Fitness: the strategy keeps
	// its parents).
	Fitness, StartBest float64
	Generations        []EFSGeneration
}

type efsIndividual struct {
	rb      *delegation.RuleBase
	fitness float64
}

// TrainEFS runs the evolution strategy. It is deterministic in Seed: the
// random draws happen in one goroutine, and the evaluations, which run on
// Workers goroutines, are pure functions of their rule base.
func TrainEFS(ctx context.Context, cfg EFSTrainConfig) (*EFSTrainResult, error) {
	n := len(cfg.Base.Sites)
	switch {
	case cfg.Base.Transfer != delegation.EFS || !cfg.Base.Federate:
		return nil, fmt.Errorf("efs training: the slice must federate with transfer efs: %w", ErrBadConfig)
	case cfg.Focus < 0 || cfg.Focus >= n || cfg.Partner < 0 || cfg.Partner >= n || cfg.Focus == cfg.Partner:
		return nil, fmt.Errorf("efs training: focus %d and partner %d of %d sites: %w", cfg.Focus, cfg.Partner, n, ErrBadConfig)
	case cfg.Mu < 1 || cfg.Lambda < 1 || cfg.Generations < 0 || cfg.Rules < 1 || cfg.Workers < 0:
		return nil, fmt.Errorf("efs training: mu %d, lambda %d, generations %d, rules %d, workers %d: %w",
			cfg.Mu, cfg.Lambda, cfg.Generations, cfg.Rules, cfg.Workers, ErrBadConfig)
	case !(cfg.StepNWP >= 0) || !(cfg.StepNJP >= 0) || math.IsInf(cfg.StepNWP, 0) || math.IsInf(cfg.StepNJP, 0):
		return nil, fmt.Errorf("efs training: mutation steps %v, %v: %w", cfg.StepNWP, cfg.StepNJP, ErrBadConfig)
	case len(cfg.Start) > cfg.Mu:
		return nil, fmt.Errorf("efs training: %d starting rule bases for a population of %d: %w", len(cfg.Start), cfg.Mu, ErrBadConfig)
	case slices.ContainsFunc(cfg.Start, func(rb *delegation.RuleBase) bool { return rb == nil || len(rb.Rules) != cfg.Rules }):
		// Recombination pairs rule i of two parents: every one has Rules.
		return nil, fmt.Errorf("efs training: a starting rule base without %d rules: %w", cfg.Rules, ErrBadConfig)
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	focus, partner := cfg.Base.Sites[cfg.Focus], cfg.Base.Sites[cfg.Partner]
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xef5))
	fresh := func(rules []delegation.FuzzyRule) *delegation.RuleBase {
		return &delegation.RuleBase{Site: focus.Name, Partner: partner.Name, PartnerProcs: partner.Procs, Rules: rules}
	}
	ev := &efsEvaluator{cfg: cfg, workers: workers, memo: map[string]float64{}}
	pop := make([]efsIndividual, 0, cfg.Mu)
	for _, rb := range cfg.Start {
		pop = append(pop, efsIndividual{rb: fresh(slices.Clone(rb.Rules))})
	}
	for len(pop) < cfg.Mu {
		rules := make([]delegation.FuzzyRule, cfg.Rules)
		for i := range rules {
			rules[i] = delegation.FuzzyRule{
				NWP:    delegation.Gaussian{Center: 10 * rng.Float64(), Width: 10 * (1 - rng.Float64())},
				NJP:    delegation.Gaussian{Center: 100 * rng.Float64(), Width: 100 * (1 - rng.Float64())},
				Accept: rng.IntN(2) == 1,
			}
		}
		pop = append(pop, efsIndividual{rb: fresh(rules)})
	}
	if err := ev.evaluate(ctx, pop, math.Inf(1)); err != nil {
		return nil, err
	}
	rank(pop)
	res := &EFSTrainResult{StartBest: pop[0].fitness}
	report := func(g int) {
		s := EFSGeneration{Generation: g, Best: pop[0].fitness, Worst: pop[len(pop)-1].fitness, Evaluations: ev.runs}
		res.Generations = append(res.Generations, s)
		if cfg.Progress != nil {
			cfg.Progress(s)
		}
	}
	report(0)
	for g := 1; g <= cfg.Generations; g++ {
		kids := make([]efsIndividual, cfg.Lambda)
		for c := range kids {
			a, b := pop[rng.IntN(len(pop))].rb, pop[rng.IntN(len(pop))].rb
			kids[c] = efsIndividual{rb: fresh(mutate(recombine(a, b, rng), cfg, rng))}
		}
		// An offspring worse than the worst parent cannot be selected:
		// its replay stops as soon as that is certain.
		if err := ev.evaluate(ctx, kids, pop[len(pop)-1].fitness); err != nil {
			return nil, err
		}
		// (μ+λ): the best μ of parents and offspring; parents first, so
		// that a tie keeps the parent.
		pop = append(pop, kids...)
		rank(pop)
		pop = pop[:cfg.Mu]
		report(g)
	}
	res.Best, res.Fitness = pop[0].rb, pop[0].fitness
	return res, nil
}

// rank sorts by fitness, lower first; stable, so ties keep their order.
func rank(pop []efsIndividual) {
	slices.SortStableFunc(pop, func(a, b efsIndividual) int { return cmp.Compare(a.fitness, b.fitness) })
}

// recombine is discrete recombination: each gene (a rule's NWP centre and
// width, NJP centre and width, consequent) from either parent.
func recombine(a, b *delegation.RuleBase, rng *rand.Rand) []delegation.FuzzyRule {
	out := make([]delegation.FuzzyRule, len(a.Rules))
	pick := func(x, y float64) float64 {
		if rng.IntN(2) == 0 {
			return x
		}
		return y
	}
	for i := range out {
		ra, rb := a.Rules[i], b.Rules[i]
		out[i].NWP.Center = pick(ra.NWP.Center, rb.NWP.Center)
		out[i].NWP.Width = pick(ra.NWP.Width, rb.NWP.Width)
		out[i].NJP.Center = pick(ra.NJP.Center, rb.NJP.Center)
		out[i].NJP.Width = pick(ra.NJP.Width, rb.NJP.Width)
		out[i].Accept = ra.Accept
		if rng.IntN(2) == 1 {
			out[i].Accept = rb.Accept
		}
	}
	return out
}

// minWidth keeps a mutated width a membership function (> 0).
const minWidth = 1e-6

// mutate adds Gaussian noise to every centre and width (StepNWP, StepNJP)
// and flips each consequent with probability 1/len(rules).
func mutate(rules []delegation.FuzzyRule, cfg EFSTrainConfig, rng *rand.Rand) []delegation.FuzzyRule {
	width := func(w, step float64) float64 { return math.Max(minWidth, math.Abs(w+step*rng.NormFloat64())) }
	for i := range rules {
		r := &rules[i]
		r.NWP.Center += cfg.StepNWP * rng.NormFloat64()
		r.NWP.Width = width(r.NWP.Width, cfg.StepNWP)
		r.NJP.Center += cfg.StepNJP * rng.NormFloat64()
		r.NJP.Width = width(r.NJP.Width, cfg.StepNJP)
		if rng.IntN(len(rules)) == 0 {
			r.Accept = !r.Accept
		}
	}
	return rules
}

// efsEvaluator runs the training slice for rule bases, on several
// goroutines, remembering the fitness of every rule base it has run.
type efsEvaluator struct {
	cfg     EFSTrainConfig
	workers int
	memo    map[string]float64
	runs    int
}

// evaluate sets the fitness of every individual; one whose AWRT must exceed
// cutoff gets +Inf (it is then worse than any later cutoff too, which only
// falls).
func (e *efsEvaluator) evaluate(ctx context.Context, pop []efsIndividual, cutoff float64) error {
	keys := make([]string, len(pop))
	var todo []int
	queued := map[string]bool{}
	for i, ind := range pop {
		keys[i] = string(ind.rb.Marshal())
		if _, ok := e.memo[keys[i]]; !ok && !queued[keys[i]] {
			queued[keys[i]] = true
			todo = append(todo, i)
		}
	}
	fit := make([]float64, len(todo))
	errs := make([]error, len(todo))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(e.workers, len(todo)) {
		wg.Go(func() {
			for t := range next {
				fit[t], errs[t] = e.fitness(ctx, pop[todo[t]].rb, cutoff)
			}
		})
	}
	for t := range todo {
		next <- t
	}
	close(next)
	wg.Wait()
	for t, i := range todo {
		if errs[t] != nil {
			return errs[t]
		}
		e.memo[keys[i]] = fit[t]
	}
	e.runs += len(todo)
	for i := range pop {
		pop[i].fitness = e.memo[keys[i]]
	}
	return nil
}

// fitness is the focus site's AWRT on the training slice with rb, +Inf if
// it must exceed cutoff.
func (e *efsEvaluator) fitness(ctx context.Context, rb *delegation.RuleBase, cutoff float64) (float64, error) {
	cfg := e.cfg.Base
	cfg.Sites = slices.Clone(cfg.Sites)
	if !e.cfg.KeepPartners {
		for k := range cfg.Sites {
			cfg.Sites[k].Rules = nil // the partners run ACF, as in the study
		}
	}
	cfg.Sites[e.cfg.Focus].Rules = delegation.RuleBases{rb}
	if !math.IsInf(cutoff, 1) {
		cfg.Abort = &AbortAWRT{Site: e.cfg.Focus, Above: cutoff}
	}
	res, err := RunFederation(ctx, cfg)
	if errors.Is(err, ErrAborted) {
		return math.Inf(1), nil
	}
	if err != nil {
		return 0, fmt.Errorf("efs training: %w", err)
	}
	return res.OriginMetrics(e.cfg.Focus).AWRT, nil
}
