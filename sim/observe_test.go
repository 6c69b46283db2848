package sim

import (
	"context"
	"testing"

	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// TestObservedHidesCutRuntime: what a replay's statistics learn from a job
// is what a live site could learn. A job cut at its reservation's end short
// of its estimate is censored at the time it ran, whatever the trace says
// it would have needed; one cut after its full estimate is in the top bin;
// one that ended by itself is its runtime.
func TestObservedHidesCutRuntime(t *testing.T) {
	cut := func(runtime int64) *Record {
		return &Record{Job: Job{Runtime: runtime, Estimate: 1000}, Started: true, Start: 50, End: 350, Killed: true}
	}
	for _, tc := range []struct {
		name string
		r    *Record
		want overbook.Observation
	}{
		{"cut, needed a little more", cut(400), overbook.Observation{Ran: 300, Censored: true}},
		{"cut, needed far more", cut(90_000), overbook.Observation{Ran: 300, Censored: true}},
		{"cut after its estimate", &Record{Job: Job{Runtime: 5000, Estimate: 1000}, Started: true, Start: 0, End: 1000, Killed: true}, overbook.Observation{Ran: 1000}},
		{"ended by itself", &Record{Job: Job{Runtime: 420, Estimate: 1000}, Started: true, Start: 0, End: 420}, overbook.Observation{Ran: 420}},
	} {
		if got := Observed(tc.r); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestReplayLearnsCutJobsCensored replays an overbooked job that needs its
// whole estimate and is cut: with online learning the statistics get a
// censored sample at the cut (bin 40), not the job's trace runtime (bin
// 100), which the replay knows and a live site does not.
func TestReplayLearnsCutJobsCensored(t *testing.T) {
	cfg := DefaultSLAConfig(2)
	cfg.Stats, cfg.Learn = overbook.StatsConfig{Classifier: overbook.General}, true
	var history []Job
	for i := range 120 {
		history = append(history, Job{ID: int64(i + 1), Runtime: 100, Estimate: 1000, Procs: 1})
	}
	trained, err := Train(history, cfg.Stats)
	if err != nil {
		t.Fatal(err)
	}
	sc, obs, err := siteConfig(cfg, trained, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One processor is busy until 400, then both are for 5,000 s: the
	// SLA job (1,000 s due by 2,000) fits only overbooked, into [0, 400).
	jobs := []Job{
		{ID: 1, Runtime: 399, Estimate: 400, Procs: 1, Deadline: plan.Forever},
		{ID: 2, Runtime: 4999, Estimate: 5000, Procs: 2, Deadline: plan.Forever},
		{ID: 3, Runtime: 1000, Estimate: 1000, Procs: 1, Deadline: 2000, Fee: 1, Penalty: 1},
	}
	res, err := Run(context.Background(), jobs, Config{Site: sc, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Records[2]; r.Decision.Reason != plan.ReasonOverbooked || !r.Killed || r.Ran() != 400 {
		t.Fatalf("SLA job: %+v", r)
	}
	h := obs.(finisher).adm.Stats.(*overbook.Stats).Histogram(overbook.JobInfo{Procs: 1, Estimate: 1000})
	if h.CensoredWeight(40) != 1 || h.Weight(100) != 0 {
		t.Fatalf("the cut job was learnt as censored %v at 40 %%, %v in bin 100; want 1 and 0", h.CensoredWeight(40), h.Weight(100))
	}
}
