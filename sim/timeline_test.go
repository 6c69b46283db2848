package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// timelineBySecond is the reference of Timeline: it looks at every second.
func timelineBySecond(recs []Record, from, to, width int64) []TimelineBin {
	var out []TimelineBin
	for s := from; s < to; s += width {
		b := TimelineBin{Start: s}
		end := min(s+width, to)
		for t := s; t < end; t++ {
			for _, r := range recs {
				if !r.Started {
					continue
				}
				if r.Start <= t && t < r.End {
					b.Busy += float64(r.Procs)
				}
				if r.Submit <= t && t < r.Start {
					b.Waiting++
				}
			}
		}
		b.Busy /= float64(end - s)
		b.Waiting /= float64(end - s)
		out = append(out, b)
	}
	return out
}

func TestTimeline(t *testing.T) {
	rec := func(submit, start, end int64, procs int) Record {
		return Record{Job: Job{Submit: submit, Procs: procs}, Started: true, Start: start, End: end}
	}
	tests := []struct {
		name            string
		recs            []Record
		from, to, width int64
		busy, waiting   []float64
	}{
		{"one job, one bin", []Record{rec(0, 5, 10, 4)}, 0, 10, 10, []float64{2}, []float64{0.5}},
		{"split over bins", []Record{rec(0, 5, 15, 2)}, 0, 20, 10, []float64{1, 1}, []float64{0.5, 0}},
		{"window cuts the job", []Record{rec(0, 0, 100, 3)}, 50, 60, 5, []float64{3, 3}, []float64{0, 0}},
		{"last bin shorter", []Record{rec(0, 0, 15, 1)}, 0, 15, 10, []float64{1, 1}, []float64{0, 0}},
		{"never started counts nowhere", []Record{{Job: Job{Submit: 0, Procs: 8}}}, 0, 10, 10, []float64{0}, []float64{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Timeline(tc.recs, tc.from, tc.to, tc.width)
			if len(got) != len(tc.busy) {
				t.Fatalf("%d bins, want %d", len(got), len(tc.busy))
			}
			for i, b := range got {
				if b.Busy != tc.busy[i] || b.Waiting != tc.waiting[i] {
					t.Errorf("bin %d: busy %v waiting %v, want %v %v", i, b.Busy, b.Waiting, tc.busy[i], tc.waiting[i])
				}
			}
		})
	}
	if Timeline(nil, 10, 10, 5) != nil || Timeline(nil, 0, 10, 0) != nil {
		t.Error("an empty window or a zero width gives bins")
	}
}

// TestTimelineMatchesReference compares Timeline with the second-by-second
// reference on a real replay, in windows that cut jobs at both ends.
func TestTimelineMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var jobs []Job
	for i := range 60 {
		est := int64(10 + rng.IntN(200))
		jobs = append(jobs, Job{ID: int64(i + 1), Submit: int64(i * 7), Procs: 1 + rng.IntN(8), Estimate: est, Runtime: 1 + rng.Int64N(est), Deadline: plan.Forever})
	}
	res, err := Run(t.Context(), jobs, Config{Site: plan.Config{Procs: 8, Policy: plan.Conservative}})
	if err != nil {
		t.Fatal(err)
	}
	first, last := ReplaySpan(res.Records)
	if first != 0 || last <= 413 {
		t.Fatalf("ReplaySpan = %d, %d", first, last)
	}
	for _, w := range [][3]int64{{0, last, 60}, {33, 401, 17}, {100, 101, 1}} {
		got, want := Timeline(res.Records, w[0], w[1], w[2]), timelineBySecond(res.Records, w[0], w[1], w[2])
		if len(got) != len(want) {
			t.Fatalf("window %v: %d bins, want %d", w, len(got), len(want))
		}
		for i := range got {
			if got[i].Start != want[i].Start || math.Abs(got[i].Busy-want[i].Busy) > 1e-9 || math.Abs(got[i].Waiting-want[i].Waiting) > 1e-9 {
				t.Errorf("window %v bin %d: %+v, want %+v", w, i, got[i], want[i])
			}
		}
	}
}
