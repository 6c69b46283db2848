package plan

import (
	"math/rand/v2"
	"testing"
)

// TestHeadFitMatchesEarliestFit asks the head's cached earliest fit and a
// fresh EarliestFit the same questions, on a profile that changes now and
// then, for a few jobs whose size changes now and then, from times that
// mostly move forward (as a replay's) and sometimes jump past the cached
// start or back before the time it was computed from.
func TestHeadFitMatchesEarliestFit(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 13))
		p := NewProfile(16)
		for range 20 {
			s := rng.Int64N(200)
			p.Add(s, s+1+rng.Int64N(60), -1-rng.IntN(12))
		}
		var h headFit
		j := Job{ID: 1, Procs: 4, Estimate: 30}
		now := int64(0)
		hits := 0
		for q := 0; q < 400; q++ {
			switch rng.IntN(10) {
			case 0:
				s := now + rng.Int64N(100)
				d := 1 + rng.IntN(4)
				if rng.IntN(2) == 0 && p.MinFree(s, s+20) >= d {
					p.Add(s, s+20, -d)
				} else {
					p.Add(s, s+20, d)
				}
			case 1:
				j.ID = 1 + rng.Int64N(3)
			case 2:
				j.Procs = 1 + rng.IntN(16)
			case 3:
				j.Estimate = 1 + rng.Int64N(60)
			case 4:
				if h.ok {
					now = h.start + 1 + rng.Int64N(5) // past the cached start
				}
			case 5:
				now = max(0, now-rng.Int64N(20)) // back before it
			default:
				now += rng.Int64N(4)
			}
			prev := h
			got, gok := h.earliest(p, &j, now)
			want, wok := p.EarliestFit(j.Procs, j.Estimate, now, Forever)
			if got != want || gok != wok {
				t.Fatalf("seed %d, query %d: job %+v from %d: cached fit %d,%v, fresh %d,%v", seed, q, j, now, got, gok, want, wok)
			}
			if prev.valid && h == prev && prev.onOrAfter != now {
				hits++ // answered from the cache: a fresh one records now
			}
		}
		if hits == 0 {
			t.Fatalf("seed %d: the cache never answered", seed)
		}
	}
}
