package overbook

import "math"

// Test is an SLA acceptance test: given a placement's probability of failure
// and the SLA's fee and penalty, accept it or not. Implementations reject a
// NaN PoF.
type Test interface {
	Accept(pof, fee, penalty float64) bool
}

// Threshold is the thesis's Algorithm 3.2 (academic or bartering use, no
// money): accept iff PoF < PoFMax. The thesis sweeps PoFMax over
// 0.05, 0.10, …, 1.00.
type Threshold struct {
	PoFMax float64
}

// Accept reports pof < PoFMax; fee and penalty are ignored.
func (t Threshold) Accept(pof, _, _ float64) bool {
	return pof < t.PoFMax
}

// Default security factors of the risk test (thesis §5.1.4, "an educated
// guess").
const (
	DefaultSFHeuristic     = 2.0
	DefaultSFComprehensive = 4.0
)

// Risk is the thesis's Algorithm 5.1: accept iff the opportunity exceeds the
// risk weighted by a security factor,
//
//	(1 − PoF)·fee > PoF·penalty·SecurityFactor.
//
// SecurityFactor 1 is Algorithm 3.1 (accept iff the expected profit is
// positive). Defaults: DefaultSFHeuristic, DefaultSFComprehensive. When
// penalty = ratio·fee with fee > 0 the test is the threshold
// PoF < RiskThreshold(ratio, SecurityFactor).
type Risk struct {
	SecurityFactor float64
}

// Accept reports (1−pof)·fee > pof·penalty·SecurityFactor.
func (r Risk) Accept(pof, fee, penalty float64) bool {
	return (1-pof)*fee > pof*penalty*r.SecurityFactor
}

// RiskThreshold is the PoF threshold equivalent to the risk test when
// penalty = ratio·fee: 1/(1 + ratio·sf). For example 1/3 for ratio 1 and the
// heuristic's SF 2, 1/17 for ratio 4 and the comprehensive SF 4.
func RiskThreshold(ratio, sf float64) float64 {
	return 1 / (1 + ratio*sf)
}

// UniformOverbookedLength is the overbooking rule of the 2008 paper
// (Birkenheuer et al., "Overbooking in planning based scheduling systems",
// §3.1.2 step 1), NOT the thesis's statistical PoF: assuming a uniform
// distribution, a job of estimated duration d may be planned with the
// shorter duration d' = d/(1 + PoFMax), leaving o = d − d' for overbooking.
// The result is rounded up to the time unit (the paper's worked example
// turns 300/1.13 = 265.49 minutes into 266), so at most o is given away.
// Any time unit works; a quotient within 1e-9 of an integer is taken as that
// integer to absorb floating-point error. A non-positive estimate or a
// PoFMax <= 0 (or NaN) returns estimate unchanged.
func UniformOverbookedLength(estimate int64, pofMax float64) int64 {
	if estimate <= 0 || !(pofMax > 0) {
		return estimate
	}
	q := float64(estimate) / (1 + pofMax)
	if r := math.Round(q); math.Abs(q-r) <= 1e-9*math.Max(1, q) {
		q = r
	}
	if c := math.Ceil(q); c < float64(estimate) {
		return int64(c)
	}
	return estimate
}

// UniformOverbookable is o = d − UniformOverbookedLength(d, PoFMax): the
// time the 2008 paper's rule lets the scheduler take away from a job of
// estimate d.
func UniformOverbookable(estimate int64, pofMax float64) int64 {
	return estimate - UniformOverbookedLength(estimate, pofMax)
}
