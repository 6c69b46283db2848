package overbook

import (
	"github.com/fedsched/fedsched/plan"
)

// Mode selects how an Admission computes the probability of failure.
type Mode int

const (
	// Heuristic: the job's own CDF at the gap length (O(1) per gap).
	Heuristic Mode = iota
	// Comprehensive: the job may also start early when the reservations
	// ending where its gap begins end early; their end-time distributions
	// are combined and the job's own is stored for later jobs to chain on.
	Comprehensive
)

func (m Mode) String() string {
	if m == Comprehensive {
		return "comprehensive"
	}
	return "heuristic"
}

// RatioStats is what an Admission needs of its runtime statistics: the
// distribution of a job's ratio actual/estimated runtime, and what each
// job's end told about its runtime (for statistics that learn online). *Stats, the
// thesis's per-class histograms, is the default implementation; the
// simulator also has one built from runtime forecasts (sim.OnlineForecast).
//
// Histogram may be asked several times for the same job (at admission, at
// re-planning, while it runs); JobInfo.ID identifies the job for statistics
// that keep per-job distributions. The returned histogram is read-only.
type RatioStats interface {
	Histogram(j JobInfo) *Histogram
	Record(j JobInfo, o Observation) error
}

// DefaultAdmissionMinSamples is the MinSamples of an Admission. By the rule
// of three, when none of n samples would have failed in a gap, the 95 %
// upper confidence bound of the true probability of failure there is still
// about 3/n, so below 30 samples no history can show a bet safe at the
// default PoF threshold 0.1. Early samples are also biased short (the first
// jobs to end are the short ones): on KTH a new site still violated more
// SLAs than a trained one at 30 and 50 samples, no more at 75, fewer at 100
// (docs/overbooking.md, scripts/overbook-coldstart.sh).
const DefaultAdmissionMinSamples = 100

var _ RatioStats = (*Stats)(nil)

// GapChoice selects which acceptable gap an Admission takes.
type GapChoice int

const (
	// FirstFit takes the earliest gap that passes the test (the thesis's
	// implemented choice: fastest).
	FirstFit GapChoice = iota
	// BestPoS takes the acceptable gap with the lowest PoF ("conservative"
	// in the thesis's terms).
	BestPoS
)

// Admission is the risk-aware admission test of a site: it implements
// plan.Admission. It first tries a placement with the full estimate; only if
// none exists inside the job's window does it search the gaps, compute the
// PoF of each and accept one that passes Test (the thesis's "near best fit",
// §5.2.3). Every answer carries its reason: placed in full, overbooked (with
// its PoF), rejected: no gap, rejected: risk.
//
// It overbooks only when the statistics the job's histogram comes from
// hold at least MinSamples (aged) samples; otherwise it answers
// rejected: risk with TooFewSamples, so that a site never bets on what it
// has not measured.
//
// An Admission keeps per-job state (class keys, end-time distributions) for
// the jobs in the plan it is asked about; an entry whose job has left the
// plan, whatever way (ended, killed, cancelled, rejected, a hold released or
// expired, a probe), is released at the latest when the entries outnumber
// twice the plan's reservations (sweep), so its memory follows the plan's.
// Tell it how jobs ended (Record) to learn online. Not safe for concurrent
// use; the site's goroutine owns it.
type Admission struct {
	// Stats gives the runtime-ratio histogram of a job (of its class, for
	// *Stats). Nil means empty *Stats: the conservative prior that every
	// job uses its full estimate, until Learn teaches it otherwise.
	Stats RatioStats
	// Failures is the node-failure model; the zero value means none.
	Failures FailureModel
	// Test decides whether an overbooked placement is acceptable. Nil
	// means Threshold{PoFMax: 0.1}.
	Test Test
	// Mode selects the PoF computation.
	Mode Mode
	// Choice selects among acceptable gaps.
	Choice GapChoice
	// Learn makes Record update Stats with what each job's end told
	// (online learning). Off, the statistics stay as trained, as in the
	// thesis.
	Learn bool
	// MinSamples is the (aged) weight of samples the histogram of a job
	// must hold before the job may be overbooked. 0 means
	// DefaultAdmissionMinSamples; it must not be negative.
	MinSamples float64

	defaultStats *Stats // Stats when nil

	jobs  map[int64]JobInfo
	dists map[int64]EndDist
	gaps  []plan.Gap
	preds []plan.Reservation
	pd    []EndDist
}

var _ plan.Admission = (*Admission)(nil)

func (a *Admission) test() Test {
	if a.Test == nil {
		return Threshold{PoFMax: 0.1}
	}
	return a.Test
}

// stats returns Stats, or the default empty statistics when it is nil.
func (a *Admission) stats() RatioStats {
	if a.Stats != nil {
		return a.Stats
	}
	if a.defaultStats == nil {
		a.defaultStats = new(Stats)
	}
	return a.defaultStats
}

func (a *Admission) minSamples() float64 {
	if a.MinSamples == 0 {
		return DefaultAdmissionMinSamples
	}
	return a.MinSamples
}

func info(j *plan.Job) JobInfo {
	return JobInfo{ID: j.ID, Procs: j.Procs, Estimate: j.Estimate, User: j.User, App: j.App}
}

// Admit places j: in full at its earliest fit if one exists inside its
// window, otherwise in the first (or best) gap whose PoF passes the test.
func (a *Admission) Admit(p *plan.Plan, j *plan.Job, now int64) plan.Placement {
	if j.Procs > p.Procs() {
		return plan.Placement{Reason: plan.ReasonRejectedTooWide}
	}
	a.sweep(p)
	ji := info(j)
	from, to := max(now, j.Release), j.Deadline
	if s, ok := p.EarliestFit(j.Procs, j.Estimate, from, to); ok {
		pl := plan.Placement{Start: s, End: s + j.Estimate, Reason: plan.ReasonPlacedInFull,
			PoF: 1 - a.Failures.Reliability(j.Procs, j.Estimate)}
		a.remember(p, j, ji, pl, from, now)
		return pl
	}
	a.gaps = p.Gaps(a.gaps[:0], j.Procs, from, to)
	best := plan.Placement{Reason: plan.ReasonRejectedNoGap}
	if len(a.gaps) == 0 {
		return best
	}
	h, n := a.histogram(p, ji, now)
	best = plan.Placement{Reason: plan.ReasonRejectedRisk, Samples: n}
	if best.Samples < a.minSamples() {
		best.TooFewSamples = true
		return best
	}
	test := a.test()
	for _, g := range a.gaps {
		pof := a.pof(p, h, j, g, from, now)
		if !test.Accept(pof, j.Fee, j.Penalty) {
			continue
		}
		if best.OK() && pof >= best.PoF {
			continue
		}
		best = plan.Placement{Start: g.Start, End: g.End, PoF: pof, Reason: plan.ReasonOverbooked, Samples: best.Samples}
		if a.Choice == FirstFit {
			break
		}
	}
	if best.OK() {
		a.remember(p, j, ji, best, from, now)
	}
	return best
}

// Replan re-places a waiting job: with its full estimate if that now fits
// anywhere in its window (an overbooked job grows back), otherwise at the
// earliest slot at least as long as it had, stretched as far as the
// processors are free, up to its estimate.
func (a *Admission) Replan(p *plan.Plan, j *plan.Job, now int64, cur plan.Placement) plan.Placement {
	from, to := max(now, j.Release), j.Deadline
	a.sweep(p)
	ji := info(j)
	if s, ok := p.EarliestFit(j.Procs, j.Estimate, from, to); ok && (s <= cur.Start || cur.End-cur.Start < j.Estimate) {
		pl := plan.Placement{Start: s, End: s + j.Estimate, Reason: plan.ReasonPlacedInFull,
			PoF: 1 - a.Failures.Reliability(j.Procs, j.Estimate)}
		a.remember(p, j, ji, pl, from, now)
		return pl
	}
	s, ok := p.EarliestFit(j.Procs, cur.End-cur.Start, from, to)
	if !ok || s > cur.Start {
		return cur
	}
	end := p.FreeUntil(j.Procs, s, min(s+j.Estimate, to))
	pl := plan.Placement{Start: s, End: end, Reason: cur.Reason}
	if end-s >= j.Estimate {
		pl.Reason, pl.PoF = plan.ReasonPlacedInFull, 1-a.Failures.Reliability(j.Procs, j.Estimate)
	} else {
		h, n := a.histogram(p, ji, now)
		pl.PoF, pl.Samples = a.pof(p, h, j, plan.Gap{Start: s, End: end}, from, now), n
	}
	a.remember(p, j, ji, pl, from, now)
	return pl
}

// Record tells the admission what the end of job j told about its runtime
// (see Observation); with Learn it goes into the statistics. It also
// releases j's entry at once (the sweep would later). Call it for every end
// that carries a runtime: a job that ended by itself, one killed at the end
// of its reservation (censored if it had less than its estimate), one
// cancelled while running (censored). Ends that tell nothing (never
// started, lost) need no call.
func (a *Admission) Record(j *plan.Job, o Observation) error {
	a.Forget(j.ID)
	if a.Learn {
		return a.stats().Record(info(j), o)
	}
	return nil
}

// Restore tells the admission of a job a driver put back into the plan
// after a restart (plan.Site.Restore), so that it is judged as a job the
// admission placed: a running one counts as a censored sample of its
// class. The comprehensive mode's end-time distribution is not rebuilt
// (it depended on the plan when the job was admitted): the jobs chained
// on a restored job take its reservation's end as certain.
func (a *Admission) Restore(j *plan.Job) {
	if a.jobs == nil {
		a.jobs, a.dists = make(map[int64]JobInfo), make(map[int64]EndDist)
	}
	a.jobs[j.ID] = info(j)
}

// Forget releases the entry of job id, if any.
func (a *Admission) Forget(id int64) {
	delete(a.jobs, id)
	delete(a.dists, id)
}

// Entries is the number of jobs the admission holds state for (class keys
// and, in comprehensive mode, end-time distributions).
func (a *Admission) Entries() int { return len(a.jobs) + len(a.dists) }

// sweep releases the entries of jobs no longer in p once they could
// outnumber its reservations twice over (plus a little, so that small plans
// do not sweep on every call): each sweep at least halves the entries, so
// its cost is constant per admission on average.
func (a *Admission) sweep(p *plan.Plan) {
	if a.jobs == nil {
		a.jobs, a.dists = make(map[int64]JobInfo), make(map[int64]EndDist)
	}
	if len(a.jobs)+len(a.dists) <= 2*p.Len()+64 {
		return
	}
	for id := range a.jobs {
		if _, ok := p.Get(id); !ok {
			delete(a.jobs, id)
		}
	}
	for id := range a.dists {
		if _, ok := p.Get(id); !ok {
			delete(a.dists, id)
		}
	}
}

// histogram returns the ratio histogram a job with info ji is judged by at
// now, and the weight of the ended jobs it was learnt from. The jobs running
// at now under the same statistics (the same snapshot of Stats: the same
// class) are added to it as censored samples at the time they have run:
// they have not ended yet. Without them the statistics of a young site lean
// short, because the first jobs to end are the short ones.
func (a *Admission) histogram(p *plan.Plan, ji JobInfo, now int64) (*Histogram, float64) {
	h := a.stats().Histogram(ji)
	n := h.N()
	var running *Histogram
	for id, ri := range a.jobs {
		if id == ji.ID {
			continue
		}
		r, ok := p.Get(id)
		if !ok || r.Fixed || r.Start > now || r.End <= now || a.stats().Histogram(ri) != h {
			continue
		}
		if running == nil {
			running = h.Clone()
		}
		_ = running.AddCensored(now-r.Start, ri.Estimate) // ri was valid when admitted
	}
	if running != nil {
		return running, n
	}
	return h, n
}

// pof computes the probability of failure of j in gap g.
func (a *Admission) pof(p *plan.Plan, h *Histogram, j *plan.Job, g plan.Gap, from, now int64) float64 {
	if a.Mode == Heuristic || g.Start <= from {
		// A gap that begins at the job's earliest start has nothing
		// before it to end early: the start is certain.
		return HeuristicPoF(h, a.Failures, j.Procs, j.Estimate, g.Len())
	}
	sd, err := a.startDist(p, j, g.Start, from, now)
	if err != nil {
		return HeuristicPoF(h, a.Failures, j.Procs, j.Estimate, g.Len())
	}
	return ComprehensivePoF(sd, h, a.Failures, j.Procs, j.Estimate, g.End)
}

// startDist is the distribution of j's start when it is planned at start:
// it may begin as soon as every reservation ending at start has ended.
func (a *Admission) startDist(p *plan.Plan, j *plan.Job, start, from, now int64) (StartDist, error) {
	step := DefaultStep(max(j.Deadline, start+j.Estimate) - from)
	a.preds = p.EndingAt(a.preds[:0], start)
	a.pd = a.pd[:0]
	for _, r := range a.preds {
		if r.ID == j.ID {
			continue
		}
		a.pd = append(a.pd, a.endDist(r, now))
	}
	return NewStartDist(a.pd, from, start, step)
}

// endDist is the end-time distribution of reservation r as known at now.
func (a *Admission) endDist(r plan.Reservation, now int64) EndDist {
	ji, known := a.jobs[r.ID]
	if r.Fixed || !known {
		return FixedEnd(r.End)
	}
	if r.Start <= now {
		// Running: its start is known; condition on it still running.
		d, err := ReservationDist(a.stats().Histogram(ji), r.Start, ji.Estimate, r.End, DefaultStep(r.End-r.Start))
		if err != nil {
			return FixedEnd(r.End)
		}
		return d.Given(now)
	}
	if d, ok := a.dists[r.ID]; ok {
		return d
	}
	return FixedEnd(r.End)
}

// remember records j's class and, for the comprehensive mode, its end-time
// distribution in placement pl, for later jobs to chain on.
func (a *Admission) remember(p *plan.Plan, j *plan.Job, ji JobInfo, pl plan.Placement, from, now int64) {
	a.jobs[j.ID] = ji
	if a.Mode != Comprehensive {
		return
	}
	h := a.stats().Histogram(ji)
	step := DefaultStep(max(j.Deadline, pl.End) - from)
	var sd StartDist
	var err error
	if pl.Start <= from {
		sd, err = NewStartDist(nil, pl.Start, pl.Start, step)
	} else {
		sd, err = a.startDist(p, j, pl.Start, from, now)
	}
	if err != nil {
		delete(a.dists, j.ID)
		return
	}
	if d, err := ChainedEndDist(sd, h, j.Estimate, pl.End, step); err == nil {
		a.dists[j.ID] = d
	} else {
		delete(a.dists, j.ID)
	}
}
