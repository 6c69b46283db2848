package overbook

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Outcome is how an SLA ended.
type Outcome int

// Outcomes. The zero Outcome is invalid (not yet settled).
const (
	Met       Outcome = iota + 1 // fee earned
	Violated                     // penalty owed
	Cancelled                    // withdrawn before it ran: no money either way
)

// String returns "met", "violated" or "cancelled".
func (o Outcome) String() string {
	switch o {
	case Met:
		return "met"
	case Violated:
		return "violated"
	case Cancelled:
		return "cancelled"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Reason says why an SLA got its Outcome.
type Reason int

// Reasons. The zero Reason is invalid.
const (
	Finished        Reason = iota + 1 // the job finished within the time it got (Met)
	EstimateReached                   // killed after receiving its full estimate: the user's estimate was short (Met)
	CutShort                          // killed at the end of an overbooked reservation before its estimate (Violated)
	NodeFailed                        // a node failed under it before its estimate (Violated)
	Withdrawn                         // cancelled (Cancelled)
)

// String returns the reason in words.
func (r Reason) String() string {
	switch r {
	case Finished:
		return "finished"
	case EstimateReached:
		return "estimate reached"
	case CutShort:
		return "cut short"
	case NodeFailed:
		return "node failed"
	case Withdrawn:
		return "withdrawn"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Urgency is the urgency class of an SLA under UrgencyModel.
type Urgency int

// Urgency classes. NoUrgency is used by models without classes (FeeModel).
const (
	NoUrgency Urgency = iota
	LowUrgency
	HighUrgency
)

// String returns "none", "low" or "high".
func (u Urgency) String() string {
	switch u {
	case NoUrgency:
		return "none"
	case LowUrgency:
		return "low"
	case HighUrgency:
		return "high"
	}
	return "Urgency(" + strconv.Itoa(int(u)) + ")"
}

// Terms are the terms of one SLA: the job's request and window, and the
// money. Times are seconds.
type Terms struct {
	Procs    int     `json:"procs"`
	Release  int64   `json:"release"`  // earliest start
	Deadline int64   `json:"deadline"` // latest end
	Estimate int64   `json:"estimate"` // the user's runtime estimate
	Fee      float64 `json:"fee"`      // paid to the provider when the SLA is met
	Penalty  float64 `json:"penalty"`  // paid by the provider when it is violated
	Urgency  Urgency `json:"urgency"`
	Hard     bool    `json:"hard"` // hard deadline (high urgency, Yeo's HARD); informational
}

// Settlement is the result of settling an SLA.
type Settlement struct {
	Outcome Outcome
	Reason  Reason
	Fee     float64 // fee earned by the provider
	Penalty float64 // penalty owed by the provider
}

// Net is Fee − Penalty, the provider's gain from this SLA.
func (s Settlement) Net() float64 { return s.Fee - s.Penalty }

// Settle settles an SLA whose job received got seconds of run time before it
// ended or was cut, and actually needed actual seconds (thesis §1.2, §2.7):
//
//   - actual <= got: the job finished: Met, fee earned.
//   - got >= Estimate: the job was killed after receiving its full estimate
//     (the user underestimated): Met, fee earned. This holds even if a node
//     failed then: the provider owed no more than the estimate.
//   - otherwise (got < Estimate and the job had not finished): Violated,
//     penalty owed, with Reason NodeFailed if nodeFailed (a node went down
//     under the job) and CutShort if the reservation ended (overbooking).
//
// A negative got counts as 0.
func Settle(t Terms, got, actual int64, nodeFailed bool) Settlement {
	got = max(got, 0)
	switch {
	case actual <= got:
		return Settlement{Outcome: Met, Reason: Finished, Fee: t.Fee}
	case got >= t.Estimate:
		return Settlement{Outcome: Met, Reason: EstimateReached, Fee: t.Fee}
	case nodeFailed:
		return Settlement{Outcome: Violated, Reason: NodeFailed, Penalty: t.Penalty}
	}
	return Settlement{Outcome: Violated, Reason: CutShort, Penalty: t.Penalty}
}

// Cancel settles an SLA withdrawn before it ran: Cancelled, no money.
func Cancel(Terms) Settlement {
	return Settlement{Outcome: Cancelled, Reason: Withdrawn}
}

// TermsModel makes the SLA terms of a job released at release.
type TermsModel interface {
	Terms(r *rand.Rand, j JobInfo, release int64) (Terms, error)
}

// NodeHours is procs × estimate in hours: the booked node-hours of a job,
// the thesis's "virtual coins" (VC). Non-positive inputs give 0.
func NodeHours(procs int, estimate int64) float64 {
	if procs <= 0 || estimate <= 0 {
		return 0
	}
	return float64(procs) * float64(estimate) / 3600
}

// Defaults of FeeModel.
const (
	DefaultPenaltyRatio   = 1.0 // the thesis's PoF-threshold runs: penalty = fee
	DefaultDeadlineFactor = 2.0 // the thesis: deadline = release + 2 × estimate
)

// FeeModel is the thesis's SLA model (§5.1.1): fee = NodeHours(procs,
// estimate) virtual coins, penalty = PenaltyRatio × fee, and deadline =
// release + DeadlineFactor × estimate. The thesis's risk runs use
// PenaltyRatio ∈ {0.5, 1, 2, 4}. The zero value is the default model.
type FeeModel struct {
	PenaltyRatio   float64 `json:"penalty_ratio"`   // 0 means DefaultPenaltyRatio
	DeadlineFactor float64 `json:"deadline_factor"` // 0 means DefaultDeadlineFactor
}

// Validate returns ErrBadConfig for negative or non-finite fields, or a
// deadline factor below 1 (a deadline before the estimate can elapse).
func (m FeeModel) Validate() error {
	if !(m.PenaltyRatio >= 0) || math.IsInf(m.PenaltyRatio, 0) ||
		!(m.DeadlineFactor == 0 || m.DeadlineFactor >= 1) || math.IsInf(m.DeadlineFactor, 0) {
		return fmt.Errorf("%w: fee model %+v", ErrBadConfig, m)
	}
	return nil
}

func (m FeeModel) ratio() float64 {
	if m.PenaltyRatio == 0 {
		return DefaultPenaltyRatio
	}
	return m.PenaltyRatio
}

func (m FeeModel) deadlineFactor() float64 {
	if m.DeadlineFactor == 0 {
		return DefaultDeadlineFactor
	}
	return m.DeadlineFactor
}

// Fee is NodeHours(procs, estimate).
func (m FeeModel) Fee(procs int, estimate int64) float64 { return NodeHours(procs, estimate) }

// Penalty is PenaltyRatio × Fee.
func (m FeeModel) Penalty(procs int, estimate int64) float64 {
	return m.ratio() * NodeHours(procs, estimate)
}

// Terms returns the SLA terms of j released at release; r is not used.
func (m FeeModel) Terms(_ *rand.Rand, j JobInfo, release int64) (Terms, error) {
	if err := m.Validate(); err != nil {
		return Terms{}, err
	}
	if j.Estimate <= 0 {
		return Terms{}, fmt.Errorf("%w: %d", ErrBadEstimate, j.Estimate)
	}
	fee := m.Fee(j.Procs, j.Estimate)
	return Terms{
		Procs:    j.Procs,
		Release:  release,
		Deadline: deadline(release, j.Estimate, m.deadlineFactor()),
		Estimate: j.Estimate,
		Fee:      fee,
		Penalty:  m.ratio() * fee,
	}, nil
}

// deadline is release + ceil(factor × estimate), saturating at MaxTime
// (exact for factor 2 and any estimate below 2^52 s).
func deadline(release, estimate int64, factor float64) int64 {
	d := math.Ceil(factor * float64(estimate))
	if d >= float64(MaxTime) || float64(release)+d >= float64(MaxTime) {
		return MaxTime
	}
	return release + int64(d)
}

// DefaultUrgencyRelStdDev is the relative standard deviation (σ/mean) of the
// normally distributed deadline, budget and penalty factors of UrgencyModel.
// Our choice: Yeo states that the factors are normal but gives neither their
// standard deviation nor their truncation.
const DefaultUrgencyRelStdDev = 0.25

// UrgencyModel is the two-urgency-class SLA model of Yeo's thesis (§3.5.1,
// §4.4.1, §6.4.3, after Irwin et al.): a fraction HighFraction of jobs is
// high urgency (short deadline, high budget and penalty, HARD deadline), the
// rest low urgency (long deadline, low budget and penalty, SOFT). Each factor
// is normal with the class mean; the "low mean" is the mean of the class
// with the lower value and the "ratio" is high-class mean / low-class mean:
//
//	deadline factor D/x:  high urgency DeadlineLowMean,  low urgency DeadlineLowMean × DeadlineRatio
//	budget factor   B/f:  low urgency  BudgetLowMean,    high urgency BudgetLowMean × BudgetRatio
//	penalty factor  P/g:  low urgency  PenaltyLowMean,   high urgency PenaltyLowMean × PenaltyRatio
//
// Mapping to this project (our choices, Yeo leaves f, g and the units open):
// f = g = NodeHours(procs, estimate); the deadline is release + factor ×
// estimate; the fee is the budget (Yeo's bid-based model: the provider
// earns B when the SLA is met); and because jobs here are killed rather
// than delayed, Yeo's penalty RATE per unit of delay becomes a flat penalty
// factor × g on violation. Draws are truncated by redrawing: deadline
// factors below 1 (a deadline must leave room for the estimate) and money
// factors <= 0 are redrawn, up to 64 times, then the class mean is used.
type UrgencyModel struct {
	HighFraction    float64 `json:"high_fraction"`
	DeadlineLowMean float64 `json:"deadline_low_mean"`
	DeadlineRatio   float64 `json:"deadline_ratio"`
	BudgetLowMean   float64 `json:"budget_low_mean"`
	BudgetRatio     float64 `json:"budget_ratio"`
	PenaltyLowMean  float64 `json:"penalty_low_mean"`
	PenaltyRatio    float64 `json:"penalty_ratio"`
	RelStdDev       float64 `json:"rel_std_dev"` // σ = RelStdDev × class mean
}

// LibraSLAUrgency is the default of Yeo's Table 4.1 (LibraSLA): 20 % high
// urgency; deadline low mean 3.5, high:low ratio 7; budget low mean 4,
// ratio 7; penalty-rate low mean 4, ratio 4; σ = DefaultUrgencyRelStdDev ×
// mean.
func LibraSLAUrgency() UrgencyModel {
	return UrgencyModel{
		HighFraction:    0.2,
		DeadlineLowMean: 3.5, DeadlineRatio: 7,
		BudgetLowMean: 4, BudgetRatio: 7,
		PenaltyLowMean: 4, PenaltyRatio: 4,
		RelStdDev: DefaultUrgencyRelStdDev,
	}
}

// BidBasedUrgency is the default of Yeo's Table 6.6 (bid-based model,
// Ch. 6): 20 % high urgency, low mean 4 and high:low ratio 4 for deadline,
// budget and penalty (bias 1, i.e. none); σ = DefaultUrgencyRelStdDev ×
// mean.
func BidBasedUrgency() UrgencyModel {
	return UrgencyModel{
		HighFraction:    0.2,
		DeadlineLowMean: 4, DeadlineRatio: 4,
		BudgetLowMean: 4, BudgetRatio: 4,
		PenaltyLowMean: 4, PenaltyRatio: 4,
		RelStdDev: DefaultUrgencyRelStdDev,
	}
}

// Validate returns ErrBadConfig unless HighFraction is in [0, 1], the means
// and ratios are positive and finite, the deadline means are >= 1 and
// RelStdDev is finite and >= 0.
func (m UrgencyModel) Validate() error {
	pos := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
	ok := m.HighFraction >= 0 && m.HighFraction <= 1 &&
		pos(m.DeadlineLowMean) && pos(m.DeadlineRatio) &&
		pos(m.BudgetLowMean) && pos(m.BudgetRatio) &&
		pos(m.PenaltyLowMean) && pos(m.PenaltyRatio) &&
		m.RelStdDev >= 0 && !math.IsInf(m.RelStdDev, 0)
	if ok {
		d1, _, _ := m.Means(HighUrgency)
		d2, _, _ := m.Means(LowUrgency)
		ok = d1 >= 1 && d2 >= 1
	}
	if !ok {
		return fmt.Errorf("%w: urgency model %+v", ErrBadConfig, m)
	}
	return nil
}

// Means returns the class means of the deadline, budget and penalty factors.
func (m UrgencyModel) Means(u Urgency) (deadline, budget, penalty float64) {
	if u == HighUrgency {
		return m.DeadlineLowMean, m.BudgetLowMean * m.BudgetRatio, m.PenaltyLowMean * m.PenaltyRatio
	}
	return m.DeadlineLowMean * m.DeadlineRatio, m.BudgetLowMean, m.PenaltyLowMean
}

// draw is a normal draw with the given mean and σ = rel·mean, redrawn while
// below lo (or at it when strict), falling back to the mean.
func draw(r *rand.Rand, mean, rel, lo float64, strict bool) float64 {
	for range 64 {
		x := mean + rel*mean*r.NormFloat64()
		if x > lo || (!strict && x == lo) {
			return x
		}
	}
	return mean
}

// Terms draws the urgency class and the factors of j released at release.
// It returns ErrNilRand without a random source.
func (m UrgencyModel) Terms(r *rand.Rand, j JobInfo, release int64) (Terms, error) {
	if r == nil {
		return Terms{}, ErrNilRand
	}
	if err := m.Validate(); err != nil {
		return Terms{}, err
	}
	if j.Estimate <= 0 {
		return Terms{}, fmt.Errorf("%w: %d", ErrBadEstimate, j.Estimate)
	}
	u := LowUrgency
	if r.Float64() < m.HighFraction {
		u = HighUrgency
	}
	dm, bm, pm := m.Means(u)
	df := draw(r, dm, m.RelStdDev, 1, false)
	bf := draw(r, bm, m.RelStdDev, 0, true)
	pf := draw(r, pm, m.RelStdDev, 0, true)
	base := NodeHours(j.Procs, j.Estimate)
	return Terms{
		Procs:    j.Procs,
		Release:  release,
		Deadline: deadline(release, j.Estimate, df),
		Estimate: j.Estimate,
		Fee:      bf * base,
		Penalty:  pf * base,
		Urgency:  u,
		Hard:     u == HighUrgency,
	}, nil
}
