package sim

import (
	"context"
	"errors"
	"testing"
)

// TestRunShakingStartingPhase: a job its site cannot start now goes to the
// first other site that can.
func TestRunShakingStartingPhase(t *testing.T) {
	sites := []FedSite{
		{Name: "a", Procs: 4, Jobs: []Job{
			{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 4},
			{ID: 2, Submit: 1, Runtime: 10, Estimate: 10, Procs: 2},
		}},
		{Name: "b", Procs: 2},
		{Name: "c", Procs: 4},
	}
	res, err := RunShaking(context.Background(), sites, ShakingConfig{Depth: 2})
	if err != nil {
		t.Fatal(err)
	}
	// b comes first in site order and can start it.
	checkRuns(t, res, []wantRun{{0, 0}, {1, 1}})
}

// TestRunShakingDirect: the job queued ahead of a new one moves to a site
// whose virtual schedule completes it earlier.
func TestRunShakingDirect(t *testing.T) {
	sites := []FedSite{
		{Name: "a", Procs: 4, Jobs: []Job{
			{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 4}, // R
			{ID: 2, Submit: 1, Runtime: 10, Estimate: 10, Procs: 2},   // x
			{ID: 3, Submit: 2, Runtime: 10, Estimate: 10, Procs: 2},   // j
		}},
		{Name: "b", Procs: 4, Jobs: []Job{
			{ID: 10, Submit: 0, Runtime: 50, Estimate: 50, Procs: 3}, // S
		}},
	}
	res, err := RunShaking(context.Background(), sites, ShakingConfig{Depth: 2})
	if err != nil {
		t.Fatal(err)
	}
	// x cannot start at a (R) or at b (1 free): it queues at a. j queues
	// behind it; shaking asks b for x's ECT: 50 + 10 = 60, against 110 at
	// a: x moves to b and starts when S ends. j stays and starts at 100.
	checkRuns(t, res, []wantRun{{0, 0}, {50, 1}, {100, 0}, {0, 1}})
	if r := res.Records[1].Route; len(r) != 2 || r[1].Site != "b" || r[1].Reason != "shaking-g: smaller expected completion" {
		t.Errorf("x route %v, want a then b, moved directly (no shaking needed)", r)
	}
}

// TestRunShakingRecursive: when no site beats a job's ECT directly, a
// candidate is shaken: its own queued job moves on to a third site, which
// makes room for the job.
func TestRunShakingRecursive(t *testing.T) {
	sites := []FedSite{
		{Name: "a", Procs: 4, Jobs: []Job{
			{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 4}, // R
			{ID: 2, Submit: 2, Runtime: 10, Estimate: 10, Procs: 4},   // x
			{ID: 3, Submit: 3, Runtime: 5, Estimate: 5, Procs: 4},     // j
		}},
		{Name: "b", Procs: 4, Jobs: []Job{
			{ID: 10, Submit: 0, Runtime: 50, Estimate: 50, Procs: 3},   // S
			{ID: 11, Submit: 1, Runtime: 200, Estimate: 200, Procs: 2}, // y
		}},
		{Name: "c", Procs: 2, Jobs: []Job{
			{ID: 20, Submit: 0, Runtime: 20, Estimate: 20, Procs: 2}, // T
		}},
	}
	res, err := RunShaking(context.Background(), sites, ShakingConfig{Depth: 2})
	if err != nil {
		t.Fatal(err)
	}
	// j queues behind x at a. x's ECT: 110 at a; at b, behind y (which
	// starts at 50 and holds 2 of 4 until 250), 260; c is too small. No
	// direct move. Shaking b: y's ECT at b is 250, at c (after T) 220: y
	// moves to c; then x at b completes at 60 < 110: x moves to b.
	checkRuns(t, res, []wantRun{{0, 0}, {50, 1}, {100, 0}, {0, 1}, {20, 2}, {0, 2}})
	if r := res.Records[4].Route; len(r) != 2 || r[1].Site != "c" {
		t.Errorf("y route %v, want b then c", r)
	}
}

// TestRunShakingDepth: depth 1 makes the direct move but not the recursive
// plan; depth 0 neither; a depth beyond 2 is refused.
func TestRunShakingDepth(t *testing.T) {
	recursive := []FedSite{
		{Name: "a", Procs: 4, Jobs: []Job{
			{ID: 1, Submit: 0, Runtime: 100, Estimate: 100, Procs: 4},
			{ID: 2, Submit: 2, Runtime: 10, Estimate: 10, Procs: 4},
			{ID: 3, Submit: 3, Runtime: 5, Estimate: 5, Procs: 4},
		}},
		{Name: "b", Procs: 4, Jobs: []Job{
			{ID: 10, Submit: 0, Runtime: 50, Estimate: 50, Procs: 3},
			{ID: 11, Submit: 1, Runtime: 200, Estimate: 200, Procs: 2},
		}},
		{Name: "c", Procs: 2, Jobs: []Job{
			{ID: 20, Submit: 0, Runtime: 20, Estimate: 20, Procs: 2},
		}},
	}
	for _, d := range []int{0, 1} {
		res, err := RunShaking(context.Background(), recursive, ShakingConfig{Depth: d})
		if err != nil {
			t.Fatal(err)
		}
		// Nothing moves: x and j run at a in turn, y at b after S.
		checkRuns(t, res, []wantRun{{0, 0}, {100, 0}, {110, 0}, {0, 1}, {50, 1}, {0, 2}})
	}
	if _, err := RunShaking(context.Background(), recursive, ShakingConfig{Depth: 3}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("depth 3: err %v, want ErrBadConfig", err)
	}
}
