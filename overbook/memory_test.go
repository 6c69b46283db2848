package overbook

import (
	"runtime"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// TestAdmissionMemoryFlat drives a site through 100,000 jobs that end in
// every way a job can leave a site (completed, killed at the end of an
// overbooked reservation, cancelled while waiting, a quote hold released or
// expired, rejected, probed) and checks that the admission's per-job state
// (class keys and, in comprehensive mode, end-time distributions) and the
// heap stay flat: what it holds follows the plan, not the history.
func TestAdmissionMemoryFlat(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	for _, mode := range []Mode{Heuristic, Comprehensive} {
		t.Run(mode.String(), func(t *testing.T) {
			jobs := n
			if mode == Comprehensive && raceEnabled {
				jobs = n / 4 // same pattern, a quarter of the convolutions
			}
			a := &Admission{Stats: uniformStats(t), Mode: mode, Test: Threshold{PoFMax: 0.5}, Learn: true}
			s, err := plan.NewSite(plan.Config{Procs: 4, Admission: a})
			if err != nil {
				t.Fatal(err)
			}
			type run struct {
				j   plan.Job
				end int64
				obs Observation
			}
			running := map[int64]run{}
			var now int64
			var heapAt10k uint64
			maxEntries := 0
			var overbooked, killed int
			for i := 1; i <= jobs; i++ {
				now += 40
				for id, r := range running {
					if r.end <= now {
						s.End(r.end, id)
						_ = a.Record(&r.j, r.obs)
						delete(running, id)
					}
				}
				id := int64(i)
				j := plan.Job{ID: id, Procs: 1 + i%4, Estimate: 60 + int64(i*37%80), Release: now, Deadline: now + 160, Fee: 1, Penalty: 1}
				switch i % 7 {
				case 0, 1, 2:
					if s.Submit(now, j).Reason == plan.ReasonOverbooked {
						overbooked++
					}
				case 3:
					if s.Submit(now, j).OK() {
						s.Cancel(now, id)
					}
				case 4:
					if s.Hold(now, j, now+1).OK() {
						s.Unhold(now, id)
					}
				case 5:
					s.Hold(now, j, now+20) // expires at a later pass
				case 6:
					j.Deadline = now + 50 // too short for anything: rejected
					s.Probe(now, j)
					s.Submit(now, j)
				}
				for _, d := range s.Pass(now) {
					if d.Kind != plan.DecideStart {
						continue
					}
					pj := plan.Job{ID: d.JobID, Procs: 1, Estimate: 60 + d.JobID*37%80}
					// A third of the jobs need all their estimate, the others a fifth.
					need := pj.Estimate / 5
					if d.JobID%3 == 0 {
						need = pj.Estimate
					}
					if d.Start+need <= d.End {
						running[d.JobID] = run{j: pj, end: d.Start + need, obs: Observation{Ran: need}}
					} else {
						running[d.JobID] = run{j: pj, end: d.End, obs: Observation{Ran: d.End - d.Start, Censored: true}}
						killed++
					}
				}
				maxEntries = max(maxEntries, a.Entries())
				if i == 10_000 {
					heapAt10k = heapInUse()
				}
			}
			heapEnd := heapInUse()
			if overbooked == 0 || killed == 0 {
				t.Fatalf("%d overbooked, %d killed: the stream must exercise both", overbooked, killed)
			}
			t.Logf("%d jobs (%d overbooked, %d cut): at most %d entries; heap %d KiB at 10k jobs, %d KiB at the end", jobs, overbooked, killed, maxEntries, heapAt10k>>10, heapEnd>>10)
			if maxEntries > 200 {
				t.Fatalf("the admission held up to %d per-job entries; a 4-processor plan with 160 s windows never holds more than a few dozen jobs", maxEntries)
			}
			if heapEnd > heapAt10k+1<<20 {
				t.Fatalf("heap grew from %d KiB at 10k jobs to %d KiB after %d", heapAt10k>>10, heapEnd>>10, jobs)
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
