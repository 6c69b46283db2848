package forecast

import (
	"math"
	"math/rand/v2"
	"slices"
)

// LTTR is the key of the thesis's deadline scheduler (Eq. 6.1): the latest
// time to run, deadline − forecast, i.e. the latest start that still meets
// the deadline if the job runs for its forecast. Keeping the queue in
// ascending LTTR order and dispatching from its head is EDF on this derived
// start deadline ("--policy lttr"); plain EDF orders by the deadline itself.
// The key is computed once, at submission, from a point forecast: it has no
// safety margin.
func LTTR(deadline, forecast int64) int64 { return deadline - forecast }

// UniformDeadlines is the "f-model" deadline generator of §6.2.4 (Eq. 6.2,
// after Mu'alem and Feitelson): D = submit + runtime·f with f drawn
// uniformly from [1, MaxFactor]. Every deadline is feasible (at least the
// actual runtime after submission). The thesis used MaxFactor = 10, a
// deliberately tough setting. Note that it reads the actual runtime: it
// generates the experiment's input, it is not something a scheduler may
// know.
type UniformDeadlines struct {
	MaxFactor float64 // >= 1
}

// DefaultUniformDeadlines returns the thesis's setting, f ~ U[1, 10].
func DefaultUniformDeadlines() UniformDeadlines { return UniformDeadlines{MaxFactor: 10} }

// Validate checks MaxFactor; errors wrap ErrInvalidConfig.
func (u UniformDeadlines) Validate() error {
	if !(u.MaxFactor >= 1) || math.IsInf(u.MaxFactor, 0) {
		return errorf("uniform deadlines: MaxFactor %v must be a finite number >= 1", u.MaxFactor)
	}
	return nil
}

// Deadline draws the deadline of a job submitted at submit that runs for
// runtime seconds (a negative runtime counts as 0). The product is rounded
// up, so D − submit >= runtime always holds. It draws exactly one number
// from r.
func (u UniformDeadlines) Deadline(r *rand.Rand, submit, runtime int64) int64 {
	runtime = max(runtime, 0)
	f := 1 + r.Float64()*(max(u.MaxFactor, 1)-1)
	return submit + max(runtime, int64(math.Ceil(float64(runtime)*f)))
}

// ModalDeadlines is the "modal" deadline generator of §6.2.4: relative
// deadlines take the rounded "human" values users favour (5, 15, 30, 60
// minutes, 1, 2, 6, 12, 24 hours), weakly correlated with runtime, and a
// small fraction get the maximum value (the longest runtime of the trace).
// The thesis drew them with Tsafrir's user-estimate toolbox, which we do not
// have; this is our approximation of it, and its popularity weights are our
// assumption: a job gets, with probability MaxFraction, Max; otherwise one of
// the Values that is at least its runtime (so that every deadline is
// feasible, as in the thesis), drawn in proportion to Weights; Max when no
// value is large enough. The thesis cut the share of maximal deadlines from
// Tsafrir's ~25% to 1% "creating a very demanding deadline profile".
type ModalDeadlines struct {
	Values      []int64   // relative deadlines in seconds, ascending, > 0
	Weights     []float64 // popularity of each value, >= 0, same length
	Max         int64     // the maximal relative deadline, > 0
	MaxFraction float64   // share of jobs given Max, in [0, 1]
}

// DefaultModalDeadlines returns the modal model with the thesis's round
// values, our popularity weights (one hour the most popular), maxRuntime as
// the maximal value and 1% of jobs at the maximum.
func DefaultModalDeadlines(maxRuntime int64) ModalDeadlines {
	return ModalDeadlines{
		Values:      []int64{300, 900, 1800, 3600, 7200, 21600, 43200, 86400},
		Weights:     []float64{0.10, 0.12, 0.12, 0.20, 0.14, 0.10, 0.10, 0.12},
		Max:         max(maxRuntime, 86400),
		MaxFraction: 0.01,
	}
}

// Validate checks the fields; errors wrap ErrInvalidConfig.
func (m ModalDeadlines) Validate() error {
	switch {
	case len(m.Values) == 0 || len(m.Values) != len(m.Weights):
		return errorf("modal deadlines: %d values and %d weights", len(m.Values), len(m.Weights))
	case !slices.IsSorted(m.Values) || m.Values[0] <= 0:
		return errorf("modal deadlines: values must be positive and ascending")
	case m.Max <= 0:
		return errorf("modal deadlines: Max %d must be > 0", m.Max)
	case !(m.MaxFraction >= 0 && m.MaxFraction <= 1):
		return errorf("modal deadlines: MaxFraction %v must be in [0, 1]", m.MaxFraction)
	}
	for _, w := range m.Weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return errorf("modal deadlines: weight %v must be finite and >= 0", w)
		}
	}
	return nil
}

// Deadline draws the deadline of a job submitted at submit that runs for
// runtime seconds (a negative runtime counts as 0). D − submit >= runtime
// always holds. It draws one or two numbers from r.
func (m ModalDeadlines) Deadline(r *rand.Rand, submit, runtime int64) int64 {
	runtime = max(runtime, 0)
	top := submit + max(m.Max, runtime)
	if r.Float64() < m.MaxFraction {
		return top
	}
	first, _ := slices.BinarySearch(m.Values, runtime) // first value >= runtime
	var total float64
	for _, w := range m.Weights[first:] {
		total += w
	}
	if !(total > 0) {
		return top
	}
	u := r.Float64() * total
	for i := first; i < len(m.Values); i++ {
		u -= m.Weights[i]
		if u < 0 {
			return submit + m.Values[i]
		}
	}
	// Rounding left u at or just above zero: the last value with weight.
	for i := len(m.Values) - 1; i >= first; i-- {
		if m.Weights[i] > 0 {
			return submit + m.Values[i]
		}
	}
	return top
}
