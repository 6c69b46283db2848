package plan

import (
	"math/rand/v2"
	"testing"
)

// TestStaleHeadExpires: a job at the head of the queue whose deadline can
// no longer be met ends (DecideExpire) and the queue moves on, under every
// policy with hard deadlines.
func TestStaleHeadExpires(t *testing.T) {
	for _, pol := range []Policy{FCFS, EASY, LIST} {
		t.Run(pol.String(), func(t *testing.T) {
			s, err := NewSite(Config{Procs: 8, Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			// 1 holds every processor until 100; 2 (the head after it)
			// must start by 50 to meet its deadline; 3 waits behind it.
			s.Submit(0, Job{ID: 1, Procs: 8, Estimate: 100, Deadline: Forever})
			s.Submit(0, Job{ID: 2, Procs: 8, Estimate: 100, Deadline: 150})
			s.Submit(0, Job{ID: 3, Procs: 8, Estimate: 10, Deadline: Forever})
			if d := s.Pass(0); len(d) != 1 || d[0].JobID != 1 {
				t.Fatalf("Pass(0) = %v, want job 1 started", d)
			}
			if w := s.NextWake(0); w != 51 {
				t.Errorf("NextWake(0) = %d, want 51 (job 2's window closes)", w)
			}
			if d := s.Pass(51); len(d) != 1 || d[0] != (Decision{Kind: DecideExpire, JobID: 2}) {
				t.Fatalf("Pass(51) = %v, want job 2 expired", d)
			}
			s.End(100, 1)
			if d := s.Pass(100); len(d) != 1 || d[0].Kind != DecideStart || d[0].JobID != 3 {
				t.Fatalf("Pass(100) = %v, want job 3 started", d)
			}
			if s.Waiting() != 0 {
				t.Errorf("%d jobs still waiting", s.Waiting())
			}
		})
	}
}

// TestStaleHeadOnIdleSite is the reported livelock: every processor free,
// the head's window already closed when the first pass looks at it.
func TestStaleHeadOnIdleSite(t *testing.T) {
	for _, pol := range []Policy{FCFS, EASY, LIST} {
		t.Run(pol.String(), func(t *testing.T) {
			s, _ := NewSite(Config{Procs: 8, Policy: pol})
			s.Submit(0, Job{ID: 1, Procs: 8, Estimate: 100, Deadline: 150})
			s.Submit(0, Job{ID: 2, Procs: 4, Estimate: 100, Deadline: Forever})
			// The driver was late: the first pass comes at 60.
			d := s.Pass(60)
			if len(d) != 2 || d[0] != (Decision{Kind: DecideExpire, JobID: 1}) || d[1].Kind != DecideStart || d[1].JobID != 2 {
				t.Fatalf("Pass(60) = %v, want job 1 expired and job 2 started", d)
			}
		})
	}
}

// TestReleaseWakes: a job released in the future on an idle site starts at
// its release, woken by NextWake alone.
func TestReleaseWakes(t *testing.T) {
	for _, pol := range []Policy{Conservative, EASY, FCFS, LIST, EDF, LTTR} {
		t.Run(pol.String(), func(t *testing.T) {
			s, _ := NewSite(Config{Procs: 8, Policy: pol})
			if pl := s.Submit(0, Job{ID: 1, Procs: 2, Estimate: 50, Release: 100, Deadline: Forever}); !pl.OK() {
				t.Fatalf("Submit = %v", pl)
			}
			if d := s.Pass(0); len(d) != 0 {
				t.Fatalf("Pass(0) = %v, want nothing before the release", d)
			}
			w := s.NextWake(0)
			if w != 100 {
				t.Fatalf("NextWake(0) = %d, want 100", w)
			}
			if d := s.Pass(w); len(d) != 1 || d[0].Kind != DecideStart || d[0].Start != 100 {
				t.Fatalf("Pass(100) = %v, want job 1 started at 100", d)
			}
		})
	}
}

// TestEASYHeadReservationRespectsRelease: EASY protects a head that is not
// yet released at its release, not before it (where nobody could use it).
func TestEASYHeadReservationRespectsRelease(t *testing.T) {
	s, _ := NewSite(Config{Procs: 8, Policy: EASY})
	s.Submit(0, Job{ID: 1, Procs: 8, Estimate: 100, Release: 50, Deadline: Forever})
	// Job 2 would run into job 1's release: it must not start.
	s.Submit(0, Job{ID: 2, Procs: 8, Estimate: 60, Deadline: Forever})
	// Job 3 ends before it: it may.
	s.Submit(0, Job{ID: 3, Procs: 8, Estimate: 40, Deadline: Forever})
	d := s.Pass(0)
	if len(d) != 1 || d[0].JobID != 3 {
		t.Fatalf("Pass(0) = %v, want only job 3 started", d)
	}
}

// TestQueueLiveness is a property test: under every queue policy, a driver
// that wakes only at submissions, job ends and NextWake leaves no job
// waiting once the work is done; every job either ran inside its window
// (hard policies) or expired only after its window had closed.
func TestQueueLiveness(t *testing.T) {
	for _, pol := range []Policy{FCFS, EASY, LIST, EDF, LTTR} {
		t.Run(pol.String(), func(t *testing.T) {
			for seed := range uint64(200) {
				checkLiveness(t, pol, seed)
			}
		})
	}
}

func checkLiveness(t *testing.T, pol Policy, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	const procs = 8
	s, err := NewSite(Config{Procs: procs, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	n := 5 + rng.IntN(30)
	jobs := make([]Job, n)
	runtime := make(map[int64]int64, n)
	sub := int64(0)
	for i := range jobs {
		sub += rng.Int64N(40)
		est := 1 + rng.Int64N(100)
		j := Job{ID: int64(i + 1), Procs: 1 + rng.IntN(procs), Estimate: est, Release: sub, Deadline: Forever}
		if rng.IntN(3) == 0 {
			j.Release += rng.Int64N(200)
		}
		if rng.IntN(2) == 0 {
			j.Deadline = j.Release + est + rng.Int64N(150)
		}
		jobs[i] = j
		runtime[j.ID] = 1 + rng.Int64N(est)
	}
	subAt := make([]int64, n)
	for i := range jobs {
		subAt[i] = jobs[max(i-1, 0)].Release
		if i == 0 {
			subAt[i] = 0
		}
		subAt[i] = min(subAt[i], jobs[i].Release)
	}
	ends := map[int64]int64{} // running job -> end
	accepted := map[int64]bool{}
	done := map[int64]bool{}
	next, wake := 0, Forever
	for steps := 0; ; steps++ {
		if steps > 100000 {
			t.Fatalf("seed %d: no progress", seed)
		}
		now := wake
		if next < n {
			now = min(now, subAt[next])
		}
		for _, e := range ends {
			now = min(now, e)
		}
		if now == Forever {
			break
		}
		for id, e := range ends {
			if e == now {
				delete(ends, id)
				s.End(now, id)
				done[id] = true
			}
		}
		for next < n && subAt[next] == now {
			if s.Submit(now, jobs[next]).OK() {
				accepted[jobs[next].ID] = true
			}
			next++
		}
		for _, d := range s.Pass(now) {
			j := jobs[d.JobID-1]
			switch d.Kind {
			case DecideStart:
				if d.Start != now || now < j.Release {
					t.Fatalf("seed %d: job %d started at %d (decision %v), release %d", seed, j.ID, now, d, j.Release)
				}
				if pol.hardQueue() && now+j.Estimate > j.Deadline {
					t.Fatalf("seed %d: job %d started at %d cannot meet deadline %d", seed, j.ID, now, j.Deadline)
				}
				ends[j.ID] = now + runtime[j.ID]
			case DecideExpire:
				if !pol.hardQueue() || !closed(&j, now) {
					t.Fatalf("seed %d: job %d expired at %d with its window open", seed, j.ID, now)
				}
				done[j.ID] = true
			}
		}
		if got, want := s.queueWake(now), queueWakeScan(s, now); got != want {
			t.Fatalf("seed %d: queueWake(%d) = %d, a scan of the queue gives %d", seed, now, got, want)
		}
		wake = s.NextWake(now)
		if wake <= now {
			t.Fatalf("seed %d: NextWake(%d) = %d", seed, now, wake)
		}
	}
	if s.Waiting() != 0 || s.Running() != 0 {
		t.Fatalf("seed %d: %d waiting, %d running when nothing more happens", seed, s.Waiting(), s.Running())
	}
	for id := range accepted {
		if !done[id] {
			t.Fatalf("seed %d: accepted job %d never ended", seed, id)
		}
	}
}

// queueWakeScan is queueWake without its shortcut (quietFrom): a scan of
// every waiting job.
func queueWakeScan(s *Site, now int64) int64 {
	t := Forever
	for _, e := range s.waiting {
		if r := e.job.Release; r > now {
			t = min(t, r)
		}
		if ls := latestStart(&e.job); s.cfg.Policy.hardQueue() && ls < Forever && ls+1 > now {
			t = min(t, ls+1)
		}
	}
	return t
}
