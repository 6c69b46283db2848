package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchPlan builds a plan of 5,000 live reservations on 1,000 processors,
// placed first-fit from random release times spread so that the offered
// load over the spread is load (1.0 = exactly the site's capacity). Jobs
// take 1-128 processors for 1 minute to 4 hours.
func benchPlan(b *testing.B, load float64) (*Plan, int64) {
	return benchPlanN(b, load, 5000)
}

// benchPlanN is benchPlan with n reservations.
func benchPlanN(b *testing.B, load float64, n int) (*Plan, int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	p := New(1000)
	// Mean area of a job: 64.5 procs x 2 h; n of them over the spread.
	spread := int64(float64(n) * 64.5 * 2 * 3600 / 1000 / load)
	for id := int64(1); p.Len() < n; id++ {
		q := 1 + rng.IntN(128)
		d := 60 + rng.Int64N(4*3600)
		on := rng.Int64N(spread)
		s, ok := p.EarliestFit(q, d, on, Forever)
		if !ok {
			b.Fatal("no fit")
		}
		if err := p.Reserve(Reservation{ID: id, Procs: q, Start: s, End: s + d, Release: on, Deadline: Forever}); err != nil {
			b.Fatal(err)
		}
	}
	return p, spread
}

func BenchmarkEarliestFit(b *testing.B) {
	for _, load := range []float64{0.8, 1.0, 4.0} {
		b.Run(fmt.Sprintf("load=%.1f", load), func(b *testing.B) { benchEarliestFit(b, load) })
	}
}

// BenchmarkEarliestFitSize sweeps the plan size at load 1.0 (a saturated
// plan): the cost per query should grow with log n, not with n.
func BenchmarkEarliestFitSize(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			p, spread := benchPlanN(b, 1.0, n)
			runEarliestFit(b, p, spread)
			b.ReportMetric(float64(p.Profile().Len()), "breakpoints")
		})
	}
}

func benchEarliestFit(b *testing.B, load float64) {
	p, spread := benchPlan(b, load)
	runEarliestFit(b, p, spread)
}

func runEarliestFit(b *testing.B, p *Plan, spread int64) {
	rng := rand.New(rand.NewPCG(3, 4))
	type query struct {
		q    int
		d, t int64
	}
	qs := make([]query, 4096)
	for i := range qs {
		qs[i] = query{1 + rng.IntN(256), 60 + rng.Int64N(4*3600), rng.Int64N(spread)}
	}
	// One pass before timing: the run summaries a query needs are computed
	// on first use and kept until the plan changes there, so the timed
	// loop measures a plan that has been queried before, as a live one has.
	for _, x := range qs {
		p.EarliestFit(x.q, x.d, x.t, Forever)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := qs[i%len(qs)]
		p.EarliestFit(x.q, x.d, x.t, Forever)
	}
}

func BenchmarkGaps(b *testing.B) {
	p, spread := benchPlan(b, 1.0)
	rng := rand.New(rand.NewPCG(5, 6))
	var buf []Gap
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := rng.Int64N(spread)
		buf = p.Gaps(buf[:0], 1+rng.IntN(256), t, t+8*3600)
	}
}

func BenchmarkReserveRelease(b *testing.B) {
	p, spread := benchPlan(b, 1.0)
	rng := rand.New(rand.NewPCG(7, 8))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := 1 + rng.IntN(64)
		d := 60 + rng.Int64N(3600)
		s, ok := p.EarliestFit(q, d, rng.Int64N(spread), Forever)
		if !ok {
			b.Fatal("no fit")
		}
		id := int64(1 << 40)
		if err := p.Reserve(Reservation{ID: id, Procs: q, Start: s, End: s + d, Deadline: Forever}); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Release(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProfileAdd reserves and releases random slots in a profile of
// about n breakpoints (EASY on KTH keeps about 200: two per running job),
// two Adds per iteration, as a queue policy starts and ends a job.
func BenchmarkProfileAdd(b *testing.B) {
	for _, n := range []int{200, 10000} {
		b.Run(fmt.Sprintf("breakpoints=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(9, 10))
			p := NewProfile(1 << 20)
			for p.Len() < n {
				s := rng.Int64N(int64(n) * 100)
				p.Add(s, s+1+rng.Int64N(int64(n)*10), -1-rng.IntN(64))
			}
			type slot struct{ s, e int64 }
			ss := make([]slot, 4096)
			for i := range ss {
				s := rng.Int64N(int64(n) * 100)
				ss[i] = slot{s, s + 1 + rng.Int64N(int64(n)*10)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x := ss[i%len(ss)]
				p.Add(x.s, x.e, -7)
				p.Add(x.s, x.e, 7)
			}
		})
	}
}
