package plan

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRunSummariesAgainstReference checks EarliestFit with the run
// summaries used on every subtree, however small, against the reference.
func TestRunSummariesAgainstReference(t *testing.T) {
	for seed := uint64(1); seed <= 80; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		procs := 1 + rng.IntN(40)
		p, ref := randomPlan(rng, procs, 10+rng.IntN(80), 400)
		p.prof.runs.minSize = 1
		for q := 0; q < 200; q++ {
			at := rng.Int64N(500) - 20
			need := 1 + rng.IntN(procs)
			d := 1 + rng.Int64N(80)
			dl := Forever
			if rng.IntN(3) == 0 {
				dl = at + rng.Int64N(400)
			}
			gs, gok := p.EarliestFit(need, d, at, dl)
			ws, wok := ref.earliestFit(need, d, at, dl)
			if gok != wok || gs != ws {
				t.Fatalf("seed %d: EarliestFit(%d, %d, %d, %d) = %d,%v, reference %d,%v", seed, need, d, at, dl, gs, gok, ws, wok)
			}
		}
	}
}

// TestRunSummariesMatchPlainWalk checks, on plans too large for the
// reference and with updates between queries (so that summaries go stale),
// that the walk with summaries answers what the plain walk answers.
func TestRunSummariesMatchPlainWalk(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 13))
		procs := 16 + rng.IntN(200)
		p := New(procs)
		horizon := int64(200000)
		id := int64(0)
		for i := 0; i < 3000; i++ {
			id++
			q := 1 + rng.IntN(procs)
			d := 1 + rng.Int64N(2000)
			on := rng.Int64N(horizon)
			s, ok := p.EarliestFit(q, d, on, Forever)
			if !ok {
				t.Fatal("no fit with no deadline")
			}
			if err := p.Reserve(Reservation{ID: id, Procs: q, Start: s, End: s + d, Release: on, Deadline: Forever}); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(5) == 0 {
				if _, err := p.Release(1 + rng.Int64N(id)); err != nil && !errorsIs(err, ErrUnknownReservation) {
					t.Fatal(err)
				}
			}
			for k := 0; k < 3; k++ {
				need := 1 + rng.IntN(procs)
				dd := 1 + rng.Int64N(5000)
				at := rng.Int64N(horizon)
				dl := Forever
				if rng.IntN(3) == 0 {
					dl = at + rng.Int64N(horizon)
				}
				p.prof.runs.minSize = 1 + int32(rng.IntN(40))
				gs, gok := p.EarliestFit(need, dd, at, dl)
				p.prof.runs.minSize = math.MaxInt32
				ws, wok := p.EarliestFit(need, dd, at, dl)
				if gok != wok || gs != ws {
					t.Fatalf("seed %d step %d: EarliestFit(%d, %d, %d, %d) = %d,%v with summaries, %d,%v without", seed, i, need, dd, at, dl, gs, gok, ws, wok)
				}
			}
		}
	}
}
