package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/sim"
)

type efsTrainFlags struct {
	scenario, site, partner, out string
	seed                         uint64
	mu, lambda, gens, rules      int
	workers                      int
	stepNWP, stepNJP             float64
	start                        []string
	partners                     string
}

func newSimEFSTrainCmd() *cobra.Command {
	var f efsTrainFlags
	cmd := &cobra.Command{
		Use:   "efs-train --scenario FILE --site NAME --out FILE",
		Short: "Train an EFS rule base on a scenario's training slice (the federation study's evolution strategy)",
		Long: `Train the rule base that --site applies to --partner under the evolutionary
fuzzy transfer policy (transfer: efs; the federation study, §6.2): a
(mu+lambda) evolution strategy over rule bases of --rules Gaussian TSK rules,
whose fitness is the AWRT of the jobs submitted at --site when the scenario
(the training slice) is replayed with the candidate rule base. The other
sites run ACF, as the study's partner does during training (rule bases the
scenario gives them are set aside), or with --partners efs the rule bases the
scenario gives them (retraining a site against a trained partner). Discrete recombination, Gaussian
mutation with fixed steps, consequents flipped with probability 1/rules.

The same scenario, seed and parameters give the same rule base, on any number
of workers. The rule base goes to --out in the rule-base file format
(docs/simulation.md), headed by the command and its fitness.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runEFSTrain(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scenario, "scenario", "", "the training slice: a scenario with transfer efs or acf (required)")
	fl.StringVar(&f.site, "site", "", "the site whose rule base evolves; its AWRT is the fitness (required)")
	fl.StringVar(&f.partner, "partner", "", "the partner the rule base is for (default: the other site of a two-site scenario)")
	fl.StringVar(&f.out, "out", "", "write the trained rule base to this file (required)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the evolution strategy")
	fl.IntVar(&f.mu, "mu", sim.EFSMu, "parents (the study: 13)")
	fl.IntVar(&f.lambda, "lambda", sim.EFSLambda, "offspring per generation (the study: 91)")
	fl.IntVar(&f.gens, "generations", sim.EFSGenerations, "generations (the study: 150)")
	fl.IntVar(&f.rules, "rules", sim.EFSRules, "rules per rule base (the study: 10)")
	fl.Float64Var(&f.stepNWP, "step-nwp", sim.EFSStepNWP, "mutation step of the NWP centres and widths (the study: 0.01)")
	fl.Float64Var(&f.stepNJP, "step-njp", sim.EFSStepNJP, "mutation step of the NJP centres and widths (the study: 0.1)")
	fl.IntVar(&f.workers, "workers", 0, "evaluations at once (0: one per core)")
	fl.StringVar(&f.partners, "partners", "acf", "what the other sites run: acf (the study's pairwise training; their rule bases in the scenario are set aside) or efs (their rule bases in the scenario: retraining against a trained partner)")
	fl.StringArrayVar(&f.start, "start", nil, "a rule-base file to put in the initial population (repeatable; its rule count must be --rules)")
	return cmd
}

func runEFSTrain(cmd *cobra.Command, f efsTrainFlags) error {
	switch {
	case f.scenario == "" || f.site == "" || f.out == "":
		return fmt.Errorf("InvalidArgument: --scenario, --site and --out are required")
	case f.workers < 0:
		return fmt.Errorf("InvalidArgument: --workers %d: want >= 0", f.workers)
	case f.partners != "acf" && f.partners != "efs":
		return fmt.Errorf("InvalidArgument: --partners %q: want acf or efs", f.partners)
	}
	sc, err := sim.LoadScenario(f.scenario)
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	if sc.Transfer != "efs" && sc.Transfer != "acf" && sc.Transfer != "" {
		return fmt.Errorf("InvalidArgument: %s: transfer %q: training needs a slice with transfer efs or acf", f.scenario, sc.Transfer)
	}
	base, err := sc.Build()
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	base.Transfer = delegation.EFS // the focus site applies each candidate
	focus, partner := -1, -1
	for k, s := range base.Sites {
		switch {
		case s.Name == f.site:
			focus = k
		case f.partner == "" && len(base.Sites) == 2, s.Name == f.partner:
			partner = k
		}
	}
	switch {
	case focus < 0:
		return fmt.Errorf("InvalidArgument: --site %q is not a site of %s", f.site, f.scenario)
	case partner < 0 && f.partner == "":
		return fmt.Errorf("InvalidArgument: --partner is required with %d sites", len(base.Sites))
	case partner < 0:
		return fmt.Errorf("InvalidArgument: --partner %q is not another site of %s", f.partner, f.scenario)
	}
	cfg := sim.EFSTrainConfig{Base: base, Focus: focus, Partner: partner, Mu: f.mu, Lambda: f.lambda, Generations: f.gens,
		Rules: f.rules, StepNWP: f.stepNWP, StepNJP: f.stepNJP, Seed: f.seed, Workers: f.workers, KeepPartners: f.partners == "efs"}
	if cfg.KeepPartners {
		for k, s := range base.Sites {
			if k != focus && len(s.Rules) == 0 {
				return fmt.Errorf("InvalidArgument: --partners efs: site %s has no rule bases in %s", s.Name, f.scenario)
			}
		}
	}
	for _, p := range f.start {
		rb, err := delegation.LoadRuleBase(p)
		if err != nil {
			return fmt.Errorf("InvalidArgument: --start: %w", err)
		}
		if len(rb.Rules) != f.rules {
			return fmt.Errorf("InvalidArgument: --start %s has %d rules, --rules is %d", p, len(rb.Rules), f.rules)
		}
		cfg.Start = append(cfg.Start, rb)
	}
	began := time.Now()
	errw := cmd.ErrOrStderr()
	cfg.Progress = func(g sim.EFSGeneration) {
		fmt.Fprintf(errw, "generation %d: best AWRT %.0f s, worst parent %.0f s, %d simulations, %s\n",
			g.Generation, g.Best, g.Worst, g.Evaluations, time.Since(began).Round(time.Second))
	}
	res, err := sim.TrainEFS(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	args := []string{"fedsched sim efs-train"}
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		switch {
		case fl.Name == "start":
			for _, p := range f.start {
				args = append(args, "--start "+p)
			}
		case fl.Name == "seed" || fl.Changed && fl.Name != "workers":
			args = append(args, "--"+fl.Name+" "+fl.Value.String())
		}
	})
	header := []string{
		fmt.Sprintf("EFS rule base of %s for %s, trained by:", res.Best.Site, res.Best.Partner),
		"  " + strings.Join(args, " "),
		fmt.Sprintf("mu %d, lambda %d, %d generations, %d rules, steps %g (NWP) and %g (NJP), seed %d",
			f.mu, f.lambda, f.gens, f.rules, f.stepNWP, f.stepNJP, f.seed),
		fmt.Sprintf("AWRT of %s on the training slice: %.0f s (best of the initial population: %.0f s)", f.site, res.Fitness, res.StartBest),
	}
	if err := os.WriteFile(f.out, res.Best.Marshal(header...), 0o644); err != nil {
		return fmt.Errorf("efs-train: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: AWRT of %s %.0f s on the training slice (initial best %.0f s); wrote %s\n",
		f.scenario, f.site, res.Fitness, res.StartBest, f.out)
	return nil
}
