package sim

import (
	"context"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// TestReportBeforeSubmission: in a second, a site takes the messages that
// have reached it (with latency 0, those its peers sent in that second)
// before that second's submissions, as a node does, whatever the transfer
// policy. The origin (busy until 1000) delegates job 1 at 1 to b (a is
// busy until 50); job 1 ends at b at 101, where the origin submits job 2,
// which both a and b, idle by then, would start at once. b's outcome
// report (response ratio 1) raises b above a, which the origin has no
// outcome of, in the location policy's ranking, which breaks the tie
// between their quotes: job 2 goes to b. Taking the submission before the
// report, the origin would see two peers without history and send it to a
// (the first by name).
func TestReportBeforeSubmission(t *testing.T) {
	for _, tc := range []struct {
		transfer delegation.TransferMode
		deadline int64 // the delegated jobs' (on-reject: the origin cannot meet it)
	}{
		{delegation.ACF, plan.Forever},
		{delegation.OnReject, 300},
	} {
		t.Run(tc.transfer.String(), func(t *testing.T) {
			job := func(id, submit, runtime int64, procs int, deadline int64) Job {
				return Job{ID: id, Submit: submit, Runtime: runtime, Estimate: runtime, Procs: procs, Deadline: deadline}
			}
			cfg := FedConfig{Federate: true, Transfer: tc.transfer, Location: delegation.LocationConfig{Jitter: -1}, Sites: []FedSite{
				{Name: "origin", Procs: 4, Policy: plan.Conservative, Jobs: []Job{
					job(1, 0, 1000, 4, plan.Forever), // keeps the origin busy
					job(2, 1, 100, 4, tc.deadline),   // to b: a is busy at 1
					job(3, 101, 100, 4, tc.deadline), // submitted as job 2 ends at b
				}},
				{Name: "a", Procs: 4, Policy: plan.Conservative, Jobs: []Job{job(1, 0, 50, 4, plan.Forever)}},
				{Name: "b", Procs: 4, Policy: plan.Conservative},
			}}
			res, err := RunFederation(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			exec := func(i int) string { return cfg.Sites[res.Records[i].Exec].Name }
			r1, r2 := &res.Records[1], &res.Records[2]
			if exec(1) != "b" || r1.Start != 1 || r1.End != 101 {
				t.Fatalf("job 2 ran at %s from %d to %d, want b from 1 to 101 (route %v)", exec(1), r1.Start, r1.End, r1.Route)
			}
			if exec(2) != "b" || r2.Start != 101 {
				t.Errorf("job 3 ran at %s from %d, want b from 101: the origin took it before b's report of job 2 (route %v)", exec(2), r2.Start, r2.Route)
			}
		})
	}
}
