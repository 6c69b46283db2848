package delegation

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestPCGIsRandPCG: the in-place PCG draws what rand.New(rand.NewPCG(hi,
// lo)) draws, and next passes over one draw.
func TestPCGIsRandPCG(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		hi, lo := rng.Uint64(), rng.Uint64()
		if trial == 0 {
			hi, lo = 0, 0
		}
		want := rand.New(rand.NewPCG(hi, lo))
		p := pcg{hi: hi, lo: lo}
		for i := range 300 {
			w := want.Float64()
			if i%5 == 3 {
				p.next()
				continue
			}
			if g := p.float64(); g != w {
				t.Fatalf("seed %d/%d, draw %d: %v, want %v", hi, lo, i, g, w)
			}
		}
	}
}

// TestRankerIsRounds: a Ranker used offer after offer returns what Rounds
// returns with the Ranker's history and the stream (seed, stream), as the
// candidates come in the same order or another, with names repeated or
// dropped, peers' histories added and changed between offers, with and
// without preferred peers, jitter and a job route.
func TestRankerIsRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 300 {
		self := fmt.Sprintf("s%02d", rng.IntN(30))
		var prefer []string
		for range rng.IntN(3) {
			prefer = append(prefer, fmt.Sprintf("s%02d", rng.IntN(30)))
		}
		cfg := LocationConfig{MaxCandidates: rng.IntN(6), Jitter: []float64{-1, 0, 0.3, 2.5}[rng.IntN(4)]}
		r := NewRanker(self, prefer, cfg)
		cands := randomCands(rng)
		for offer := range 60 {
			switch rng.IntN(8) {
			case 0:
				cands = randomCands(rng) // another list
			case 1:
				rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
			case 2:
				if len(cands) > 0 {
					cands = slices.Delete(cands, 0, 1)
				}
			}
			for i := range cands { // outlooks change
				if rng.IntN(4) == 0 {
					cands[i].FreeNow = rng.IntN(5) * 8
				}
			}
			for range rng.IntN(4) {
				peer := fmt.Sprintf("s%02d", rng.IntN(30))
				h := r.History()[peer]
				if rng.IntN(2) == 0 {
					h.Failures++
				} else {
					h.Observe(rng.Float64() * 3)
				}
				r.SetHistory(peer, h)
			}
			route := randomRoute(rng)
			if rng.IntN(3) == 0 {
				route = append(Route{{Site: self, Action: ActionSubmitted}}, route...)
			}
			procs := 1 + rng.IntN(20)
			seed, stream := rng.Uint64(), rng.Uint64()
			hist := make(map[string]History)
			for k, v := range r.History() {
				hist[k] = v
			}
			want := Rounds(cands, prefer, self, procs, route, hist, cfg, rand.New(rand.NewPCG(seed, stream)))
			got := r.Rounds(cands, procs, route, seed, stream)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("trial %d, offer %d: Ranker.Rounds %v, Rounds %v", trial, offer, got, want)
			}
		}
	}
}
