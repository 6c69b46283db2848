package plan

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkDueIndex checks the due index against the queue it indexes: every
// job in the queue, and only those, is indexed by id, has a valid start in
// the heap and is movable exactly when its reservation starts after its
// release.
func checkDueIndex(t *testing.T, s *Site) {
	t.Helper()
	d := &s.due
	if !d.ok {
		return
	}
	live, dead := 0, 0
	for _, e := range s.waiting {
		if e.dead {
			dead++
			if d.byID[e.job.ID] == e {
				t.Fatalf("job %d left the queue but is indexed", e.job.ID)
			}
			continue
		}
		live++
		if d.byID[e.job.ID] != e {
			t.Fatalf("waiting job %d is not indexed", e.job.ID)
		}
		_, mov := d.movable[e]
		if want := e.place.Start > e.job.Release; mov != want {
			t.Fatalf("waiting job %d at %+v released %d: movable %v", e.job.ID, e.place, e.job.Release, mov)
		}
	}
	if live != len(d.byID) || dead != s.dead || live != s.Waiting() {
		t.Fatalf("queue of %d (%d dead, counted %d), index of %d, Waiting %d", live, dead, s.dead, len(d.byID), s.Waiting())
	}
	inHeap := make(map[*entry]bool)
	for _, r := range d.h {
		if d.valid(r) {
			inHeap[r.e] = true
		}
	}
	if len(inHeap) != live {
		t.Fatalf("%d valid starts in the heap for %d waiting jobs", len(inHeap), live)
	}
}

// TestDueIndexMatchesScan drives a conservative site through random
// submissions, early and on-time ends, cancellations and passes, and checks
// the indexed answers against scans of the queue: NextWake, Placement,
// Waiting, which jobs a pass starts and in what order.
func TestDueIndexMatchesScan(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s, err := NewSite(Config{Procs: 16, TrackMoves: true})
		if err != nil {
			t.Fatal(err)
		}
		var (
			now     int64
			nextID  int64
			running = map[int64]int64{} // id -> end it reports
		)
		for step := range 600 {
			switch k := rng.IntN(10); {
			case k < 5:
				nextID++
				j := Job{ID: nextID, Procs: 1 + rng.IntN(8), Estimate: 1 + rng.Int64N(30), Release: now + rng.Int64N(40) - 5, Deadline: Forever}
				s.Submit(now, j)
			case k < 6 && s.Waiting() > 0:
				ids := s.WaitingIDs(nil)
				id := ids[rng.IntN(len(ids))]
				if !s.Cancel(now, id) {
					t.Fatalf("seed %d step %d: cancel of waiting %d refused", seed, step, id)
				}
				if _, ok := s.Placement(id); ok {
					t.Fatalf("seed %d step %d: cancelled %d still placed", seed, step, id)
				}
			default:
				now += rng.Int64N(4)
			}
			for _, id := range slices.Sorted(maps.Keys(running)) {
				if running[id] <= now {
					s.End(now, id)
					delete(running, id)
				}
			}
			// The scan's answers before the pass.
			var due []int64
			wake := Forever
			for _, e := range s.waiting {
				if e.dead {
					continue
				}
				if e.place.Start <= now {
					due = append(due, e.job.ID)
				}
			}
			replans := s.dirty
			var started []int64
			for _, d := range s.Pass(now) {
				if d.Kind == DecideStart {
					started = append(started, d.JobID)
					// Half end early.
					end := d.End
					if rng.IntN(2) == 0 {
						end = d.Start + (d.End-d.Start)/2
					}
					running[d.JobID] = end
				}
			}
			s.Moved()
			if !replans && !slices.Equal(started, due) {
				t.Fatalf("seed %d step %d: pass started %v, the queue had %v due", seed, step, started, due)
			}
			for _, e := range s.waiting {
				if e.dead {
					continue
				}
				if e.place.Start > now {
					wake = min(wake, e.place.Start)
				}
				if pl, ok := s.Placement(e.job.ID); !ok || pl != e.place {
					t.Fatalf("seed %d step %d: Placement(%d) = %+v %v, queue says %+v", seed, step, e.job.ID, pl, ok, e.place)
				}
			}
			if got := s.NextWake(now); got != min(wake, s.nextHoldExpiry()) {
				t.Fatalf("seed %d step %d: NextWake %d, scan %d", seed, step, got, wake)
			}
			checkPlanConsistent(t, s)
		}
	}
}

// walkAll is FullEstimate under another type, so that re-planning walks the
// whole queue and re-places every job: the reference for the walk over the
// movable jobs alone.
type walkAll struct{ FullEstimate }

// TestReplanMovableMatchesFullWalk checks that re-planning only the jobs
// whose reservation starts after their release (the index's movable set)
// decides exactly what re-planning every waiting job decides: same starts,
// same moves, same placements, on queues where most jobs wait for their
// release (so that the short walk is taken) and jobs end early.
func TestReplanMovableMatchesFullWalk(t *testing.T) {
	short := 0
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 11))
		a, _ := NewSite(Config{Procs: 32, TrackMoves: true})
		b, _ := NewSite(Config{Procs: 32, TrackMoves: true, Admission: walkAll{}})
		var now, nextID int64
		running := map[int64]int64{}
		for step := range 400 {
			if rng.IntN(3) > 0 {
				nextID++
				rel := now + rng.Int64N(2000) // most wait for a release far ahead
				if rng.IntN(4) == 0 {
					rel = now
				}
				j := Job{ID: nextID, Procs: 1 + rng.IntN(16), Estimate: 1 + rng.Int64N(40), Release: rel, Deadline: Forever}
				if pa, pb := a.Submit(now, j), b.Submit(now, j); pa != pb {
					t.Fatalf("seed %d step %d: submit %+v / %+v", seed, step, pa, pb)
				}
			} else {
				now += 1 + rng.Int64N(6)
			}
			for _, id := range slices.Sorted(maps.Keys(running)) {
				if running[id] <= now {
					a.End(now, id)
					b.End(now, id)
					delete(running, id)
				}
			}
			if a.dirty && len(a.due.movable) < a.Waiting()/4 {
				short++
			}
			da, db := slices.Clone(a.Pass(now)), b.Pass(now)
			if !slices.Equal(da, db) {
				t.Fatalf("seed %d step %d: decisions %v / %v", seed, step, da, db)
			}
			if ma, mb := a.Moved(), b.Moved(); !slices.Equal(ma, mb) {
				t.Fatalf("seed %d step %d: moved %v / %v", seed, step, ma, mb)
			}
			for _, d := range da {
				if d.Kind == DecideStart {
					running[d.JobID] = d.Start + max(1, (d.End-d.Start)*rng.Int64N(4)/3)
				}
			}
			for _, id := range b.WaitingIDs(nil) {
				pa, _ := a.Placement(id)
				pb, _ := b.Placement(id)
				if pa != pb {
					t.Fatalf("seed %d step %d: job %d at %+v / %+v", seed, step, id, pa, pb)
				}
			}
			checkPlanConsistent(t, a)
		}
	}
	if short < 100 {
		t.Fatalf("only %d re-plans took the walk over the movable jobs", short)
	}
	t.Logf("%d re-plans over the movable jobs alone", short)
}
