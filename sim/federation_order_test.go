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
// policy. The origin (busy until 1000) delegates job 2 at 1 to b (a is
// busy until 50); job 2 ends at b at 101, where the origin submits job 3,
// which both a and b, idle by then, would start at once. b's outcome
// report (response ratio 1) raises b above a, which the origin has no
// outcome of, in the location policy's ranking, which breaks the tie
// between their quotes: job 3 goes to b. Taking the submission before the
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

// TestSecondsSubmissionsOneAtATime: the jobs submitted in one second go in
// one at a time, each settled (its quotes, agreement, releases) before the
// next, as the stepped live replay submits them. The origin (busy until
// 1000) offers job 2 at 10 to p, where job 3 is submitted in the same
// second, after it: p takes job 2 and starts it at once, and job 3 waits
// for it. Submitting both before the quote request reaches p, p would
// start its own job 3 and refuse job 2.
func TestSecondsSubmissionsOneAtATime(t *testing.T) {
	for _, tc := range []struct {
		transfer delegation.TransferMode
		deadline int64 // job 2's (on-reject: the origin cannot meet it)
	}{
		{delegation.ACF, plan.Forever},
		{delegation.OnReject, 150},
	} {
		t.Run(tc.transfer.String(), func(t *testing.T) {
			job := func(id, submit, runtime int64, deadline int64) Job {
				return Job{ID: id, Submit: submit, Runtime: runtime, Estimate: runtime, Procs: 4, Deadline: deadline}
			}
			cfg := FedConfig{Federate: true, Transfer: tc.transfer, Location: delegation.LocationConfig{Jitter: -1}, Sites: []FedSite{
				{Name: "origin", Procs: 4, Policy: plan.Conservative, Jobs: []Job{
					job(1, 0, 1000, plan.Forever), // keeps the origin busy
					job(2, 10, 100, tc.deadline),
				}},
				{Name: "p", Procs: 4, Policy: plan.Conservative, Jobs: []Job{job(1, 10, 100, plan.Forever)}},
			}}
			res, err := RunFederation(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			r2, r3 := &res.Records[1], &res.Records[2]
			if cfg.Sites[r2.Exec].Name != "p" || r2.Start != 10 {
				t.Errorf("job 2 ran at %s from %d, want p from 10: p took its own job 3 first (route %v)", cfg.Sites[r2.Exec].Name, r2.Start, r2.Route)
			}
			if cfg.Sites[r3.Exec].Name != "p" || r3.Start != 110 {
				t.Errorf("job 3 ran at %s from %d, want p from 110, after job 2", cfg.Sites[r3.Exec].Name, r3.Start)
			}
		})
	}
}
