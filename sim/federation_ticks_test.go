package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// TestTickQueueMatchesScan checks the tick queue against looking at every
// site, as the federated replay once did: at each time, the sites touched
// since they were last looked at and those whose wake is due, in site
// order; and the earliest wake.
func TestTickQueueMatchesScan(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 5))
		n := 1 + rng.IntN(12)
		q := newTickQueue(n)
		wakes := make([]int64, n)
		for k := range wakes {
			wakes[k] = plan.Forever
		}
		touched := make([]bool, n)
		var now int64
		for step := range 300 {
			for range rng.IntN(4) {
				k := rng.IntN(n)
				q.touch(k)
				touched[k] = true
			}
			earliest := slices.Min(wakes)
			if got := q.earliest(); got != earliest {
				t.Fatalf("seed %d step %d: earliest %d, scan %d", seed, step, got, earliest)
			}
			if earliest < plan.Forever && rng.IntN(2) == 0 {
				now = max(now, earliest)
			} else {
				now += rng.Int64N(5)
			}
			var want []int
			stepped := rng.IntN(3) == 0
			for k := range n {
				if touched[k] || !stepped && wakes[k] <= now {
					want = append(want, k)
				}
			}
			var got []int
			if stepped {
				got = q.stepped()
			} else {
				got = q.due(now)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d t=%d: sites %v, scan %v (stepped only: %v)", seed, step, now, got, want, stepped)
			}
			clear(touched)
			for _, k := range got {
				// The replay sets the wake again of every site it ticks,
				// and ticks every site whose wake is due.
				if !stepped && wakes[k] <= now || rng.IntN(2) == 0 {
					w := plan.Forever
					if rng.IntN(4) > 0 {
						w = now + rng.Int64N(10)
					}
					wakes[k] = w
					q.setWake(k, w)
				}
			}
		}
	}
}

// TestSortSubmitsIsStable: submissions come out by time and, at one time,
// in the order they were built (site by site, each in job order), as a
// stable sort by time gives.
func TestSortSubmitsIsStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for trial := range 20 {
		var subs []fedSubmit
		for k := range 1 + rng.IntN(30) {
			var at int64
			for range rng.IntN(200) {
				at += rng.Int64N(3) // many submissions at one time, across sites
				subs = append(subs, fedSubmit{at: at, site: k, idx: int32(len(subs))})
			}
		}
		want := slices.Clone(subs)
		slices.SortStableFunc(want, func(a, b fedSubmit) int { return cmp.Compare(a.at, b.at) })
		sortSubmits(subs)
		if !slices.Equal(subs, want) {
			t.Fatalf("trial %d: submissions out of order", trial)
		}
	}
}
