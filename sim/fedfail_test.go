package sim

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// failingScenario: two KTH windows for five days, site a's processors
// failing at 0.01 per processor per hour (about 120 failures), b's never;
// a's jobs have deadlines, so a hit job may no longer fit its window.
const failingScenario = `span: 5d
sites:
  - name: a
    trace: kth
    policy: conservative
    deadlines: {factor: 2}
    failures: {failure_rate: 0.01, repair_rate: 0.5}
  - name: b
    trace: kth
    skip: 3000
    policy: conservative
`

func runFailing(t *testing.T, doc string, rep int, federate bool) (FedConfig, *FedResult) {
	t.Helper()
	sc, err := ParseScenario([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.BuildReplication(rep)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Federate = federate
	res, err := RunFederation(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, res
}

// TestScenarioFailures: a site's failure rates make its processors fail
// in the federated replay and alone: jobs are hit there (and only there),
// every hit one is marked, the replay stays deterministic for a seed, and
// each replication draws its own failures.
func TestScenarioFailures(t *testing.T) {
	cfg, fed := runFailing(t, failingScenario, 0, true)
	if cfg.Sites[0].Failures.Lambda != 0.01 || cfg.Sites[0].Failures.Mu != 0.5 || cfg.Sites[1].Failures.Lambda != 0 {
		t.Fatalf("failure models %+v, %+v", cfg.Sites[0].Failures, cfg.Sites[1].Failures)
	}
	a, b := fed.SLA(0), fed.SLA(1)
	t.Logf("federated: a %+v; b %+v", a, b)
	if a.Failed == 0 {
		t.Fatal("no job failed at the site whose processors fail")
	}
	if a.FailureViolations == 0 || a.FailureViolations > a.Failed {
		t.Fatalf("%d of %d failed jobs violated: want some, at most all", a.FailureViolations, a.Failed)
	}
	if b.Failed != 0 {
		t.Fatalf("%d jobs failed at the site whose processors never fail", b.Failed)
	}
	restarts := 0
	for _, r := range fed.Records {
		restarts += r.Restarts
		if r.Restarts > 0 && !r.NodeFailed {
			t.Fatalf("job %d restarted without a failure", r.ID)
		}
	}
	if restarts == 0 {
		t.Fatal("no hit job was placed again")
	}
	for k, s := range cfg.Sites {
		var recs []Record
		for _, r := range fed.Records {
			if r.Exec == k && r.Started {
				recs = append(recs, r.Record)
			}
		}
		checkSchedule(t, &Result{Records: recs}, s.Procs)
	}
	_, alone := runFailing(t, failingScenario, 0, false)
	if alone.SLA(0).Failed == 0 || alone.SLA(1).Failed != 0 {
		t.Fatalf("alone: a failed %d, b %d", alone.SLA(0).Failed, alone.SLA(1).Failed)
	}
	_, again := runFailing(t, failingScenario, 0, true)
	if !reflect.DeepEqual(fed.Records, again.Records) {
		t.Fatal("two replays of one seed differ")
	}
	_, other := runFailing(t, failingScenario, 1, true)
	if reflect.DeepEqual(fed.Records, other.Records) {
		t.Fatal("replication 1 draws the same failures as replication 0")
	}
	// Without the rates, nothing fails.
	_, none := runFailing(t, strings.Replace(failingScenario, "    failures: {failure_rate: 0.01, repair_rate: 0.5}\n", "", 1), 0, true)
	if none.SLA(0).Failed != 0 {
		t.Fatalf("%d jobs failed without failure rates", none.SLA(0).Failed)
	}
}
