package sim

import (
	"math"
	"math/rand/v2"
)

// FailureConfig makes processors fail and come back during a replay: each
// processor in service fails after an exponential time with rate Lambda,
// and each failed one is repaired after an exponential time with rate Mu,
// both per processor per hour (the thesis's model; its fit to the LANL
// archive is Lambda = 1.2904e-4, Mu = 0.4333). Zero rates turn failures
// off. Seed seeds the draws, so a replay with failures is deterministic.
type FailureConfig struct {
	Lambda, Mu float64
	Seed       uint64
}

// failureProcess draws failure and repair times. The failure times of the
// processors in service form one Poisson process of rate Lambda × up, so
// only the next one is kept; repairs are kept in order of time.
type failureProcess struct {
	on          bool
	procs       int
	lambda, mu  float64 // per second
	rng         *rand.Rand
	nextFailure int64
	repairs     []int64 // sorted
	repairFirst bool
}

func newFailureProcess(c FailureConfig, procs int) *failureProcess {
	f := &failureProcess{procs: procs}
	if !(c.Lambda > 0 && c.Mu > 0) || procs <= 0 {
		return f
	}
	f.on, f.lambda, f.mu = true, c.Lambda/3600, c.Mu/3600
	f.rng = rand.New(rand.NewPCG(c.Seed, 0xfa11))
	f.nextFailure = f.draw(0, f.lambda*float64(procs))
	return f
}

// draw is now plus an exponential time of the given rate, in whole seconds.
func (f *failureProcess) draw(now int64, rate float64) int64 {
	if rate <= 0 {
		return math.MaxInt64 / 4
	}
	return now + 1 + int64(f.rng.ExpFloat64()/rate)
}

// next is the time of the next failure or repair.
func (f *failureProcess) next() int64 {
	if !f.on {
		return math.MaxInt64 / 4
	}
	t := f.nextFailure
	if len(f.repairs) > 0 && f.repairs[0] <= t {
		t = f.repairs[0]
	}
	return t
}

// due reports whether a failure or repair happens at t, and which comes
// first (repairs before failures at equal times).
func (f *failureProcess) due(t int64) bool {
	if !f.on {
		return false
	}
	f.repairFirst = len(f.repairs) > 0 && f.repairs[0] == t
	return f.repairFirst || f.nextFailure == t
}

func (f *failureProcess) isRepair() bool { return f.repairFirst }

// pick chooses the failing processor among those in service.
func (f *failureProcess) pick(down int) int { return f.rng.IntN(max(1, f.procs-down)) }

// failed records a failure at t: its repair is drawn, and the next failure
// among the processors still in service.
func (f *failureProcess) failed(t int64) {
	r := f.draw(t, f.mu)
	i := 0
	for i < len(f.repairs) && f.repairs[i] <= r {
		i++
	}
	f.repairs = append(f.repairs, 0)
	copy(f.repairs[i+1:], f.repairs[i:])
	f.repairs[i] = r
	f.nextFailure = f.draw(t, f.lambda*float64(f.procs-len(f.repairs)))
}

// repaired records the repair due at t.
func (f *failureProcess) repaired(t int64) {
	f.repairs = f.repairs[1:]
	f.nextFailure = f.draw(t, f.lambda*float64(f.procs-len(f.repairs)))
}
