package sim

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/site"
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
	// Clock is "per-site" (default: each site's trace starts at time 0)
	// or "shared" (absolute trace time, one clock for all sites: for sites
	// cut from one grid trace).
	Clock string `yaml:"clock"`
	// Seed seeds the location policy's jitter and the replications of
	// --runs. Default 1.
	Seed uint64 `yaml:"seed"`
	// Transfer is the transfer policy: "acf" (default), "on-reject",
	// "rqf" or "efs" (the study's evolutionary fuzzy transfer policy: a
	// site with rule bases applies them, one without runs ACF); or, instead of delegation, one of the federation study's
	// simulator-only strategies: its central pool ("p-fcfs", "p-easy",
	// "p-list"), its central coordinator ("central-full", "serf"),
	// Shaking-G ("shaking-g") or its leasing ("lease-blos", "lease-clos").
	Transfer string `yaml:"transfer"`
	// ShakingDepth limits Shaking-G's search (transfer shaking-g only):
	// 0 no shaking phase (the starting phase alone), 1 direct moves only,
	// 2 (default) one level of shaking at the candidates.
	ShakingDepth *int `yaml:"shaking_depth"`
	// LeaseGrant is the lender's rule (transfer lease-blos or lease-clos
	// only): "easy" (default: its own EASY would start such a job now) or
	// "idle" (it has the processors idle).
	LeaseGrant string `yaml:"lease_grant"`
	// MaxCandidates is how many peers are asked for quotes (default 3).
	MaxCandidates int `yaml:"max_candidates"`
	// Jitter spreads peer ranking (default 0.1; negative for none).
	Jitter float64 `yaml:"jitter"`
	// MaxHops limits delegations per job (default 1).
	MaxHops int `yaml:"max_hops"`
	// Latency is the one-way message delay between sites in seconds
	// (default 0).
	Latency int64 `yaml:"latency"`
	// PullInterval is RQF's interval (transfer rqf only; default 60s), a
	// node's delegation.pull_interval: an idle site asks its peers for work
	// at most once per interval when something happens to it, and by
	// itself once per interval while it stays idle. Whole seconds.
	PullInterval time.Duration `yaml:"pull_interval"`
	// Workload, if set, spreads one trace slice over the sites by share
	// (the live demo's workload: e2e.TraceSlice); the sites then name no
	// trace of their own.
	Workload *ScenarioWorkload `yaml:"workload"`
	// Sites lists the sites.
	Sites []ScenarioSite `yaml:"sites"`

	root *yaml.Node // for the line numbers of messages
}

// ScenarioSite is one site of a scenario.
type ScenarioSite struct {
	// Name of the site; required and unique.
	Name string `yaml:"name"`
	// Trace is a file or an embedded trace (kth, hpc2n, nasa, lublin, ctc, sdsc).
	Trace string `yaml:"trace"`
	// Procs is the site size; default the trace header's.
	Procs int `yaml:"procs"`
	// Policy: conservative, easy (default), fcfs, list, edf or lttr.
	Policy string `yaml:"policy"`
	// Skip drops this many jobs from the start of the sanitised trace,
	// to choose a window.
	Skip int `yaml:"skip"`
	// Span, if set, replaces the scenario's span for this site (the
	// study cuts its two-year SDSC00 to the others' eleven months).
	Span string `yaml:"span"`
	// TimeScale multiplies the trace's submit times (< 1 compresses
	// arrivals: more load). Default 1.
	TimeScale float64 `yaml:"time_scale"`
	// Overbooking mirrors the node's overbooking block.
	Overbooking ScenarioOverbooking `yaml:"overbooking"`
	// Deadlines gives the site's jobs deadlines (SLA jobs).
	Deadlines ScenarioDeadlines `yaml:"deadlines"`
	// Fees gives the site's jobs fees and penalties.
	Fees ScenarioFees `yaml:"fees"`
	// Fixed lists fixed reservations, in seconds of the site's clock.
	Fixed []ScenarioFixed `yaml:"fixed"`
	// Prefer lists peers asked first, one at a time (ordered spill-over).
	Prefer []string `yaml:"prefer"`
	// Failures makes the site's processors fail and be repaired.
	Failures ScenarioFailures `yaml:"failures"`
	// CommunityShare is the share of processors kept for local users.
	CommunityShare float64 `yaml:"community_share"`
	// Pricing prices the site's quotes (the node's delegation.pricing).
	Pricing ScenarioPricing `yaml:"pricing"`
	// Share is the site's share of the workload's jobs (with workload).
	Share float64 `yaml:"share"`
	// Rules lists the site's EFS rule-base files (transfer efs only), one
	// per partner; paths are relative to the working directory.
	Rules []string `yaml:"rules"`
}

// ScenarioWorkload is a trace slice spread over the sites (TraceSlice).
type ScenarioWorkload struct {
	Trace       string  `yaml:"trace"`
	Skip        int     `yaml:"skip"`
	Jobs        int     `yaml:"jobs"`
	Span        int64   `yaml:"span"`
	MinEstimate int64   `yaml:"min_estimate"`
	MaxEstimate int64   `yaml:"max_estimate"`
	Load        float64 `yaml:"load"`
	Seed        uint64  `yaml:"seed"`
	// History, if set, is how many trace jobs right before the slice
	// (at most skip) seed the runtime statistics of every overbooking
	// site, scaled as the slice (TraceSlice.History): the live demo
	// writes them as its sites' overbooking.history.
	History int `yaml:"history"`
}

// ScenarioOverbooking mirrors the node's overbooking block.
type ScenarioOverbooking struct {
	Enabled        bool     `yaml:"enabled"`
	Mode           string   `yaml:"mode"`
	RiskTest       string   `yaml:"risk_test"`
	PoFMax         *float64 `yaml:"pof_max"`
	SecurityFactor float64  `yaml:"security_factor"`
	// AgeFactor and AgeEvery age the runtime statistics, as the node's
	// settings of these names: 0 means the node's defaults (0.9 and 100),
	// age_factor 1 never forgets.
	AgeFactor float64 `yaml:"age_factor"`
	AgeEvery  int     `yaml:"age_every"`
}

// The node's defaults of overbooking.age_factor and age_every
// (node/config), which a scenario mirrors.
const (
	defaultAgeFactor = 0.9
	defaultAgeEvery  = 100
)

// ScenarioDeadlines sets deadline = submit + factor x estimate.
type ScenarioDeadlines struct {
	Factor float64 `yaml:"factor"`
}

// ScenarioFees sets fee = procs x estimate in hours, penalty = ratio x fee.
type ScenarioFees struct {
	Enabled      bool    `yaml:"enabled"`
	PenaltyRatio float64 `yaml:"penalty_ratio"`
}

// ScenarioFailures is a site's node-failure model, named as `fedsched sim
// --strategy`'s flags (--failure-rate, --repair-rate): rates per processor
// per hour (the thesis's LANL fit: 1.2904e-4 and 0.4333). The draws are
// seeded by the scenario's seed (per replication) and the site's index.
type ScenarioFailures struct {
	FailureRate float64 `yaml:"failure_rate"`
	RepairRate  float64 `yaml:"repair_rate"`
}

func (f ScenarioFailures) model() overbook.FailureModel {
	return overbook.FailureModel{Lambda: f.FailureRate, Mu: f.RepairRate}
}

// ScenarioPricing is a site's price model: model free (the default) or
// libra+$ with its parameters (delegation.LibraPlus).
type ScenarioPricing struct {
	Model                string `yaml:"model"`
	delegation.LibraPlus `yaml:",inline"`
}

func (p ScenarioPricing) pricing() (delegation.Pricing, error) {
	return delegation.ParsePricing(p.Model, p.LibraPlus)
}

func pricingErr(p ScenarioPricing) error {
	_, err := p.pricing()
	return err
}

// ScenarioFixed is one fixed reservation, or with Every a standing one
// (the node's CreateReservation with every_seconds and until): its first
// instance is [Start, End), repeated every Every seconds until Until (0:
// for ever). The site agent keeps a standing reservation as a node does
// (site/standing.go): every placement clear of all its instances, a job
// it leaves no room for rejected.
type ScenarioFixed struct {
	Name  string `yaml:"name"`
	Procs int    `yaml:"procs"`
	Start int64  `yaml:"start"`
	End   int64  `yaml:"end"`
	Every int64  `yaml:"every"`
	Until int64  `yaml:"until"`
}

// standing is the rule of a standing reservation (Every > 0).
func (fx ScenarioFixed) standing() plan.Standing {
	return plan.Standing{Name: fx.Name, Procs: fx.Procs, Start: fx.Start, Every: fx.Every, Length: fx.End - fx.Start, Until: fx.Until}
}

type loaded struct {
	jobs    []Job
	procs   int
	epoch   int64
	history []site.PastJob // seeds the statistics of an overbooking site
}

// loadSites reads each site's trace and sanitises its jobs. The sites are
// independent: they are read two at a time (a grid of 170 traces), and the
// error is the first site's in scenario order, as one after the other.
func (s *Scenario) loadSites() ([]loaded, error) {
	all := make([]loaded, len(s.Sites))
	errs := make([]error, len(s.Sites))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(2, len(s.Sites)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(s.Sites); i = int(next.Add(1) - 1) {
				all[i], errs[i] = s.loadSite(i)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// loadSite reads site i's trace.
func (s *Scenario) loadSite(i int) (loaded, error) {
	site := s.Sites[i]
	tr, err := LoadTrace(site.Trace, swf.Options{})
	if err != nil {
		return loaded{}, fmt.Errorf("scenario: line %d: sites[%d].trace: %w", s.line("sites", i, "trace"), i, err)
	}
	procs := site.Procs
	if procs == 0 {
		procs = int(tr.Header.Procs())
	}
	if procs <= 0 {
		return loaded{}, s.bad("the trace has no MaxProcs; set procs", "sites", i, "procs")
	}
	opts := swf.DefaultSanitizeOptions()
	opts.RequireEstimate = HasEstimates(tr.Jobs)
	jobs, _ := swf.Sanitize(tr.Jobs, int64(procs), opts)
	if site.Skip >= len(jobs) {
		return loaded{}, s.bad(fmt.Sprintf("%d leaves none of the trace's %d jobs", site.Skip, len(jobs)), "sites", i, "skip")
	}
	return loaded{jobs: FromSWF(jobs[site.Skip:]), procs: procs, epoch: tr.Header.UnixStartTime}, nil
}

// slice builds the workload's jobs, site by site.
func (s *Scenario) slice(seed uint64) ([]loaded, error) {
	w := s.Workload
	ts := TraceSlice{Trace: w.Trace, Skip: w.Skip, Jobs: w.Jobs, Span: w.Span, MinEstimate: w.MinEstimate, MaxEstimate: w.MaxEstimate,
		Load: w.Load, Seed: w.Seed}
	if ts.Seed == 0 {
		ts.Seed = seed
	}
	idx := map[string]int{}
	for i, site := range s.Sites {
		ts.Sites = append(ts.Sites, SliceSite{Name: site.Name, Procs: site.Procs, Share: site.Share})
		idx[site.Name] = i
	}
	jobs, info, err := ts.Build()
	if err != nil {
		return nil, fmt.Errorf("scenario: line %d: workload: %w: %w", s.line("workload"), ErrBadConfig, err)
	}
	past, err := ts.History(w.History, info)
	if err != nil {
		return nil, fmt.Errorf("scenario: line %d: workload: %w: %w", s.line("workload", "history"), ErrBadConfig, err)
	}
	history := PastJobs(past)
	all := make([]loaded, len(s.Sites))
	for i, site := range s.Sites {
		all[i].procs = site.Procs
		all[i].history = history
	}
	for _, j := range jobs {
		k := idx[j.Site]
		all[k].jobs = append(all[k].jobs, Job{ID: j.TraceID, Submit: j.At, Runtime: j.Runtime, Estimate: j.Estimate, Procs: j.Procs,
			Deadline: plan.Forever, User: j.User, App: j.App})
	}
	for i, l := range all {
		if len(l.jobs) == 0 {
			return nil, s.bad("gets no job of the workload", "sites", i, "share")
		}
	}
	return all, nil
}

// HasSLAs reports whether any site gives its jobs deadlines, fees or
// overbooking, or has node failures (the SLA report counts the jobs they
// hit).
func (s *Scenario) HasSLAs() bool {
	for _, site := range s.Sites {
		if site.Deadlines.Factor != 0 || site.Fees.Enabled || site.Overbooking.Enabled || site.Failures.FailureRate != 0 {
			return true
		}
	}
	return false
}

// HasPrices reports whether a site prices its quotes (a pricing model
// other than free): the SLA report then shows fees and prices.
func (s *Scenario) HasPrices() bool {
	for _, site := range s.Sites {
		if m := strings.ToLower(site.Pricing.Model); m != "" && m != "free" {
			return true
		}
	}
	return false
}

// LoadScenario reads and checks a scenario file. Unknown fields are errors.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s, err := ParseScenario(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseScenario parses and checks a scenario document: every field, with
// a message that names the field and its line.
func ParseScenario(b []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scenario: %w: %w", ErrBadConfig, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("scenario: %w: %w", ErrBadConfig, err)
	}
	s.root = &root
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// line returns the line of the value at path (keys and sequence indexes)
// in the document, or of its closest ancestor present.
func (s *Scenario) line(path ...any) int {
	n := s.root
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	ln := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch k := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
						ln = n.Content[i].Line
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				next = n.Content[k]
				ln = next.Line
			}
		}
		if next == nil {
			return ln
		}
		n = next
	}
	return ln
}

// bad is a validation error naming the field and its line.
func (s *Scenario) bad(msg string, path ...any) error {
	var b strings.Builder
	for _, p := range path {
		switch k := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	return fmt.Errorf("scenario: line %d: %s: %s: %w", s.line(path...), b.String(), msg, ErrBadConfig)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func (s *Scenario) check() error {
	if len(s.Sites) < 2 {
		return s.bad(fmt.Sprintf("a federation needs at least two sites, got %d", len(s.Sites)), "sites")
	}
	if _, err := s.transfer(); err != nil {
		return s.bad(fmt.Sprintf("%q: want acf, on-reject, rqf, efs, p-fcfs, p-easy, p-list, central-full, serf, shaking-g, lease-blos or lease-clos", s.Transfer), "transfer")
	}
	if err := s.checkPool(); err != nil {
		return err
	}
	if g := s.LeaseGrant; g != "" {
		_, lease := leaseTransfers[s.Transfer]
		switch {
		case !lease:
			return s.bad("has no effect without transfer: lease-blos or lease-clos", "lease_grant")
		case g != "easy" && g != "idle":
			return s.bad(fmt.Sprintf("%q: want easy (the lender's own EASY would start such a job now, the default) or idle (it has the processors idle)", g), "lease_grant")
		}
	}
	if d := s.ShakingDepth; d != nil {
		switch {
		case s.Transfer != "shaking-g":
			return s.bad("has no effect without transfer: shaking-g", "shaking_depth")
		case *d < 0 || *d > DefaultShakingDepth:
			return s.bad(fmt.Sprintf("want 0 (starting phase only), 1 (direct moves) or 2 (one level of shaking, the default; deeper is not implemented), got %d", *d), "shaking_depth")
		}
	}
	if s.Span != "" && !positiveSpan(s.Span) {
		return s.bad(fmt.Sprintf("%q: want a positive duration such as 60d or 2160h", s.Span), "span")
	}
	switch s.Clock {
	case "", "per-site", "shared":
	default:
		return s.bad(fmt.Sprintf("%q: want per-site or shared", s.Clock), "clock")
	}
	switch {
	case s.MaxCandidates < 0:
		return s.bad(fmt.Sprintf("must be >= 0 (0 means 3), got %d", s.MaxCandidates), "max_candidates")
	case !finite(s.Jitter):
		return s.bad(fmt.Sprintf("must be a finite number, got %v", s.Jitter), "jitter")
	case s.MaxHops < 0 || s.MaxHops > 1:
		return s.bad(fmt.Sprintf("must be 0 or 1 (0 means 1), got %d: a site never offers on a job it received (under ACF it starts at once, under on-reject it holds its quoted slot), so a job is delegated at most once and a higher limit would have no effect", s.MaxHops), "max_hops")
	case s.Latency < 0:
		return s.bad(fmt.Sprintf("must be >= 0 seconds, got %d", s.Latency), "latency")
	case s.PullInterval < 0 || s.PullInterval%time.Second != 0:
		return s.bad(fmt.Sprintf("must be a whole number of seconds >= 0 (0 means 60s), got %v", s.PullInterval), "pull_interval")
	case s.PullInterval != 0 && s.Transfer != "rqf":
		return s.bad("only an rqf federation pulls; set transfer: rqf or leave pull_interval out", "pull_interval")
	}
	if err := s.checkWorkload(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, site := range s.Sites {
		at := func(msg string, field ...any) error { return s.bad(msg, append([]any{"sites", i}, field...)...) }
		if w := s.Workload != nil; w {
			switch {
			case site.Trace != "" || site.Skip != 0 || site.TimeScale != 0:
				return at("a site names no trace, skip or time_scale when the scenario has a workload", "trace")
			case !finite(site.Share) || site.Share <= 0:
				return at(fmt.Sprintf("must be a finite number > 0 with a workload, got %v", site.Share), "share")
			case site.Procs <= 0:
				return at("required (> 0) with a workload", "procs")
			}
			site.Trace = s.Workload.Trace
		} else if site.Share != 0 {
			return at("has no effect without a workload block", "share")
		}
		switch {
		case site.Name == "":
			return at("required", "name")
		case !delegation.ValidSiteName(site.Name):
			return at(fmt.Sprintf("%q: letters, digits, '.', '-' and '_', at most 63, starting with a letter or digit", site.Name), "name")
		case seen[site.Name]:
			return at(fmt.Sprintf("%q repeated", site.Name), "name")
		case site.Trace == "":
			return at("required", "trace")
		case site.Procs < 0:
			return at(fmt.Sprintf("must be >= 0 (0: the trace header's), got %d", site.Procs), "procs")
		case site.Skip < 0:
			return at(fmt.Sprintf("must be >= 0, got %d", site.Skip), "skip")
		case site.Span != "" && !positiveSpan(site.Span):
			return at(fmt.Sprintf("%q: want a positive duration such as 60d or 2160h", site.Span), "span")
		case site.Span != "" && s.Workload != nil:
			return at("aligns a site's trace; a workload has one timeline", "span")
		case !finite(site.TimeScale) || site.TimeScale < 0:
			return at(fmt.Sprintf("must be a finite number > 0 (0 means 1), got %v", site.TimeScale), "time_scale")
		case !finite(site.CommunityShare) || site.CommunityShare < 0 || site.CommunityShare >= 1:
			return at(fmt.Sprintf("must be in [0, 1), got %v", site.CommunityShare), "community_share")
		case site.Pricing != ScenarioPricing{} && !slices.Contains([]string{"", "on-reject", "acf"}, strings.ToLower(s.Transfer)):
			return at(fmt.Sprintf("has no effect with transfer %s: only the quotes of on-reject and acf carry prices", s.Transfer), "pricing")
		case pricingErr(site.Pricing) != nil:
			return at(pricingErr(site.Pricing).Error(), "pricing")
		case !finite(site.Deadlines.Factor) || site.Deadlines.Factor != 0 && site.Deadlines.Factor < 1:
			return at(fmt.Sprintf("must be a finite number >= 1 (deadline = submit + factor x estimate), got %v", site.Deadlines.Factor), "deadlines", "factor")
		case !finite(site.Fees.PenaltyRatio) || site.Fees.PenaltyRatio < 0:
			return at(fmt.Sprintf("must be a finite number >= 0, got %v", site.Fees.PenaltyRatio), "fees", "penalty_ratio")
		case site.Fees.PenaltyRatio != 0 && !site.Fees.Enabled:
			return at("has no effect without fees.enabled: true", "fees", "penalty_ratio")
		case !finite(site.Failures.FailureRate) || site.Failures.FailureRate < 0:
			return at(fmt.Sprintf("must be a finite number >= 0 (failures per processor per hour), got %v", site.Failures.FailureRate), "failures", "failure_rate")
		case !finite(site.Failures.RepairRate) || site.Failures.RepairRate < 0:
			return at(fmt.Sprintf("must be a finite number >= 0 (repairs per processor per hour), got %v", site.Failures.RepairRate), "failures", "repair_rate")
		case site.Failures.FailureRate > 0 && site.Failures.RepairRate == 0:
			return at("required (> 0) with a failure_rate: a failed processor would never come back", "failures", "repair_rate")
		case site.Failures.RepairRate > 0 && site.Failures.FailureRate == 0:
			return at("has no effect without a failure_rate", "failures", "repair_rate")
		}
		seen[site.Name] = true
		pol := plan.EASY
		if site.Policy != "" {
			p, err := plan.ParsePolicy(site.Policy)
			if err != nil {
				return at(err.Error(), "policy")
			}
			pol = p
		}
		if err := s.checkOverbooking(i, site.Overbooking, pol); err != nil {
			return err
		}
		for f, fx := range site.Fixed {
			switch {
			case fx.Procs <= 0:
				return at(fmt.Sprintf("must be > 0, got %d", fx.Procs), "fixed", f, "procs")
			case fx.Start < 0:
				return at(fmt.Sprintf("must be >= 0 seconds, got %d", fx.Start), "fixed", f, "start")
			case fx.End <= fx.Start:
				return at(fmt.Sprintf("must be after start (%d), got %d", fx.Start, fx.End), "fixed", f, "end")
			case fx.Name != "" && !delegation.ValidSiteName(fx.Name):
				return at(fmt.Sprintf("%q: letters, digits, '.', '-' and '_'", fx.Name), "fixed", f, "name")
			case fx.Every < 0:
				return at(fmt.Sprintf("must be >= 0 seconds (0: a one-off reservation), got %d", fx.Every), "fixed", f, "every")
			case fx.Every > 0 && fx.End-fx.Start > fx.Every:
				return at(fmt.Sprintf("an instance of %d s is longer than the period %d s", fx.End-fx.Start, fx.Every), "fixed", f, "every")
			case fx.Until != 0 && fx.Every == 0:
				return at("has no effect on a one-off reservation (every: 0)", "fixed", f, "until")
			case fx.Until != 0 && fx.Until <= fx.Start:
				return at(fmt.Sprintf("must be after start (%d), got %d", fx.Start, fx.Until), "fixed", f, "until")
			}
		}
	}
	if s.Transfer == "efs" && !slices.ContainsFunc(s.Sites, func(site ScenarioSite) bool { return len(site.Rules) > 0 }) {
		return s.bad("efs needs rule bases: no site has rules, so every site would run ACF (name acf, or give a site rules)", "transfer")
	}
	for i, site := range s.Sites {
		for p, name := range site.Prefer {
			if !seen[name] || name == site.Name {
				return s.bad(fmt.Sprintf("%q is not another site of the scenario", name), "sites", i, "prefer", p)
			}
		}
		if len(site.Prefer) > 0 && s.Transfer == "rqf" {
			return s.bad("prefer orders the peers a site pushes to; rqf only pulls", "sites", i, "prefer")
		}
		if len(site.Prefer) > 0 && s.Transfer == "efs" {
			return s.bad("efs orders the peers by the AWRT of the jobs delegated to each; prefer has no effect", "sites", i, "prefer")
		}
		if len(site.Rules) > 0 && s.Transfer != "efs" {
			return s.bad("has no effect without transfer: efs", "sites", i, "rules")
		}
		for r, path := range site.Rules {
			if path == "" {
				return s.bad("a rule-base file name is required", "sites", i, "rules", r)
			}
		}
	}
	return nil
}

// checkPool refuses the settings a scenario with one of the study's
// strategies would ignore: they have no delegation protocol (peers, hops,
// messages) and no admission test (SLAs, overbooking, fixed reservations),
// and every site runs the strategy's queue policy.
func (s *Scenario) checkPool() error {
	if !s.studyStrategy() {
		return nil
	}
	why := fmt.Sprintf("has no effect with transfer %s (no delegation protocol)", s.Transfer)
	_, pool := s.pool()
	switch {
	case s.MaxCandidates != 0:
		return s.bad(why, "max_candidates")
	case s.Jitter != 0:
		return s.bad(why, "jitter")
	case s.MaxHops != 0:
		return s.bad(why, "max_hops")
	case s.Latency != 0:
		return s.bad(why, "latency")
	}
	for i, site := range s.Sites {
		sla := fmt.Sprintf("has no effect with transfer %s (no admission test)", s.Transfer)
		switch {
		case !pool && site.Policy != "" && site.Policy != "easy":
			return s.bad(fmt.Sprintf("%q: transfer %s runs EASY at every site, as the study does (and the site alone is measured under its policy)", site.Policy, s.Transfer), "sites", i, "policy")
		case len(site.Prefer) > 0:
			return s.bad(why, "sites", i, "prefer")
		case site.CommunityShare != 0:
			return s.bad(why, "sites", i, "community_share")
		case site.Overbooking.Enabled:
			return s.bad(sla, "sites", i, "overbooking")
		case site.Deadlines.Factor != 0:
			return s.bad(sla, "sites", i, "deadlines")
		case site.Fees.Enabled:
			return s.bad(sla, "sites", i, "fees")
		case len(site.Fixed) > 0:
			return s.bad(sla, "sites", i, "fixed")
		case site.Failures != ScenarioFailures{}:
			return s.bad(fmt.Sprintf("has no effect with transfer %s (its engine injects no failures)", s.Transfer), "sites", i, "failures")
		}
	}
	return nil
}

func (s *Scenario) checkWorkload() error {
	w := s.Workload
	if w == nil {
		return nil
	}
	at := func(msg string, field string) error { return s.bad(msg, "workload", field) }
	switch {
	case w.Trace == "":
		return at("required", "trace")
	case w.Skip < 0:
		return at(fmt.Sprintf("must be >= 0, got %d", w.Skip), "skip")
	case w.History < 0 || w.History > w.Skip:
		return at(fmt.Sprintf("must be from 0 to skip (%d): the jobs before the slice, got %d", w.Skip, w.History), "history")
	case w.Jobs <= 0:
		return at(fmt.Sprintf("must be > 0, got %d", w.Jobs), "jobs")
	case w.Span <= 0:
		return at(fmt.Sprintf("must be > 0 seconds, got %d", w.Span), "span")
	case w.MinEstimate <= 0:
		return at(fmt.Sprintf("must be > 0 seconds, got %d", w.MinEstimate), "min_estimate")
	case w.MaxEstimate < w.MinEstimate:
		return at(fmt.Sprintf("must be >= min_estimate (%d), got %d", w.MinEstimate, w.MaxEstimate), "max_estimate")
	case !finite(w.Load) || w.Load <= 0:
		return at(fmt.Sprintf("must be a finite number > 0, got %v", w.Load), "load")
	case s.Span != "" || s.Clock != "":
		return s.bad("span and clock align traces; a workload has one timeline", "workload")
	}
	return nil
}

func (s *Scenario) checkOverbooking(i int, o ScenarioOverbooking, pol plan.Policy) error {
	at := func(msg string, field ...any) error {
		return s.bad(msg, append([]any{"sites", i, "overbooking"}, field...)...)
	}
	if !o.Enabled {
		if o.Mode != "" || o.RiskTest != "" || o.PoFMax != nil || o.SecurityFactor != 0 || o.AgeFactor != 0 || o.AgeEvery != 0 {
			return at("set, but overbooking is not enabled (enabled: true)")
		}
		return nil
	}
	switch {
	case pol != plan.Conservative:
		return at(fmt.Sprintf("needs policy conservative (the queue policies keep no reservations to overbook), the site has %v", pol), "enabled")
	case o.Mode != "" && o.Mode != "heuristic" && o.Mode != "comprehensive":
		return at(fmt.Sprintf("%q: want heuristic or comprehensive", o.Mode), "mode")
	case o.RiskTest != "" && o.RiskTest != "threshold" && o.RiskTest != "risk":
		return at(fmt.Sprintf("%q: want threshold or risk", o.RiskTest), "risk_test")
	case o.PoFMax != nil && (!finite(*o.PoFMax) || *o.PoFMax < 0 || *o.PoFMax > 1):
		return at(fmt.Sprintf("must be in [0, 1], got %v", *o.PoFMax), "pof_max")
	case o.PoFMax != nil && o.RiskTest == "risk":
		return at("has no effect with risk_test: risk", "pof_max")
	case !finite(o.SecurityFactor) || o.SecurityFactor < 0:
		return at(fmt.Sprintf("must be a finite number >= 0, got %v", o.SecurityFactor), "security_factor")
	case o.SecurityFactor != 0 && o.RiskTest != "risk":
		return at("has no effect without risk_test: risk", "security_factor")
	case !(o.AgeFactor >= 0 && o.AgeFactor <= 1):
		return at(fmt.Sprintf("must be in [0, 1] (0: %v), got %v", defaultAgeFactor, o.AgeFactor), "age_factor")
	case o.AgeEvery < 0:
		return at(fmt.Sprintf("must be >= 0 (0: %d), got %d", defaultAgeEvery, o.AgeEvery), "age_every")
	}
	if f, k := o.ageing(); f < 1 && float64(k)*f/(1-f) < overbook.DefaultAdmissionMinSamples {
		// The node refuses the same: its statistics could never hold
		// min_samples of weight, so nothing would ever be overbooked.
		return at(fmt.Sprintf("with age_every %d the statistics keep only %.1f samples of weight, fewer than the %d an overbooked job needs: nothing would ever be overbooked; raise age_factor or age_every", k, float64(k)*f/(1-f), overbook.DefaultAdmissionMinSamples), "age_factor")
	}
	return nil
}

// ageing is the block's age_factor and age_every with the node's defaults
// in place of zeros.
func (o ScenarioOverbooking) ageing() (float64, int) {
	f, k := o.AgeFactor, o.AgeEvery
	if f == 0 {
		f = defaultAgeFactor
	}
	if k == 0 {
		k = defaultAgeEvery
	}
	return f, k
}

// admission builds the site agent's overbooking from the block, as the
// node does from its config.
func (o ScenarioOverbooking) admission() *site.Overbooking {
	if !o.Enabled {
		return nil
	}
	ob := &site.Overbooking{}
	ob.AgeFactor, ob.AgeEvery = o.ageing()
	if o.Mode == "comprehensive" {
		ob.Mode = overbook.Comprehensive
	}
	if o.RiskTest == "risk" {
		sf := o.SecurityFactor
		if sf == 0 {
			sf = 2
			if o.Mode == "comprehensive" {
				sf = 4
			}
		}
		ob.Test = overbook.Risk{SecurityFactor: sf}
	} else {
		pm := 0.1
		if o.PoFMax != nil {
			pm = *o.PoFMax
		}
		ob.Test = overbook.Threshold{PoFMax: pm}
	}
	return ob
}

func (s *Scenario) transfer() (delegation.TransferMode, error) {
	if s.Transfer == "" {
		return delegation.ACF, nil
	}
	if s.studyStrategy() {
		return delegation.ACF, nil // unused: the strategy replaces delegation
	}
	return delegation.ParseTransfer(s.Transfer)
}

// poolTransfers are the transfer names of the study's central pool and the
// queue policy each applies.
var poolTransfers = map[string]plan.Policy{"p-fcfs": plan.FCFS, "p-easy": plan.EASY, "p-list": plan.LIST}

// pool reports whether the scenario pools its sites instead of delegating,
// and with which queue policy.
func (s *Scenario) pool() (plan.Policy, bool) {
	p, ok := poolTransfers[s.Transfer]
	return p, ok
}

// centralTransfers are the transfer names of the study's central active
// coordinator.
var centralTransfers = map[string]CentralMode{"central-full": CentralFull, "serf": CentralSERF}

// leaseTransfers are the transfer names of the study's leasing.
var leaseTransfers = map[string]LeaseMode{"lease-blos": LeaseBLOS, "lease-clos": LeaseCLOS}

// studyStrategy reports whether the scenario runs one of the study's
// simulator-only strategies instead of delegation.
func (s *Scenario) studyStrategy() bool {
	_, pool := s.pool()
	_, central := centralTransfers[s.Transfer]
	_, lease := leaseTransfers[s.Transfer]
	return pool || central || lease || s.Transfer == "shaking-g"
}

func positiveSpan(v string) bool {
	n, err := ParseSpan(v)
	return err == nil && n > 0
}

// span is the alignment span in seconds, 0 for none.
func (s *Scenario) span() int64 {
	if s.Span == "" {
		return 0
	}
	v, _ := ParseSpan(s.Span)
	return v
}

// Build loads the scenario's traces (sanitised; traces without estimates
// keep their jobs with exact estimates), aligns and scales them, gives SLA
// terms to the jobs of sites with deadlines or fees, and returns the
// federation configuration with Federate on.
func (s *Scenario) Build() (FedConfig, error) { return s.BuildReplication(0) }

// ReplicationVaries reports whether replications differ in their jobs (a
// workload without its own seed draws each replication's assignment of
// jobs to sites) and not only in the location policy's jitter.
func (s *Scenario) ReplicationVaries() bool { return s.Workload != nil && s.Workload.Seed == 0 }

// HasFailures reports whether a site's processors fail: each replication
// draws its own failures, so each needs its own baseline (every site
// alone, with the same failures).
func (s *Scenario) HasFailures() bool {
	for _, site := range s.Sites {
		if site.Failures.FailureRate > 0 {
			return true
		}
	}
	return false
}

// BuildReplication is Build for replication i (from 0) of --runs: its seed
// is ReplicationSeed(seed, i), and a workload without a seed of its own
// draws its jobs' sites with it. Replication 0 is Build.
func (s *Scenario) BuildReplication(i int) (FedConfig, error) {
	span := s.span()
	tm, _ := s.transfer()
	seed := s.Seed
	if seed == 0 {
		seed = 1
	}
	seed = ReplicationSeed(seed, i)
	cfg := FedConfig{Federate: true, Transfer: tm, MaxHops: s.MaxHops, Seed: seed, Latency: s.Latency, PullSeconds: int64(s.PullInterval / time.Second),
		Location: delegation.LocationConfig{MaxCandidates: s.MaxCandidates, Jitter: s.Jitter}}
	if p, ok := s.pool(); ok {
		cfg.Pool = &PoolConfig{Policy: p}
	}
	if m, ok := centralTransfers[s.Transfer]; ok {
		cfg.Central = &CentralConfig{Mode: m}
	}
	if m, ok := leaseTransfers[s.Transfer]; ok {
		cfg.Lease = &LeaseConfig{Mode: m}
		if s.LeaseGrant == "idle" {
			cfg.Lease.Grant = GrantIdle
		}
	}
	if s.Transfer == "shaking-g" {
		cfg.Shaking = &ShakingConfig{Depth: DefaultShakingDepth}
		if s.ShakingDepth != nil {
			cfg.Shaking.Depth = *s.ShakingDepth
		}
	}
	var all []loaded
	if s.Workload != nil {
		var err error
		if all, err = s.slice(seed); err != nil {
			return cfg, err
		}
	}
	if s.Workload == nil {
		var err error
		if all, err = s.loadSites(); err != nil {
			return cfg, err
		}
	}
	// The time origin: each site's first job (per-site), or the earliest
	// absolute trace time of all of them (shared).
	origin := make([]int64, len(all))
	if s.Workload != nil {
		// One timeline already: the slice starts at 0.
	} else if s.Clock == "shared" {
		first := int64(math.MaxInt64)
		for _, l := range all {
			first = min(first, l.epoch+l.jobs[0].Submit)
		}
		for k, l := range all {
			origin[k] = first - l.epoch
		}
	} else {
		for k, l := range all {
			origin[k] = l.jobs[0].Submit
		}
	}
	for k, site := range s.Sites {
		l := all[k]
		pol := plan.EASY
		if site.Policy != "" {
			pol, _ = plan.ParsePolicy(site.Policy)
		}
		scale := site.TimeScale
		if scale == 0 {
			scale = 1
		}
		fees := overbook.FeeModel{PenaltyRatio: site.Fees.PenaltyRatio}
		siteSpan := span
		if site.Span != "" {
			siteSpan, _ = ParseSpan(site.Span)
		}
		// The span counts from the site's first job; read it before kept,
		// which shares l.jobs's array, overwrites it.
		first := l.jobs[0].Submit - origin[k]
		kept := l.jobs[:0]
		for _, j := range l.jobs {
			j.Submit -= origin[k]
			if siteSpan > 0 && j.Submit-first >= siteSpan {
				break
			}
			j.Submit = int64(math.Round(float64(j.Submit) * scale))
			if f := site.Deadlines.Factor; f > 0 {
				j.Deadline = j.Submit + int64(math.Ceil(f*float64(j.Estimate)))
			}
			if site.Fees.Enabled {
				j.Fee = fees.Fee(j.Procs, j.Estimate)
				j.Penalty = fees.Penalty(j.Procs, j.Estimate)
			}
			kept = append(kept, j)
		}
		pr, _ := site.Pricing.pricing() // validated
		fs := FedSite{Name: site.Name, Procs: l.procs, Policy: pol, Jobs: kept, Overbooking: site.Overbooking.admission(),
			Prefer: site.Prefer, CommunityShare: site.CommunityShare, Failures: site.Failures.model(), Pricing: pr}
		for r, path := range site.Rules {
			rb, err := delegation.LoadRuleBase(path)
			if err != nil {
				return cfg, fmt.Errorf("scenario: line %d: sites[%d].rules[%d]: %w", s.line("sites", k, "rules", r), k, r, err)
			}
			if rb.Site != site.Name {
				return cfg, s.bad(fmt.Sprintf("%s is the rule base of site %q, not of %q", path, rb.Site, site.Name), "sites", k, "rules", r)
			}
			for _, o := range fs.Rules {
				if o.Partner == rb.Partner {
					return cfg, s.bad(fmt.Sprintf("%s: a second rule base for partner %q", path, rb.Partner), "sites", k, "rules", r)
				}
			}
			fs.Rules = append(fs.Rules, rb)
		}
		if fs.Overbooking != nil {
			fs.Overbooking.History = l.history
			fs.Overbooking.Failures = fs.Failures // the PoF counts them, as --strategy's
		}
		var rules []plan.Standing
		for _, fx := range site.Fixed {
			if fx.Every > 0 {
				rules = append(rules, fx.standing())
				continue
			}
			fs.Fixed = append(fs.Fixed, plan.FixedSpec{ID: -int64(len(fs.Fixed) + 1), Name: fx.Name, Procs: fx.Procs, Start: fx.Start, End: fx.End})
		}
		fs.Standing = rules
		cfg.Sites = append(cfg.Sites, fs)
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
