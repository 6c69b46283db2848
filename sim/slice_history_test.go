package sim

import (
	"strings"
	"testing"
)

// TestTraceSliceHistory: the history is the n jobs right before the slice,
// scaled as the slice, submitted before it, ordered by end in PastJobs.
func TestTraceSliceHistory(t *testing.T) {
	ts := TraceSlice{Trace: "kth", Skip: 300, Jobs: 100, Span: 2000, MinEstimate: 60, MaxEstimate: 600, Load: 1, Seed: 1,
		Sites: []SliceSite{{Name: "a", Procs: 32, Share: 1}, {Name: "b", Procs: 16, Share: 1}}}
	jobs, info, err := ts.Build()
	if err != nil {
		t.Fatal(err)
	}
	past, err := ts.History(200, info)
	if err != nil {
		t.Fatal(err)
	}
	if len(past) != 200 {
		t.Fatalf("%d history jobs, want 200", len(past))
	}
	if last := past[len(past)-1]; last.TraceID >= jobs[0].TraceID || last.At > 0 {
		t.Errorf("last history job %d at %d: want before the slice's first, %d at 0", last.TraceID, last.At, jobs[0].TraceID)
	}
	for _, j := range past {
		if j.Estimate < ts.MinEstimate || j.Estimate > ts.MaxEstimate || j.Runtime < 1 || j.Runtime > j.Estimate {
			t.Fatalf("job %d not scaled as the slice: estimate %d, runtime %d", j.TraceID, j.Estimate, j.Runtime)
		}
	}
	if all, _ := ts.History(1000, info); len(all) != 300 {
		t.Errorf("history of 1000 before a slice that skips 300: %d jobs, want 300", len(all))
	}
	pj := PastJobs(past)
	for i := 1; i < len(pj); i++ {
		if pj[i].Job.ID == pj[i-1].Job.ID {
			t.Fatal("a job twice")
		}
	}
	ends := map[int64]int64{}
	for _, j := range past {
		ends[j.TraceID] = j.At + j.Runtime
	}
	for i := 1; i < len(pj); i++ {
		if ends[pj[i].Job.ID] < ends[pj[i-1].Job.ID] {
			t.Fatalf("PastJobs not in the order the jobs ended at %d", i)
		}
	}
}

func TestScenarioWorkloadHistoryChecked(t *testing.T) {
	doc := `
name: h
workload: {trace: kth, skip: 10, history: 20, jobs: 50, span: 1000, min_estimate: 60, max_estimate: 600, load: 1}
sites:
  - {name: a, procs: 8, share: 1, policy: conservative}
  - {name: b, procs: 8, share: 1, policy: conservative}
`
	if _, err := ParseScenario([]byte(doc)); err == nil || !strings.Contains(err.Error(), "history") {
		t.Errorf("history beyond skip: %v", err)
	}
}
