package overbook

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Never is the time of an event that never happens (NextFailure of a model
// without failures, RepairTime of a model without repairs).
const Never int64 = math.MaxInt64

// FailureModel is the constant-rate node failure model of the thesis
// (§3.3.1): failures and repairs of each node are independent Poisson
// processes with rates Lambda and Mu per node per HOUR. The zero value means
// nodes never fail (every probability is 1).
type FailureModel struct {
	Lambda float64 `json:"lambda"` // failures per node per hour (1/MTTF)
	Mu     float64 `json:"mu"`     // repairs per node per hour (1/MTTR)
}

// ThesisFailures is the model the thesis fitted to the LANL failure archive:
// λ = 1.2904e-4 and μ = 0.4333 per hour (MTTF ≈ 7,750 h, MTTR ≈ 2.3 h; the
// thesis states no unit, per hour is the only plausible reading).
var ThesisFailures = FailureModel{Lambda: 1.2904e-4, Mu: 0.4333}

// Validate returns ErrBadConfig for negative or non-finite rates.
func (f FailureModel) Validate() error {
	if !(f.Lambda >= 0) || math.IsInf(f.Lambda, 0) || !(f.Mu >= 0) || math.IsInf(f.Mu, 0) {
		return fmt.Errorf("%w: failure model λ=%v μ=%v", ErrBadConfig, f.Lambda, f.Mu)
	}
	return nil
}

// logAvail is −log of the per-node steady-state availability μ/(λ+μ),
// i.e. log(1 + λ/μ); +Inf when μ = 0 < λ (a failed node is never repaired).
func (f FailureModel) logAvail() float64 {
	if f.Lambda <= 0 {
		return 0
	}
	if f.Mu <= 0 {
		return math.Inf(1)
	}
	return math.Log1p(f.Lambda / f.Mu)
}

// Availability is the probability that all of nodes nodes are up when a job
// starts: (μ/(λ+μ))^nodes = (1/(1+λ/μ))^nodes (MTTF/(MTTF+MTTR) per node).
// It is 1 for nodes <= 0 or λ = 0.
func (f FailureModel) Availability(nodes int) float64 {
	if nodes <= 0 {
		return 1
	}
	return math.Exp(-float64(nodes) * f.logAvail())
}

// Survival is the probability that none of nodes nodes fails during seconds
// seconds of running: exp(−λ·t_hours·nodes).
//
// The thesis prints this term as 1 − e^{−λt}, which is the failure CDF, not
// the survival; this is the corrected form (see the digest, §2.2). It is 1
// for nodes <= 0 or seconds <= 0.
func (f FailureModel) Survival(nodes int, seconds int64) float64 {
	if nodes <= 0 || seconds <= 0 || f.Lambda <= 0 {
		return 1
	}
	return math.Exp(-f.Lambda * float64(seconds) / 3600 * float64(nodes))
}

// Reliability is Availability(nodes)·Survival(nodes, seconds), computed with
// one exponential: the resource part of the probability of success.
func (f FailureModel) Reliability(nodes int, seconds int64) float64 {
	if nodes <= 0 || f.Lambda <= 0 {
		return 1
	}
	e := f.logAvail()
	if seconds > 0 {
		e += f.Lambda * float64(seconds) / 3600
	}
	return math.Exp(-float64(nodes) * e)
}

// NextFailure draws the time in seconds until the next failure of one up
// node: exponential with rate λ per hour, rounded up to whole seconds and at
// least 1 (so a failure never coincides with the instant it is drawn). It
// returns Never when λ = 0.
func (f FailureModel) NextFailure(r *rand.Rand) int64 {
	return expSeconds(r, f.Lambda)
}

// RepairTime draws the time in seconds a failed node stays down: exponential
// with rate μ per hour, rounded up to whole seconds and at least 1. It
// returns Never when μ = 0.
func (f FailureModel) RepairTime(r *rand.Rand) int64 {
	return expSeconds(r, f.Mu)
}

func expSeconds(r *rand.Rand, ratePerHour float64) int64 {
	if !(ratePerHour > 0) {
		return Never
	}
	s := math.Ceil(r.ExpFloat64() / ratePerHour * 3600)
	switch {
	case s < 1:
		return 1
	case s >= float64(Never):
		return Never
	}
	return int64(s)
}
