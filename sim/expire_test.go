package sim

import (
	"context"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// TestStaleHeadDoesNotBlockReplay: with hard deadlines under FCFS and EASY,
// a job whose window closes while it waits expires (violated) and the jobs
// behind it run; a job ending exactly at its estimate is not killed.
func TestStaleHeadDoesNotBlockReplay(t *testing.T) {
	for _, pol := range []plan.Policy{plan.FCFS, plan.EASY} {
		t.Run(pol.String(), func(t *testing.T) {
			jobs := []Job{
				{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 8, Deadline: plan.Forever},
				{ID: 2, Submit: 0, Runtime: 50, Estimate: 100, Procs: 8, Deadline: 150, Fee: 1, Penalty: 1},
				{ID: 3, Submit: 0, Runtime: 10, Estimate: 10, Procs: 8, Deadline: plan.Forever},
			}
			res, err := Run(context.Background(), jobs, Config{Site: plan.Config{Procs: 8, Policy: pol}})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Records
			if r[0].Killed || !r[0].Started || r[0].End != 100 {
				t.Errorf("job 1 ending at its estimate: %+v", r[0])
			}
			if r[1].Started || !r[1].Expired {
				t.Errorf("stale job 2: %+v, want expired", r[1])
			}
			if !r[2].Started || r[2].Start != 100 {
				t.Errorf("job 3 behind it: %+v, want started at 100", r[2])
			}
			if s := Settle(r, 8); s.Violated != 1 {
				t.Errorf("settled %+v, want job 2 violated", s)
			}
		})
	}
}
