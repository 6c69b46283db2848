package delegation

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// twoRules: small jobs on a short queue are accepted, wide jobs on a queue
// of two site-widths are declined.
var twoRules = RuleBase{Site: "kth96", Partner: "ctc96", PartnerProcs: 430, Rules: []FuzzyRule{
	{NWP: Gaussian{Center: 0, Width: 1}, NJP: Gaussian{Center: 0, Width: 10}, Accept: true},
	{NWP: Gaussian{Center: 2, Width: 1}, NJP: Gaussian{Center: 50, Width: 25}, Accept: false},
}}

// TestFuzzyInference checks the TSK controller against values computed by
// hand: φ1 = exp(−nwp²)·exp(−(njp/10)²), φ2 = exp(−(nwp−2)²)·exp(−((njp−50)/25)²),
// y = (φ1 − φ2)/(φ1 + φ2).
func TestFuzzyInference(t *testing.T) {
	for name, tc := range map[string]struct {
		nwp, njp float64
		want     float64
		accept   bool
	}{
		// φ1 = 1, φ2 = e^−8: y = tanh(4).
		"empty queue, narrow job": {0, 0, math.Tanh(4), true},
		// φ1 = e^−7.25, φ2 = e^−2: y = −tanh(2.625).
		"between, leaning to rule 2": {1, 25, -math.Tanh(2.625), false},
		// φ1 = e^−29, φ2 = 1: y = −tanh(14.5).
		"long queue, wide job": {2, 50, -math.Tanh(14.5), false},
		// φ1 = e^−0.5, φ2 = e^−5.49: y = tanh(2.495).
		"short queue, small job": {0.5, 5, math.Tanh(2.495), true},
		// Both memberships underflow to 0: no rule fires, y = 0, declined.
		"no rule fires": {1000, 1000, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			got := twoRules.Output(tc.nwp, tc.njp)
			if math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("Output(%v, %v) = %.15g, want %.15g", tc.nwp, tc.njp, got, tc.want)
			}
			if a := twoRules.Accepts(tc.nwp, tc.njp); a != tc.accept {
				t.Fatalf("Accepts(%v, %v) = %v, want %v", tc.nwp, tc.njp, a, tc.accept)
			}
		})
	}
}

func TestFeatures(t *testing.T) {
	if got := NWP(250, 100); got != 2.5 {
		t.Fatalf("NWP(250, 100) = %v, want 2.5", got)
	}
	if got := NJP(43, 430); got != 10 {
		t.Fatalf("NJP(43, 430) = %v, want 10", got)
	}
	if got := (Gaussian{Center: 3, Width: 2}).At(5); math.Abs(got-math.Exp(-1)) > 1e-15 {
		t.Fatalf("g(5) = %v, want e^-1", got)
	}
}

func TestRuleBasesFor(t *testing.T) {
	ctc := &RuleBase{Partner: "ctc96", PartnerProcs: 430}
	kth := &RuleBase{Partner: "kth96", PartnerProcs: 100}
	rs := RuleBases{ctc, kth}
	for partner, tc := range map[string]struct {
		procs int
		want  *RuleBase
	}{
		"ctc96":  {430, ctc},
		"kth96":  {100, kth},
		"sdsc00": {128, kth}, // the study's newcomer: KTH96's rule base
		"big":    {1664, ctc},
	} {
		if got := rs.For(partner, tc.procs); got != tc.want {
			t.Errorf("For(%s, %d) = %s's, want %s's", partner, tc.procs, got.Partner, tc.want.Partner)
		}
	}
	if (RuleBases{}).For("x", 1) != nil {
		t.Fatal("no rule bases: want nil")
	}
}

func TestRankAWRT(t *testing.T) {
	hist := map[string]History{}
	slow, fast := History{}, History{}
	slow.ObserveArea(10, 100, 5000) // AWRT 5000
	fast.ObserveArea(10, 100, 1000)
	fast.ObserveArea(30, 100, 3000) // (1000·1000 + 3000·3000)/4000 = 2500
	hist["slow"], hist["fast"] = slow, fast
	if a, _ := fast.AWRT(); a != 2500 {
		t.Fatalf("AWRT = %v, want 2500", a)
	}
	cands := []Candidate{{Site: "slow", Procs: 100}, {Site: "fast", Procs: 100}, {Site: "new", Procs: 100}, {Site: "small", Procs: 8},
		{Site: "visited", Procs: 100}}
	route := Route{{Site: "visited", Action: ActionSubmitted}}
	var got []string
	for _, c := range RankAWRT(cands, 16, route, hist) {
		got = append(got, c.Site)
	}
	if want := []string{"new", "fast", "slow"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

const goodFile = `# a comment
format: fedsched-efs-rules
version: 1
site: kth96
partner: ctc96
partner_procs: 430
rules:
  - nwp: {center: 0, width: 1}
    njp: {center: 0, width: 10}
    then: accept
  - nwp: {center: 2, width: 1}
    njp: {center: 50, width: 25}
    then: decline
`

func TestParseRuleBase(t *testing.T) {
	rb, err := ParseRuleBase("good.yaml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*rb, twoRules) {
		t.Fatalf("parsed %+v, want %+v", *rb, twoRules)
	}
	back, err := ParseRuleBase("out.yaml", rb.Marshal("header"))
	if err != nil || !reflect.DeepEqual(back, rb) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestParseRuleBaseErrors(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(goodFile, old) {
			t.Fatalf("%q not in the file", old)
		}
		return strings.Replace(goodFile, old, new, 1)
	}
	for name, tc := range map[string]struct {
		doc, want string
	}{
		"unknown field":    {edit("partner_procs: 430", "partner_procs: 430\ncolour: red"), "line 7"},
		"version":          {edit("version: 1", "version: 2"), "r.yaml:3: version 2"},
		"format":           {edit("format: fedsched-efs-rules", "format: other"), "r.yaml:2: format"},
		"no site":          {edit("site: kth96\n", ""), "r.yaml:"},
		"bad site name":    {edit("site: kth96", "site: 'a b'"), "r.yaml:4: site"},
		"partner is site":  {edit("partner: ctc96", "partner: kth96"), "r.yaml:5: partner"},
		"partner_procs":    {edit("partner_procs: 430", "partner_procs: 0"), "r.yaml:6: partner_procs"},
		"zero width":       {edit("njp: {center: 50, width: 25}", "njp: {center: 50, width: 0}"), "r.yaml:12: rules[1].njp.width"},
		"negative width":   {edit("nwp: {center: 0, width: 1}", "nwp: {center: 0, width: -1}"), "r.yaml:8: rules[0].nwp.width"},
		"nan centre":       {edit("nwp: {center: 2, width: 1}", "nwp: {center: .nan, width: 1}"), "r.yaml:11: rules[1].nwp.center"},
		"missing njp":      {edit("    njp: {center: 0, width: 10}\n", ""), "r.yaml:8: rules[0].njp: required"},
		"bad consequent":   {edit("then: decline", "then: maybe"), "r.yaml:13: rules[1].then"},
		"no rules":         {goodFile[:strings.Index(goodFile, "rules:")] + "rules: []\n", "r.yaml:7: rules"},
		"not a mapping":    {"- 1\n", "r.yaml:1"},
		"broken yaml":      {"rules: [\n", "r.yaml"},
		"string for width": {edit("width: 10}", "width: wide}"), "line 9"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRuleBase("r.yaml", []byte(tc.doc))
			if err == nil {
				t.Fatalf("no error for\n%s", tc.doc)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}

// FuzzParseRuleBase: the parser never panics, and what it accepts it
// writes back (Marshal) as a file that parses to the same rule base.
func FuzzParseRuleBase(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add([]byte("format: fedsched-efs-rules\nversion: 1\nsite: a\npartner: b\npartner_procs: 1\nrules:\n  - nwp: {center: 1e308, width: 1e-300}\n    njp: {center: -0, width: 5}\n    then: accept\n"))
	f.Add([]byte("rules: {a: 1}\n"))
	// A trained file's numbers carry every digit.
	f.Add([]byte("format: fedsched-efs-rules\nversion: 1\nsite: kth96\npartner: ctc96\npartner_procs: 430\nrules:\n" +
		"  - nwp: {center: 3.361811218920187, width: 8.831621529117141}\n    njp: {center: 78.45949658564129, width: 53.32124405367769}\n    then: decline\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rb, err := ParseRuleBase("fuzz.yaml", b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q: want ErrInvalid prefixed by the file name", err)
			}
			return
		}
		out := rb.Marshal("round trip")
		back, err := ParseRuleBase("back.yaml", out)
		if err != nil {
			t.Fatalf("re-parse of\n%s: %v", out, err)
		}
		if !reflect.DeepEqual(back, rb) {
			t.Fatalf("round trip changed the rule base:\n%+v\n%+v", rb, back)
		}
		for _, x := range []float64{0, 1, 50, 1e6} {
			if y := rb.Output(x, x); math.IsNaN(y) || y < -1-1e-12 || y > 1+1e-12 {
				t.Fatalf("Output(%v) = %v: want in [-1, 1]", x, y)
			}
		}
	})
}
