package delegation

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// refRank is the plain reference of Rank: score every candidate, sort all
// of them stably, keep the first MaxCandidates.
func refRank(cands []Candidate, procs int, route Route, hist map[string]History, cfg LocationConfig, rng *rand.Rand) []Candidate {
	type scored struct {
		c     Candidate
		score float64
	}
	jit := cfg.Jitter
	if jit == 0 {
		jit = 0.1
	}
	var out []scored
	for _, c := range cands {
		if c.Procs < procs || route.Visited(c.Site) {
			continue
		}
		frac := func(free int) float64 { return math.Min(1, float64(free)/float64(procs)) }
		s := 0.4*frac(c.FreeNow) + 0.3*frac(c.Free1h) + 0.2*frac(c.Free4h) + 0.1*frac(c.Free24h)
		if h, ok := hist[c.Site]; ok {
			if h.Jobs > 0 && h.MeanResponseRatio > 0 {
				s += 1 / math.Max(1, h.MeanResponseRatio)
			}
			s -= 0.25 * float64(min(h.Failures, 4))
		} else {
			s += 0.5
		}
		if jit > 0 {
			s *= 1 + jit*(rng.Float64()-0.5)
		}
		out = append(out, scored{c, s})
	}
	slices.SortStableFunc(out, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return strings.Compare(a.c.Site, b.c.Site)
	})
	n := min(len(out), cfg.maxCandidates())
	res := make([]Candidate, n)
	for i := range n {
		res[i] = out[i].c
	}
	return res
}

// TestRankMatchesSortedReference checks the top-k selection against a full
// stable sort, with ties (no jitter, equal outlooks, repeated names).
func TestRankMatchesSortedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 30000; trial++ {
		cands := randomCands(rng)
		hist := map[string]History{}
		for i := 0; i < rng.IntN(10); i++ {
			hist[fmt.Sprintf("s%02d", rng.IntN(30))] = History{Jobs: rng.IntN(3), MeanResponseRatio: float64(rng.IntN(4)), Failures: rng.IntN(6)}
		}
		route := randomRoute(rng)
		cfg := LocationConfig{MaxCandidates: rng.IntN(6), Jitter: []float64{-1, 0, 0.3, 2.5}[rng.IntN(4)]}
		procs := 1 + rng.IntN(20)
		seed := rng.Uint64()
		got := Rank(cands, procs, route, hist, cfg, rand.New(rand.NewPCG(seed, 0)))
		want := refRank(cands, procs, route, hist, cfg, rand.New(rand.NewPCG(seed, 0)))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: Rank = %v, reference %v", trial, got, want)
		}
	}
}

// TestRounds: preferred peers alone, in the operator's order, whatever
// their rank or the candidate cap; then the ranking of the others; never
// the site itself, a peer too small or one the job has been at.
func TestRounds(t *testing.T) {
	cands := []Candidate{
		{Site: "self", Procs: 64, FreeNow: 64},
		{Site: "big", Procs: 64, FreeNow: 64, Free1h: 64, Free4h: 64, Free24h: 64},
		{Site: "mid", Procs: 32, FreeNow: 16, Free1h: 16, Free4h: 16, Free24h: 16},
		{Site: "partner", Procs: 16},
		{Site: "tiny", Procs: 2, FreeNow: 2},
		{Site: "seen", Procs: 64, FreeNow: 64},
	}
	route := Route{{Site: "seen", Action: ActionDelegated}}
	names := func(rs [][]Candidate) [][]string {
		var out [][]string
		for _, r := range rs {
			var n []string
			for _, c := range r {
				n = append(n, c.Site)
			}
			out = append(out, n)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		prefer []string
		max    int
		want   [][]string
	}{
		{"no preference", nil, 3, [][]string{{"big", "mid", "partner"}}},
		{"one candidate", nil, 1, [][]string{{"big"}}},
		{"partner first even beyond the cap", []string{"partner"}, 1, [][]string{{"partner"}, {"big"}}},
		{"in the operator's order", []string{"mid", "partner"}, 3, [][]string{{"mid"}, {"partner"}, {"big"}}},
		{"never self, too small or visited", []string{"self", "tiny", "seen", "partner"}, 3, [][]string{{"partner"}, {"big", "mid"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(Rounds(cands, tc.prefer, "self", 4, route, nil, LocationConfig{MaxCandidates: tc.max, Jitter: -1}, nil))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rounds %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRoundsRankMatchesReference checks the last round of Rounds (ranked
// over the candidates in place, the site itself and its preferred peers
// skipped) against the reference ranking of a copy without them, with
// jitter, so that the random draws must fall on the same candidates.
func TestRoundsRankMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 3000; trial++ {
		cands := randomCands(rng)
		self := fmt.Sprintf("s%02d", rng.IntN(30))
		var prefer []string
		for range rng.IntN(4) {
			prefer = append(prefer, fmt.Sprintf("s%02d", rng.IntN(30)))
		}
		route := randomRoute(rng)
		cfg := LocationConfig{MaxCandidates: rng.IntN(6), Jitter: []float64{-1, 0, 0.3}[rng.IntN(3)]}
		procs := 1 + rng.IntN(20)
		seed := rng.Uint64()
		rest := slices.DeleteFunc(slices.Clone(cands), func(c Candidate) bool { return c.Site == self || slices.Contains(prefer, c.Site) })
		want := refRank(rest, procs, route, nil, cfg, rand.New(rand.NewPCG(seed, 0)))
		rs := Rounds(cands, prefer, self, procs, route, nil, cfg, rand.New(rand.NewPCG(seed, 0)))
		var got []Candidate
		if len(want) > 0 {
			if len(rs) == 0 {
				t.Fatalf("trial %d: no rounds, reference ranking %v", trial, want)
			}
			got = rs[len(rs)-1]
		} else {
			for _, r := range rs {
				if len(r) != 1 || !slices.Contains(prefer, r[0].Site) {
					t.Fatalf("trial %d: round %v, the reference ranks nothing", trial, r)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: Rounds ranks %v, reference %v", trial, got, want)
		}
	}
}

// randomCands are up to 40 candidates named among 30 sites (names repeat),
// with free counts in steps of 8: many ties.
func randomCands(rng *rand.Rand) []Candidate {
	cands := make([]Candidate, rng.IntN(40))
	for i := range cands {
		f := func() int { return rng.IntN(5) * 8 }
		cands[i] = Candidate{Site: fmt.Sprintf("s%02d", rng.IntN(30)), Procs: 8 + rng.IntN(3)*8, FreeNow: f(), Free1h: f(), Free4h: f(), Free24h: f()}
	}
	return cands
}

// randomRoute is empty or one site the job has been at.
func randomRoute(rng *rand.Rand) Route {
	if rng.IntN(2) == 0 {
		return Route{{Site: fmt.Sprintf("s%02d", rng.IntN(30))}}
	}
	return nil
}
