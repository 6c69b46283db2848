package sim

import (
	"context"
	"reflect"
	"testing"

	"github.com/fedsched/fedsched/delegation"
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

func TestParseScenarioRejectsBadInput(t *testing.T) {
	bad := map[string]string{
		"one site":      "sites: [{name: a, trace: kth}]",
		"unknown field": "sites: [{name: a, trace: kth}, {name: b, trace: kth}]\nbogus: 1",
		"no name":       "sites: [{trace: kth}, {name: b, trace: kth}]",
		"duplicate":     "sites: [{name: a, trace: kth}, {name: a, trace: kth}]",
		"no trace":      "sites: [{name: a}, {name: b, trace: kth}]",
		"bad policy":    "sites: [{name: a, trace: kth, policy: lifo}, {name: b, trace: kth}]",
		"bad transfer":  "transfer: maybe\nsites: [{name: a, trace: kth}, {name: b, trace: kth}]",
		"bad span":      "span: forever\nsites: [{name: a, trace: kth}, {name: b, trace: kth}]",
		"negative":      "sites: [{name: a, trace: kth, procs: -1}, {name: b, trace: kth}]",
	}
	for name, doc := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseScenario([]byte(doc)); !errorsIs(err, ErrBadConfig) {
				t.Fatalf("ParseScenario = %v, want ErrBadConfig", err)
			}
		})
	}
}

func FuzzParseScenario(f *testing.F) {
	f.Add([]byte("name: x\nsites: [{name: a, trace: kth}, {name: b, trace: hpc2n}]"))
	f.Add([]byte("span: 3d\ntransfer: on-reject\nsites: []"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseScenario(b) //nolint:errcheck // must only never panic
	})
}
