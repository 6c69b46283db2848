package plan

import (
	"math/rand/v2"
	"testing"
)

// TestCanStartNowIsThePolicysPass checks ACF's test against its definition:
// j starts now exactly when a pass run right after submitting it starts it.
func TestCanStartNowIsThePolicysPass(t *testing.T) {
	job := func(id int64, procs int, est int64) Job {
		return Job{ID: id, Procs: procs, Estimate: est, Deadline: Forever}
	}
	cases := []struct {
		name    string
		pol     Policy
		running []Job // started at 0
		queued  []Job // submitted at 0 after the running ones started, not yet passed
		j       Job
		want    bool
	}{
		{"empty site", EASY, nil, nil, job(9, 4, 10), true},
		{"too wide for what is free", EASY, []Job{job(1, 3, 100)}, nil, job(9, 2, 10), false},
		// The queue-not-empty reading said false here: EASY backfills j
		// past the waiting head, which cannot start before 100.
		{"backfilled past a waiting head", EASY, []Job{job(1, 3, 100)}, []Job{job(2, 4, 10)}, job(9, 1, 50), true},
		{"would delay the head", EASY, []Job{job(1, 3, 100)}, []Job{job(2, 4, 10)}, job(9, 1, 500), false},
		{"FCFS never passes a waiting head", FCFS, []Job{job(1, 3, 100)}, []Job{job(2, 4, 10)}, job(9, 1, 50), false},
		{"LIST passes it whatever its length", LIST, []Job{job(1, 3, 100)}, []Job{job(2, 4, 10)}, job(9, 1, 500), true},
		// Submitted in the same second as a job that has not started yet:
		// both start at the pass.
		{"same second as a waiting job that fits", EASY, nil, []Job{job(2, 2, 10)}, job(9, 2, 10), true},
		{"same second, no room left after it", EASY, nil, []Job{job(2, 3, 10)}, job(9, 2, 10), false},
		{"conservative earliest fit now", Conservative, []Job{job(1, 2, 100)}, nil, job(9, 2, 10), true},
		{"conservative earliest fit later", Conservative, []Job{job(1, 3, 100)}, nil, job(9, 2, 10), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSite(Config{Procs: 4, Policy: c.pol})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range c.running {
				s.Submit(0, r)
			}
			if got := len(s.Pass(0)); got != len(c.running) {
				t.Fatalf("%d of %d running jobs started", got, len(c.running))
			}
			for _, q := range c.queued {
				s.Submit(0, q)
			}
			if got := s.CanStartNow(0, c.j); got != c.want {
				t.Fatalf("CanStartNow = %v, want %v", got, c.want)
			}
			// The probe changed nothing: the real submission decides the same.
			s.Submit(0, c.j)
			started := false
			for _, d := range s.Pass(0) {
				started = started || d.JobID == c.j.ID
			}
			if started != c.want {
				t.Fatalf("the pass after submitting started it: %v, CanStartNow said %v", started, c.want)
			}
		})
	}
}

// TestCanStartNowChangesNothing: on random queues, probing leaves the
// site's decisions exactly as they would have been.
func TestCanStartNowChangesNothing(t *testing.T) {
	for _, pol := range []Policy{EASY, FCFS, LIST, EDF} {
		rng := rand.New(rand.NewPCG(7, uint64(pol)))
		for trial := 0; trial < 200; trial++ {
			a, _ := NewSite(Config{Procs: 8, Policy: pol})
			b, _ := NewSite(Config{Procs: 8, Policy: pol})
			id := int64(0)
			for now := int64(0); now < 40; now += 10 {
				for range rng.IntN(4) {
					id++
					j := Job{ID: id, Procs: 1 + rng.IntN(8), Estimate: 1 + rng.Int64N(30), Deadline: Forever}
					if pol == EDF {
						j.Deadline = now + 100 + rng.Int64N(100)
					}
					a.Submit(now, j)
					b.Submit(now, j)
					a.CanStartNow(now, Job{ID: j.ID, Procs: 1 + rng.IntN(8), Estimate: 5, Deadline: Forever})
				}
				da, db := a.Pass(now), b.Pass(now)
				if len(da) != len(db) {
					t.Fatalf("%v trial %d at %d: %d decisions after probing, %d without", pol, trial, now, len(da), len(db))
				}
				for i := range da {
					if da[i] != db[i] {
						t.Fatalf("%v trial %d at %d: decision %d %+v after probing, %+v without", pol, trial, now, i, da[i], db[i])
					}
				}
				for _, d := range da {
					if rng.IntN(2) == 0 {
						a.End(now+5, d.JobID)
						b.End(now+5, d.JobID)
					}
				}
			}
		}
	}
}
