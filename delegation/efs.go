package delegation

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// EFS is the evolutionary fuzzy transfer policy of the federation study
// (Papaspyrou 2013, §6.2; Fölling et al. 2010): a Takagi–Sugeno–Kang
// controller per partner decides, on the site's own information only,
// whether a local job is kept or offered to the partner the location policy
// picked, and whether a partner's offer is accepted into the local queue.
//
// The controller has two features, both computed at the deciding site k:
//
//	NWP_k = (1/m_k)·Σ_{j∈ν_k} m_j   (waiting parallelism of k's queue ν_k)
//	NJP_j = 100·m_j/m_k             (the job's width, in % of k's size)
//
// and rules i = 1..N_r with a Gaussian membership per feature,
// g(x) = exp(−(x−γ)²/σ²), and a constant consequent y_i ∈ {+1 accept, −1
// decline}. The rule's firing strength is φ_i = g_i^NWP(NWP)·g_i^NJP(NJP);
// the controller's output is y_D = Σφ_i·y_i / Σφ_i and the decision is
// sgn(y_D): > 0 accepts. When no rule fires at all (Σφ_i = 0 in floating
// point), y_D is 0 and the job is declined.
//
// The study leaves NJP's m_k ambiguous for a remote offer ("the site the job
// was submitted to"); here both features are the deciding site's, so that a
// site decides on what it alone knows (docs/simulation.md).

// Gaussian is a membership function exp(−(x−Center)²/Width²).
type Gaussian struct {
	Center float64 `yaml:"center"`
	Width  float64 `yaml:"width"`
}

// At is the membership of x.
func (g Gaussian) At(x float64) float64 {
	d := (x - g.Center) / g.Width
	return math.Exp(-d * d)
}

// FuzzyRule is one TSK rule: IF NWP is NWP AND NJP is NJP THEN Accept (+1)
// or decline (−1).
type FuzzyRule struct {
	NWP    Gaussian
	NJP    Gaussian
	Accept bool
}

// RuleBase is one site's controller for one partner.
type RuleBase struct {
	// Site is the site that applies the rule base, Partner the partner it
	// was trained with and PartnerProcs that partner's size: a site that
	// meets a partner it has no rule base for uses the one whose
	// PartnerProcs is closest (the study's rule for unknown partners).
	Site         string
	Partner      string
	PartnerProcs int
	Rules        []FuzzyRule
}

// Output is the controller's output y_D for the features, in [−1, 1];
// 0 when no rule fires.
func (rb *RuleBase) Output(nwp, njp float64) float64 {
	var num, den float64
	for _, r := range rb.Rules {
		phi := r.NWP.At(nwp) * r.NJP.At(njp)
		den += phi
		if r.Accept {
			num += phi
		} else {
			num -= phi
		}
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// Accepts is the decision sgn(y_D) > 0: keep a local job (not offer it to
// this partner), or take a partner's offer.
func (rb *RuleBase) Accepts(nwp, njp float64) bool { return rb.Output(nwp, njp) > 0 }

// NWP is the normalised waiting parallelism: the processors the site's
// waiting jobs ask for, over its size.
func NWP(waitingProcs, siteProcs int) float64 { return float64(waitingProcs) / float64(siteProcs) }

// NJP is the normalised job parallelism: the job's width in per cent of the
// site's size.
func NJP(jobProcs, siteProcs int) float64 { return 100 * float64(jobProcs) / float64(siteProcs) }

// RuleBases are a site's rule bases, one per partner.
type RuleBases []*RuleBase

// For returns the rule base for partner: its own, or for an unknown
// partner the one trained with the partner closest in size (ties to the
// first listed); nil if there is none.
func (rs RuleBases) For(partner string, partnerProcs int) *RuleBase {
	var best *RuleBase
	for _, rb := range rs {
		if rb.Partner == partner {
			return rb
		}
		if best == nil || absInt(rb.PartnerProcs-partnerProcs) < absInt(best.PartnerProcs-partnerProcs) {
			best = rb
		}
	}
	return best
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// RankAWRT is EFS's location policy (the study's Eq. 6.9): peers too small
// for the job or on its route already are dropped; the rest are ordered by
// the AWRT the origin observed for the jobs it delegated to each
// (History.AWRT), shortest first. A peer the origin has not delegated to
// yet comes first (the study leaves the cold start open: an unknown peer
// gets tried), ties by name.
func RankAWRT(cands []Candidate, procs int, route Route, hist map[string]History) []Candidate {
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if c.Procs >= procs && !route.Visited(c.Site) {
			out = append(out, c)
		}
	}
	awrt := func(c Candidate) float64 {
		v, ok := hist[c.Site].AWRT()
		if !ok {
			return -1
		}
		return v
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		x, y := awrt(a), awrt(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return strings.Compare(a.Site, b.Site)
	})
	return out
}

// RuleFileFormat and RuleFileVersion head a rule-base file.
const (
	RuleFileFormat  = "fedsched-efs-rules"
	RuleFileVersion = 1
)

// ruleFile is the file format, version 1 (docs/simulation.md):
//
//	format: fedsched-efs-rules
//	version: 1
//	site: kth96           # the site that applies it
//	partner: ctc96        # the partner it decides about
//	partner_procs: 430    # the partner's size
//	rules:                # one or more
//	  - nwp: {center: 1.5, width: 0.8}
//	    njp: {center: 20, width: 15}
//	    then: accept      # or decline
type ruleFile struct {
	Format       string     `yaml:"format"`
	Version      int        `yaml:"version"`
	Site         string     `yaml:"site"`
	Partner      string     `yaml:"partner"`
	PartnerProcs int        `yaml:"partner_procs"`
	Rules        []ruleLine `yaml:"rules"`
}

type ruleLine struct {
	NWP  *Gaussian `yaml:"nwp"`
	NJP  *Gaussian `yaml:"njp"`
	Then string    `yaml:"then"`
}

// LoadRuleBase reads a rule-base file; errors name the file and the line.
func LoadRuleBase(path string) (*RuleBase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("efs rule base: %w", err)
	}
	return ParseRuleBase(path, b)
}

// ParseRuleBase parses a rule-base document strictly: unknown fields, a
// missing or other format or version, a missing feature, a width that is
// not > 0, a centre or width that is not finite and a consequent other than
// accept or decline are errors, each naming name (the file) and its line.
func ParseRuleBase(name string, b []byte) (*RuleBase, error) {
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s: %w", name, line, fmt.Sprintf(format, args...), ErrInvalid)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalid, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, bad(max(root.Line, 1), "want a mapping with format, version, site, partner, partner_procs and rules")
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f ruleFile
	if err := dec.Decode(&f); err != nil {
		// yaml.v3 names the line ("line 7: field x not found").
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalid, err)
	}
	top := root.Content[0]
	line := func(n *yaml.Node, key string) int {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i].Line
			}
		}
		return n.Line
	}
	switch {
	case f.Format != RuleFileFormat:
		return nil, bad(line(top, "format"), "format %q: want %s", f.Format, RuleFileFormat)
	case f.Version != RuleFileVersion:
		return nil, bad(line(top, "version"), "version %d: this build reads version %d", f.Version, RuleFileVersion)
	case f.Site == "":
		return nil, bad(line(top, "site"), "site: required (the site that applies the rule base)")
	case f.Partner == "":
		return nil, bad(line(top, "partner"), "partner: required (the partner the rule base decides about)")
	case !ValidSiteName(f.Site):
		return nil, bad(line(top, "site"), "site %q: letters, digits, '.', '-' and '_', at most 63, starting with a letter or digit", f.Site)
	case !ValidSiteName(f.Partner):
		return nil, bad(line(top, "partner"), "partner %q: letters, digits, '.', '-' and '_', at most 63, starting with a letter or digit", f.Partner)
	case f.Partner == f.Site:
		return nil, bad(line(top, "partner"), "partner %q is the site itself", f.Partner)
	case f.PartnerProcs <= 0:
		return nil, bad(line(top, "partner_procs"), "partner_procs: must be > 0, got %d", f.PartnerProcs)
	case len(f.Rules) == 0:
		return nil, bad(line(top, "rules"), "rules: want at least one rule")
	}
	var seq *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "rules" {
			seq = top.Content[i+1]
		}
	}
	rb := &RuleBase{Site: f.Site, Partner: f.Partner, PartnerProcs: f.PartnerProcs, Rules: make([]FuzzyRule, len(f.Rules))}
	for i, r := range f.Rules {
		rn := seq.Content[i]
		for _, ft := range []struct {
			key string
			g   *Gaussian
		}{{"nwp", r.NWP}, {"njp", r.NJP}} {
			switch {
			case ft.g == nil:
				return nil, bad(rn.Line, "rules[%d].%s: required", i, ft.key)
			case !isFinite(ft.g.Center):
				return nil, bad(line(rn, ft.key), "rules[%d].%s.center: must be a finite number, got %v", i, ft.key, ft.g.Center)
			case !isFinite(ft.g.Width) || ft.g.Width <= 0:
				return nil, bad(line(rn, ft.key), "rules[%d].%s.width: must be a finite number > 0, got %v", i, ft.key, ft.g.Width)
			}
		}
		rb.Rules[i] = FuzzyRule{NWP: *r.NWP, NJP: *r.NJP}
		switch r.Then {
		case "accept":
			rb.Rules[i].Accept = true
		case "decline":
		default:
			return nil, bad(line(rn, "then"), "rules[%d].then %q: want accept or decline", i, r.Then)
		}
	}
	return rb, nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Marshal writes the rule base in the file format, with header comment
// lines (each prefixed "# ") first. Numbers are written exactly
// (shortest round-trip form), so that parsing the output gives the same
// rule base.
func (rb *RuleBase) Marshal(header ...string) []byte {
	var b bytes.Buffer
	for _, h := range header {
		for _, l := range strings.Split(h, "\n") {
			b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	fmt.Fprintf(&b, "format: %s\nversion: %d\nsite: %s\npartner: %s\npartner_procs: %d\nrules:\n",
		RuleFileFormat, RuleFileVersion, yamlString(rb.Site), yamlString(rb.Partner), rb.PartnerProcs)
	for _, r := range rb.Rules {
		then := "decline"
		if r.Accept {
			then = "accept"
		}
		fmt.Fprintf(&b, "  - nwp: {center: %s, width: %s}\n    njp: {center: %s, width: %s}\n    then: %s\n",
			num(r.NWP.Center), num(r.NWP.Width), num(r.NJP.Center), num(r.NJP.Width), then)
	}
	return b.Bytes()
}

// yamlString quotes s for YAML (a site name: nothing to escape).
func yamlString(s string) string { return strconv.Quote(s) }

// ValidSiteName is the federation's rule for site names: letters, digits,
// '.', '-' and '_', at most 63, starting with a letter or digit (a node
// checks its own with node/auth.CheckName, which says what is wrong).
func ValidSiteName(n string) bool {
	if n == "" || len(n) > 63 {
		return false
	}
	for i, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && (r == '.' || r == '-' || r == '_')
		if !ok {
			return false
		}
	}
	return true
}
