package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestNodeDown(t *testing.T) {
	s, _ := NewSite(Config{Procs: 4})
	job := func(id int64, procs int, est, dl int64) Job {
		return Job{ID: id, Procs: procs, Estimate: est, Deadline: dl}
	}
	s.Submit(0, job(1, 2, 100, Forever)) // running on processors 0-1
	s.Submit(0, job(2, 2, 100, Forever)) // running on processors 2-3
	s.Submit(0, job(3, 4, 50, 200))      // waiting: [100, 150), deadline 200
	s.Pass(0)
	// Processor 3 fails: job 2 (the second in submission order) is hit,
	// and job 3 needs all four processors: with one down until a repair
	// nobody can promise, its reservation is lost.
	hit, lost := s.NodeDown(10, 3)
	if hit != 2 || !slices.Equal(lost, []int64{3}) {
		t.Fatalf("hit %d lost %v", hit, lost)
	}
	if s.Down() != 1 || s.Plan().Free(10) != 1 {
		t.Fatalf("down %d, free %d", s.Down(), s.Plan().Free(10))
	}
	checkInvariants(t, s.Plan())
	// A second failure takes the idle processor: nobody is hit.
	if hit, lost = s.NodeDown(20, 2); hit != 0 || len(lost) != 0 {
		t.Fatalf("second failure: hit %d lost %v", hit, lost)
	}
	checkInvariants(t, s.Plan())
	// Repairs give the processors back.
	if !s.NodeUp(30) || !s.NodeUp(30) || s.NodeUp(30) || s.Down() != 0 {
		t.Fatalf("repairs: down %d", s.Down())
	}
	s.Pass(30)
	if got := s.Plan().Free(30); got != 2 {
		t.Fatalf("free after repairs %d, want 2 (job 1 still runs)", got)
	}
}

// TestFailuresKeepPlanConsistent runs random submissions, ends, failures
// and repairs and checks after every step that no time has more processors
// reserved than exist (the failed ones count as reserved) and every
// reservation lies in its window.
func TestFailuresKeepPlanConsistent(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		s, _ := NewSite(Config{Procs: 8})
		var now int64
		var running []int64
		// pass kills jobs at the end of their reservations and runs a pass,
		// as a driver does at every event and wake-up.
		pass := func(at int64) {
			running = slices.DeleteFunc(running, func(id int64) bool {
				if pl, ok := s.Placement(id); ok && pl.End <= at {
					s.End(at, id)
					return true
				}
				return false
			})
			for _, d := range s.Pass(at) {
				if d.Kind == DecideStart {
					running = append(running, d.JobID)
				}
			}
		}
		for step := 0; step < 300; step++ {
			next := now + rng.Int64N(20)
			for {
				w := s.NextWake(now)
				for _, id := range running {
					if pl, ok := s.Placement(id); ok {
						w = min(w, pl.End)
					}
				}
				if w > next {
					break
				}
				now = w
				pass(now)
			}
			now = next
			switch rng.IntN(5) {
			case 0, 1:
				est := 1 + rng.Int64N(100)
				dl := Forever
				if rng.IntN(2) == 0 {
					dl = now + est + rng.Int64N(300)
				}
				s.Submit(now, Job{ID: int64(step + 1), Procs: 1 + rng.IntN(8), Estimate: est, Deadline: dl})
			case 2:
				if len(running) > 0 {
					k := rng.IntN(len(running))
					s.End(now, running[k])
					running = slices.Delete(running, k, k+1)
				}
			case 3:
				if s.Down() < 8 {
					hit, _ := s.NodeDown(now, rng.IntN(8-s.Down()))
					if i := slices.Index(running, hit); i >= 0 {
						running = slices.Delete(running, i, i+1)
					}
				}
			case 4:
				s.NodeUp(now)
			}
			pass(now)
			checkInvariants(t, s.Plan())
			if busy := s.Busy(); busy+s.Down() > 8 {
				t.Fatalf("seed %d step %d: %d busy + %d down > 8", seed, step, busy, s.Down())
			}
		}
	}
}
