package sim

import (
	"context"
	"testing"

	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// Two replays on one time-shared node, worked by hand.
func TestRunLibra(t *testing.T) {
	type want struct {
		end      int64 // 0: rejected
		violated bool
	}
	for _, c := range []struct {
		name     string
		strategy Strategy
		jobs     []Job
		want     []want
		gain     float64
		utility  float64
	}{
		{
			// A and B fill the node (shares 0.5 + 0.5) and run at half
			// speed; C at 10 s would need 100/150 more: rejected. B (50 s
			// of work) ends at 100; A then runs alone and ends at 150.
			name: "libra", strategy: Libra,
			jobs: []Job{
				{ID: 1, Submit: 0, Estimate: 100, Runtime: 100, Deadline: 200, Procs: 1, Fee: 1, Penalty: 1},
				{ID: 2, Submit: 0, Estimate: 100, Runtime: 50, Deadline: 200, Procs: 1, Fee: 1, Penalty: 1},
				{ID: 3, Submit: 10, Estimate: 100, Runtime: 100, Deadline: 160, Procs: 1, Fee: 1, Penalty: 1},
			},
			want: []want{{150, false}, {100, false}, {0, false}},
			gain: 2, utility: 2,
		},
		{
			// C has the highest (B/RE)/D and keeps its 0.5; A and B share
			// the other half (0.25 each): the node's return still rises
			// (9.5e-3 against 6e-4), so C is accepted. C ends at 100. Then
			// A (75 s left, 100 s to go: share 0.75, the highest return)
			// keeps its share and ends at 200, on time; B runs at 0.25,
			// then alone at full speed from 200 with 50 s left: it ends
			// at 250, 50 s late (U = 2 − 50·0.01).
			name: "libra-sla", strategy: LibraSLA,
			jobs: []Job{
				{ID: 1, Submit: 0, Estimate: 100, Runtime: 100, Deadline: 200, Procs: 1, Fee: 10, Penalty: 10},
				{ID: 2, Submit: 0, Estimate: 100, Runtime: 100, Deadline: 200, Procs: 1, Fee: 2, Penalty: 1},
				{ID: 3, Submit: 0, Estimate: 50, Runtime: 50, Deadline: 100, Procs: 1, Fee: 50, Penalty: 5},
			},
			want: []want{{200, false}, {250, true}, {100, false}},
			gain: 60 - 1, utility: 10 + 50 + 2 - 50*0.01,
		},
	} {
		cfg := SLAConfig{Procs: 1, Strategy: c.strategy}
		run, recs, err := RunSLA(context.Background(), c.jobs, cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i, w := range c.want {
			r := recs[i]
			if w.end == 0 {
				if r.Decision.OK() || r.Decision.Reason != plan.ReasonRejectedNoGap {
					t.Errorf("%s: job %d %v, want rejected (no gap)", c.name, r.ID, r.Decision.Reason)
				}
				continue
			}
			if !r.Started || r.Start != r.Submit || r.End != w.end || (r.End > r.Deadline) != w.violated {
				t.Errorf("%s: job %d started %v at %d, ended %d; want it to start at once and end at %d", c.name, r.ID, r.Started, r.Start, r.End, w.end)
			}
		}
		if run.Gain != c.gain || run.Utility == nil || !near(*run.Utility, c.utility) {
			t.Errorf("%s: gain %v utility %v, want %v %v", c.name, run.Gain, run.Utility, c.gain, c.utility)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestLibraRefusesPlanFeatures(t *testing.T) {
	cfg := SLAConfig{Procs: 1, Strategy: LibraRiskD, Standing: []plan.Standing{{Every: 10, Length: 1, Procs: 1}}}
	if _, _, err := RunSLA(context.Background(), nil, cfg, nil); !errorsIs(err, ErrBadConfig) {
		t.Fatalf("standing reservations under libra-riskd: %v, want ErrBadConfig", err)
	}
}

func TestPrepareRunUrgency(t *testing.T) {
	run := make([]Job, 400)
	for i := range run {
		run[i] = Job{ID: int64(i), Submit: int64(10 * i), Estimate: 100, Runtime: 50, Procs: 2}
	}
	m := overbook.LibraSLAUrgency()
	cfg := SLAConfig{Procs: 8, DeadlineFactor: 2, PenaltyRatio: 1, Urgency: &m, FailureSeed: 1}
	a, b := PrepareRun(run, cfg), PrepareRun(run, cfg)
	cfg.FailureSeed = 2
	c := PrepareRun(run, cfg)
	hard, differ := 0, false
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("job %d: two draws with one seed differ: %+v %+v", i, a[i], b[i])
		}
		differ = differ || a[i] != c[i]
		if a[i].Hard {
			hard++
		}
		if a[i].Deadline < a[i].Submit+a[i].Estimate || a[i].Fee <= 0 || a[i].Penalty <= 0 {
			t.Fatalf("job %d: terms %+v", i, a[i])
		}
	}
	// 20 % high urgency: 80 expected of 400.
	if hard < 50 || hard > 110 || !differ {
		t.Fatalf("%d HARD jobs of 400, seeds differ %v", hard, differ)
	}
	cfg.Urgency = nil
	for _, j := range PrepareRun(run, cfg) {
		if j.Hard || j.Deadline != j.Submit+200 {
			t.Fatalf("without urgency classes: %+v", j)
		}
	}
}
