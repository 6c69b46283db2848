package delegation

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkRounds is one offer of a one-processor job in the 170-site grid
// proxy's shape: 170 candidates (two in three with processors free), the
// job's route one hop long, a history of 40 peers, 3 candidates kept.
func BenchmarkRounds(b *testing.B) {
	cands, hist := gridOffer()
	route := Route{{Site: "site007", Action: ActionSubmitted}}
	cfg := LocationConfig{MaxCandidates: 3}
	jit := rand.New(rand.NewPCG(3, 4))
	for b.Loop() {
		if rs := Rounds(cands, nil, "site007", 1, route, hist, cfg, jit); len(rs) != 1 || len(rs[0]) != 3 {
			b.Fatalf("rounds %v", rs)
		}
	}
}

// BenchmarkRanker is BenchmarkRounds through a Ranker (the site agent's
// location policy), each offer with its own jitter stream, as each job.
func BenchmarkRanker(b *testing.B) {
	cands, hist := gridOffer()
	route := Route{{Site: "site007", Action: ActionSubmitted}}
	r := NewRanker("site007", nil, LocationConfig{MaxCandidates: 3})
	for p, h := range hist {
		r.SetHistory(p, h)
	}
	var job uint64
	for b.Loop() {
		job++
		if rs := r.Rounds(cands, 1, route, 3, job); len(rs) != 1 || len(rs[0]) != 3 {
			b.Fatalf("rounds %v", rs)
		}
	}
}

// gridOffer is the candidates and the history of the two benchmarks.
func gridOffer() ([]Candidate, map[string]History) {
	rng := rand.New(rand.NewPCG(1, 2))
	cands := make([]Candidate, 170)
	hist := map[string]History{}
	for i := range cands {
		free := func() int {
			if rng.IntN(3) == 0 {
				return 0
			}
			return 1 + rng.IntN(20)
		}
		cands[i] = Candidate{Site: fmt.Sprintf("site%03d", i), Procs: 10 + rng.IntN(20), FreeNow: free(), Free1h: free(), Free4h: free(), Free24h: free()}
		if rng.IntN(4) == 0 {
			hist[cands[i].Site] = History{Jobs: 1 + rng.IntN(9), MeanResponseRatio: 0.5 + rng.Float64(), Failures: rng.IntN(2)}
		}
	}
	return cands, hist
}
