package sim

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/swf"
)

// Scenario is a federation scenario file (YAML). Every field is documented
// in docs/simulation.md with its default.
type Scenario struct {
	// Name names the scenario in reports.
	Name string `yaml:"name"`
	// Span aligns the traces: each site keeps the jobs submitted within
	// Span of its first kept job ("90d", "2160h"). Empty keeps everything.
	Span string `yaml:"span"`
	// Seed seeds the location policy's jitter. Default 1.
	Seed uint64 `yaml:"seed"`
	// Transfer is the transfer policy: "acf" (default) or "on-reject".
	Transfer string `yaml:"transfer"`
	// MaxCandidates is how many peers are asked for quotes (default 3).
	MaxCandidates int `yaml:"max_candidates"`
	// Jitter spreads peer ranking (default 0.1; negative for none).
	Jitter float64 `yaml:"jitter"`
	// MaxHops limits delegations per job (default 1).
	MaxHops int `yaml:"max_hops"`
	// Sites lists the sites.
	Sites []ScenarioSite `yaml:"sites"`
}

// ScenarioSite is one site of a scenario.
type ScenarioSite struct {
	// Name of the site; required and unique.
	Name string `yaml:"name"`
	// Trace is a file or an embedded trace (kth, hpc2n, nasa, lublin, ctc, sdsc).
	Trace string `yaml:"trace"`
	// Procs is the site size; default the trace header's.
	Procs int `yaml:"procs"`
	// Policy: conservative, easy (default), fcfs, list, edf or lttr
	// (scenario jobs have no deadlines: edf and lttr then run as easy).
	Policy string `yaml:"policy"`
	// Skip drops this many jobs from the start of the sanitised trace,
	// to choose a window.
	Skip int `yaml:"skip"`
	// TimeScale multiplies the trace's submit times (< 1 compresses
	// arrivals: more load). Default 1.
	TimeScale float64 `yaml:"time_scale"`
}

// LoadScenario reads and checks a scenario file. Unknown fields are errors.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return ParseScenario(b)
}

// ParseScenario parses and checks a scenario document.
func ParseScenario(b []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scenario: %w: %w", ErrBadConfig, err)
	}
	if len(s.Sites) < 2 {
		return nil, fmt.Errorf("scenario: a federation needs at least two sites, got %d: %w", len(s.Sites), ErrBadConfig)
	}
	seen := map[string]bool{}
	for i, site := range s.Sites {
		switch {
		case site.Name == "":
			return nil, fmt.Errorf("scenario: site %d has no name: %w", i+1, ErrBadConfig)
		case seen[site.Name]:
			return nil, fmt.Errorf("scenario: site name %q repeated: %w", site.Name, ErrBadConfig)
		case site.Trace == "":
			return nil, fmt.Errorf("scenario: site %q has no trace: %w", site.Name, ErrBadConfig)
		case site.Procs < 0 || site.Skip < 0 || site.TimeScale < 0 || math.IsNaN(site.TimeScale):
			return nil, fmt.Errorf("scenario: site %q: procs, skip and time_scale must be >= 0: %w", site.Name, ErrBadConfig)
		}
		if site.Policy != "" {
			if _, err := plan.ParsePolicy(site.Policy); err != nil {
				return nil, fmt.Errorf("scenario: site %q: %w: %w", site.Name, ErrBadConfig, err)
			}
		}
		seen[site.Name] = true
	}
	if _, err := s.transfer(); err != nil {
		return nil, err
	}
	if _, err := s.span(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Scenario) transfer() (delegation.TransferMode, error) {
	switch strings.ToLower(s.Transfer) {
	case "", "acf":
		return delegation.ACF, nil
	case "on-reject":
		return delegation.OnReject, nil
	}
	return 0, fmt.Errorf("scenario: transfer %q: want acf or on-reject: %w", s.Transfer, ErrBadConfig)
}

// span is the alignment span in seconds, 0 for none.
func (s *Scenario) span() (int64, error) {
	if s.Span == "" {
		return 0, nil
	}
	v, err := ParseSpan(s.Span)
	if err != nil {
		return 0, fmt.Errorf("scenario: span: %w: %w", ErrBadConfig, err)
	}
	return v, nil
}

// Build loads the scenario's traces (sanitised; traces without estimates
// keep their jobs with exact estimates), aligns and scales them, and returns
// the federation configuration with Federate on.
func (s *Scenario) Build() (FedConfig, error) {
	span, _ := s.span()
	tm, _ := s.transfer()
	seed := s.Seed
	if seed == 0 {
		seed = 1
	}
	cfg := FedConfig{Federate: true, Transfer: tm, MaxHops: s.MaxHops, Seed: seed,
		Location: delegation.LocationConfig{MaxCandidates: s.MaxCandidates, Jitter: s.Jitter}}
	for _, site := range s.Sites {
		tr, err := LoadTrace(site.Trace, swf.Options{})
		if err != nil {
			return cfg, fmt.Errorf("site %s: %w", site.Name, err)
		}
		procs := site.Procs
		if procs == 0 {
			procs = int(tr.Header.Procs())
		}
		if procs <= 0 {
			return cfg, fmt.Errorf("site %s: trace has no MaxProcs; set procs: %w", site.Name, ErrBadConfig)
		}
		pol := plan.EASY
		if site.Policy != "" {
			pol, _ = plan.ParsePolicy(site.Policy)
		}
		opts := swf.DefaultSanitizeOptions()
		opts.RequireEstimate = HasEstimates(tr.Jobs)
		jobs, _ := swf.Sanitize(tr.Jobs, int64(procs), opts)
		if site.Skip >= len(jobs) {
			return cfg, fmt.Errorf("site %s: skip %d leaves no jobs: %w", site.Name, site.Skip, ErrBadConfig)
		}
		in := FromSWF(jobs[site.Skip:])
		scale := site.TimeScale
		if scale == 0 {
			scale = 1
		}
		t0 := in[0].Submit
		kept := in[:0]
		for _, j := range in {
			j.Submit -= t0
			if span > 0 && j.Submit >= span {
				break
			}
			j.Submit = int64(math.Round(float64(j.Submit) * scale))
			kept = append(kept, j)
		}
		cfg.Sites = append(cfg.Sites, FedSite{Name: site.Name, Procs: procs, Policy: pol, Jobs: kept})
	}
	return cfg, nil
}

func HasEstimates(jobs []swf.Job) bool {
	for _, j := range jobs {
		if j.ReqTime > 0 {
			return true
		}
	}
	return false
}
