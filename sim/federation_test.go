package sim

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/swf"
)

func loadThreeSites(t *testing.T) FedConfig {
	t.Helper()
	sc, err := LoadScenario("../scenarios/three-sites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFederationScenario checks the repository's scenario: the most loaded
// site's AWRT improves by at least 10 % and no site's worsens by more than
// 5 %; every job runs exactly once, at one site, without over-committing it;
// under ACF a delegated job starts the moment it is submitted.
func TestFederationScenario(t *testing.T) {
	cfg := loadThreeSites(t)
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
	for k, s := range cfg.Sites {
		a, f := alone.OriginMetrics(k).AWRT, fed.OriginMetrics(k).AWRT
		change := (a - f) / a
		t.Logf("%s: AWRT alone %.0f, federated %.0f, change %+.1f %%", s.Name, a, f, 100*change)
		if change < -0.05 {
			t.Errorf("%s: AWRT worsened by %.1f %%", s.Name, -100*change)
		}
		if k == most && change < 0.10 {
			t.Errorf("most loaded site %s: AWRT improved only %.1f %%", s.Name, 100*change)
		}
	}
	for k, s := range cfg.Sites {
		var recs []Record
		for _, r := range fed.Records {
			if r.Exec == k {
				recs = append(recs, r.Record)
			}
			if r.Exec != r.Origin {
				if r.Start != r.Submit {
					t.Fatalf("job %d delegated under ACF started at %d, submitted at %d", r.ID, r.Start, r.Submit)
				}
				if r.Route.Hops() != 1 || !r.Route.Visited(cfg.Sites[r.Exec].Name) {
					t.Fatalf("job %d: route %+v does not end at its executing site", r.ID, r.Route)
				}
			}
		}
		checkSchedule(t, &Result{Records: recs}, s.Procs)
	}
	mn, _ := fed.Migrations()
	for k, row := range mn {
		var sum float64
		for _, v := range row {
			sum += v
		}
		if sum < 0.999 || sum > 1.001 {
			t.Fatalf("migration row %d sums to %v", k, sum)
		}
	}
}

func TestFederationIsDeterministic(t *testing.T) {
	cfg := loadThreeSites(t)
	a, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two federated replays differ")
	}
}

// TestFederationOffIsAlone checks that without delegation every job runs at
// its own site, exactly as a single-site replay of that site would run it.
func TestFederationOffIsAlone(t *testing.T) {
	cfg := loadThreeSites(t)
	cfg.Federate = false
	cfg.Transfer = delegation.ACF
	fed, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k, s := range cfg.Sites {
		single := replay(t, s.Jobs, s.Procs, s.Policy)
		var got []Record
		for _, r := range fed.Records {
			if r.Origin == k {
				if r.Exec != k {
					t.Fatalf("job %d left site %s with federation off", r.ID, s.Name)
				}
				got = append(got, r.Record)
			}
		}
		for i := range got {
			if got[i].Start != single.Records[i].Start || got[i].End != single.Records[i].End {
				t.Fatalf("%s job %d: federated-off start %d, single-site %d", s.Name, got[i].ID, got[i].Start, single.Records[i].Start)
			}
		}
	}
}

// TestParseScenarioRejectsBadInput: every field is checked, and the
// message names the field and its line.
func TestParseScenarioRejectsBadInput(t *testing.T) {
	const two = "sites:\n  - name: a\n    trace: kth\n  - name: b\n    trace: kth\n"
	site := func(extra string) string {
		return "sites:\n  - name: a\n    trace: kth\n  - name: b\n    trace: kth\n" + extra
	}
	bad := []struct {
		name, doc, want string
	}{
		{"one site", "sites: [{name: a, trace: kth}]", "line 1: sites: a federation needs at least two sites"},
		{"unknown field", two + "bogus: 1", "field bogus not found"},
		{"no name", "sites:\n  - trace: kth\n  - name: b\n    trace: kth\n", "line 2: sites[0].name: required"},
		{"duplicate", "sites:\n  - name: a\n    trace: kth\n  - name: a\n    trace: kth\n", "line 4: sites[1].name: \"a\" repeated"},
		{"no trace", "sites:\n  - name: a\n  - name: b\n    trace: kth\n", "line 2: sites[0].trace: required"},
		{"bad policy", site("    policy: lifo\n"), "line 6: sites[1].policy"},
		{"bad transfer", "transfer: maybe\n" + two, "line 1: transfer: \"maybe\""},
		{"bad span", "span: forever\n" + two, "line 1: span"},
		{"negative span", "span: -5d\n" + two, "line 1: span: \"-5d\": want a positive duration"},
		{"negative procs", site("    procs: -1\n"), "line 6: sites[1].procs: must be >= 0"},
		{"infinite time_scale", site("    time_scale: .inf\n"), "line 6: sites[1].time_scale: must be a finite number > 0"},
		{"NaN jitter", "jitter: .nan\n" + two, "line 1: jitter: must be a finite number"},
		{"negative max_candidates", two + "max_candidates: -3\n", "line 6: max_candidates: must be >= 0"},
		{"negative max_hops", two + "max_hops: -1\n", "line 6: max_hops: must be 0 or 1"},
		{"max_hops without effect", two + "max_hops: 2\n", "line 6: max_hops: must be 0 or 1 (0 means 1), got 2: a site never offers on a job it received"},
		{"control character in a name", "sites:\n  - name: \"a\\tb\"\n    trace: kth\n  - name: b\n    trace: kth\n", "line 2: sites[0].name"},
		{"bad clock", "clock: wall\n" + two, "line 1: clock: \"wall\": want per-site or shared"},
		{"negative latency", "latency: -1\n" + two, "line 1: latency"},
		{"overbooking under easy", site("    overbooking:\n      enabled: true\n"), "line 7: sites[1].overbooking.enabled: needs policy conservative"},
		{"overbooking block without enabled", site("    policy: conservative\n    overbooking:\n      pof_max: 0.2\n"), "line 7: sites[1].overbooking: set, but overbooking is not enabled"},
		{"pof_max out of range", site("    policy: conservative\n    overbooking:\n      enabled: true\n      pof_max: 1.5\n"), "line 9: sites[1].overbooking.pof_max: must be in [0, 1]"},
		{"bad mode", site("    policy: conservative\n    overbooking:\n      enabled: true\n      mode: wild\n"), "line 9: sites[1].overbooking.mode"},
		{"security factor without the risk test", site("    policy: conservative\n    overbooking:\n      enabled: true\n      security_factor: 3\n"), "sites[1].overbooking.security_factor: has no effect"},
		{"age factor above 1", site("    policy: conservative\n    overbooking:\n      enabled: true\n      age_factor: 1.5\n"), "line 9: sites[1].overbooking.age_factor: must be in [0, 1]"},
		{"negative age period", site("    policy: conservative\n    overbooking:\n      enabled: true\n      age_every: -1\n"), "line 9: sites[1].overbooking.age_every: must be >= 0"},
		{"ageing forgets below min samples", site("    policy: conservative\n    overbooking:\n      enabled: true\n      age_factor: 0.5\n      age_every: 10\n"), "sites[1].overbooking.age_factor: with age_every 10 the statistics keep only 10.0 samples"},
		{"ageing without overbooking", site("    policy: conservative\n    overbooking:\n      age_factor: 0.95\n"), "sites[1].overbooking: set, but overbooking is not enabled"},
		{"standing instance longer than its period", site("    fixed:\n      - procs: 1\n        start: 0\n        end: 100\n        every: 50\n"), "line 10: sites[1].fixed[0].every: an instance of 100 s is longer than the period 50 s"},
		{"until on a one-off", site("    fixed:\n      - procs: 1\n        start: 0\n        end: 100\n        until: 500\n"), "line 10: sites[1].fixed[0].until: has no effect on a one-off"},
		{"negative period", site("    fixed:\n      - procs: 1\n        start: 0\n        end: 100\n        every: -5\n"), "sites[1].fixed[0].every: must be >= 0"},
		{"deadline factor below 1", site("    deadlines:\n      factor: 0.5\n"), "line 7: sites[1].deadlines.factor: must be a finite number >= 1"},
		{"penalty ratio without fees", site("    fees:\n      penalty_ratio: 2\n"), "line 7: sites[1].fees.penalty_ratio: has no effect"},
		{"fixed ends before it starts", site("    fixed:\n      - procs: 1\n        start: 10\n        end: 5\n"), "line 9: sites[1].fixed[0].end: must be after start"},
		{"prefer an unknown site", site("    prefer: [a, zz]\n"), "line 6: sites[1].prefer[1]: \"zz\" is not another site"},
		{"prefer itself", site("    prefer: [b]\n"), "sites[1].prefer[0]"},
		{"share without a workload", site("    share: 0.5\n"), "line 6: sites[1].share: has no effect without a workload"},
		{"workload and a site trace", "workload: {trace: kth, jobs: 10, span: 100, min_estimate: 1, max_estimate: 10, load: 1}\n" + site("    share: 1\n    procs: 4\n"), "sites[0].trace: a site names no trace"},
		{"workload without jobs", "workload: {trace: kth, span: 100, min_estimate: 1, max_estimate: 10, load: 1}\n" + two, "line 1: workload.jobs: must be > 0"},
		{"community share of 1", site("    community_share: 1\n"), "line 6: sites[1].community_share: must be in [0, 1)"},
		{"NaN failure rate", site("    failures:\n      failure_rate: .nan\n      repair_rate: 1\n"), "line 7: sites[1].failures.failure_rate: must be a finite number >= 0"},
		{"negative repair rate", site("    failures:\n      failure_rate: 0.1\n      repair_rate: -1\n"), "line 8: sites[1].failures.repair_rate: must be a finite number >= 0"},
		{"failures never repaired", site("    failures:\n      failure_rate: 0.1\n"), "line 6: sites[1].failures.repair_rate: required (> 0) with a failure_rate"},
		{"repairs without failures", site("    failures:\n      repair_rate: 0.5\n"), "line 7: sites[1].failures.repair_rate: has no effect without a failure_rate"},
		{"pricing without a model", site("    pricing: {beta: 0.1}\n"), "line 6: sites[1].pricing: pricing parameters"},
		{"libra+$ without a base price", site("    pricing: {model: libra+$, alpha: 1}\n"), "line 6: sites[1].pricing: libra+$ pricing"},
		{"unknown pricing model", site("    pricing: {model: auction}\n"), "line 6: sites[1].pricing: pricing model \"auction\""},
		{"pricing under rqf", "transfer: rqf\n" + site("    pricing: {model: libra+$, pbase: 1, alpha: 1}\n"), "sites[1].pricing: has no effect with transfer rqf"},
		{"failures in a pool", "transfer: p-easy\n" + site("    failures: {failure_rate: 0.1, repair_rate: 0.5}\n"), "line 7: sites[1].failures: has no effect with transfer p-easy"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(c.doc))
			if !errorsIs(err, ErrBadConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseScenario = %v, want ErrBadConfig saying %q", err, c.want)
			}
		})
	}
	if sc, err := ParseScenario([]byte(site("    pricing: {model: libra+$, pbase: 0.5, alpha: 1, beta: 0.1}\n"))); err != nil {
		t.Fatalf("a priced site is refused: %v", err)
	} else if cfg, err := sc.Build(); err != nil || cfg.Sites[1].Pricing != (delegation.LibraPlus{PBase: 0.5, Alpha: 1, Beta: 0.1}) || cfg.Sites[0].Pricing != (delegation.Free{}) {
		t.Fatalf("pricing built as %v, %v (%v)", cfg.Sites[0].Pricing, cfg.Sites[1].Pricing, err)
	}
	if _, err := ParseScenario([]byte(site("    policy: conservative\n    overbooking:\n      enabled: true\n      risk_test: risk\n      security_factor: 3\n    deadlines:\n      factor: 2\n    fees:\n      enabled: true\n      penalty_ratio: 2\n    prefer: [a]\n"))); err != nil {
		t.Fatalf("a valid SLA site is refused: %v", err)
	}
}

func FuzzParseScenario(f *testing.F) {
	f.Add([]byte("name: x\nsites: [{name: a, trace: kth}, {name: b, trace: hpc2n}]"))
	f.Add([]byte("span: 3d\ntransfer: on-reject\nsites: []"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseScenario(b) //nolint:errcheck // must only never panic
	})
}

// TestScenarioAgeingMirrorsTheNode: a scenario's overbooking ages the
// statistics as a node's config of the same names does: 0 means the node's
// defaults (0.9 every 100 learnt jobs), 1 never forgets. (The agent's side
// is site.TestAgentAgesStatisticsAsTheNode.)
func TestScenarioAgeingMirrorsTheNode(t *testing.T) {
	for _, c := range []struct {
		block  string
		factor float64
		every  int
	}{
		{"{enabled: true}", 0.9, 100},
		{"{enabled: true, age_factor: 0.95, age_every: 50}", 0.95, 50},
		{"{enabled: true, age_factor: 1}", 1, 100},
	} {
		sc, err := ParseScenario([]byte("sites:\n  - name: a\n    trace: kth\n    policy: conservative\n    overbooking: " + c.block + "\n  - name: b\n    trace: kth\n"))
		if err != nil {
			t.Fatal(err)
		}
		ob := sc.Sites[0].Overbooking.admission()
		if ob.AgeFactor != c.factor || ob.AgeEvery != c.every {
			t.Errorf("%s: agent ages by %v every %d, want %v every %d", c.block, ob.AgeFactor, ob.AgeEvery, c.factor, c.every)
		}
	}
}

// TestScenarioStandingReservation: a fixed reservation with every is a
// standing one, handed to the site agent as a rule (which keeps it as a
// node does: site.TestStandingAsLaidInAdvance); a one-off stays a fixed
// reservation.
func TestScenarioStandingReservation(t *testing.T) {
	sc, err := ParseScenario([]byte("span: 2d\nsites:\n  - name: a\n    trace: kth\n    fixed:\n      - {name: nightly, procs: 50, start: 3600, end: 10800, every: 86400, until: 864000}\n      - {name: once, procs: 10, start: 0, end: 600}\n  - name: b\n    trace: kth\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Sites[0]
	if len(a.Fixed) != 1 || a.Fixed[0].Name != "once" {
		t.Fatalf("fixed reservations %+v, want only the one-off", a.Fixed)
	}
	want := plan.Standing{Name: "nightly", Procs: 50, Start: 3600, Every: 86400, Length: 7200, Until: 864000}
	if len(a.Standing) != 1 || !reflect.DeepEqual(a.Standing[0], want) {
		t.Fatalf("standing reservations %+v, want %+v", a.Standing, want)
	}
	if _, err := RunFederation(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// TestBuildReportsTheFirstSiteThatFails: the traces are read two at a
// time, and the error is still the first failing site's in scenario
// order, whichever is read first; the sites that load are built in order.
func TestBuildReportsTheFirstSiteThatFails(t *testing.T) {
	doc := func(traces []string) []byte {
		var b strings.Builder
		b.WriteString("sites:\n")
		for i, tr := range traces {
			fmt.Fprintf(&b, "  - name: s%d\n    trace: %s\n", i, tr)
		}
		return []byte(b.String())
	}
	traces := make([]string, 12)
	for i := range traces {
		traces[i] = []string{"kth", "hpc2n", "sdsc"}[i%3]
	}
	bad := slices.Clone(traces)
	bad[5], bad[9] = "no-such-trace-5", "no-such-trace-9"
	sc, err := ParseScenario(doc(bad))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := sc.Build(); err == nil || !strings.Contains(err.Error(), "sites[5].trace") || !strings.Contains(err.Error(), "no-such-trace-5") {
			t.Fatalf("Build = %v, want the error of sites[5]", err)
		}
	}
	sc, err = ParseScenario(doc(traces))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range cfg.Sites {
		tr, err := LoadTrace(traces[i], swf.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != fmt.Sprintf("s%d", i) || int64(s.Procs) != tr.Header.Procs() {
			t.Fatalf("site %d: %s with %d procs, want s%d with the %d of %s", i, s.Name, s.Procs, i, tr.Header.Procs(), traces[i])
		}
	}
}
