package overbook

// HeuristicPoF is the probability of failure of heuristic overbooking
// (thesis §3.3.2): a job on procs nodes with the given estimate x, placed
// into a slot of slot seconds l, gets t = min(x, l) seconds and
//
//	PoF = 1 − P_avail(procs) · CDFAt(t, x) · Survival(procs, t)
//
// where CDFAt(t, x) = CDF(floor(100·t/x)) is 1 when l >= x (no
// overbooking: only node failures remain). Predecessors are assumed to use
// their full reservations, so the PoF is conservative. A nil h is the
// empty-histogram prior (overbooking always fails). O(1).
func HeuristicPoF(h *Histogram, fm FailureModel, procs int, estimate, slot int64) float64 {
	t := min(estimate, slot)
	p := h.CDFAt(t, estimate)
	if p == 0 {
		return 1
	}
	return 1 - fm.Reliability(procs, t)*p
}

// ExecProb is P_executable of comprehensive overbooking: the probability
// that a job whose start follows start (release start.Origin, planned start
// start.Latest), with runtime ratio from h and the given estimate, finishes
// by slotEnd (digest §2.4, implementation-exact form):
//
//	P_exec = Σ_t f_S(t) · F_ω(slotEnd − t),  F_ω(τ) = h.CDFAt(τ, estimate)
//
// Each start bin's mass is taken at its grid time, the last bin's at the
// planned start (no start is later), so P_exec is never above the truth on
// the grid. It is exactly 1 when slotEnd − planned start >= estimate (the
// thesis sets P_exec = 1 then), and exactly the heuristic CDFAt(l, x) when the
// start is certain (a point mass at the planned start). O(len(start.CDF)),
// no convolution.
func ExecProb(start StartDist, h *Histogram, estimate, slotEnd int64) float64 {
	if slotEnd-start.Latest >= estimate {
		return 1
	}
	n := len(start.CDF)
	if n <= 1 || start.Step <= 0 {
		return h.CDFAt(slotEnd-start.Latest, estimate)
	}
	last := n - 1
	// g[j] = F_ω(slotEnd − t_{last−1−j}) for the non-last bins, walking τ
	// upwards from the latest non-last grid point.
	var stack [1024]float64
	var g []float64
	if last <= len(stack) {
		g = stack[:last]
	} else {
		g = make([]float64, last)
	}
	tau0 := slotEnd - (start.Origin + int64(last-1)*start.Step)
	h.cdfGrid(g, tau0, start.Step, estimate)
	var p, prev float64
	for k := range last {
		c := start.CDF[k]
		p += (c - prev) * g[last-1-k]
		prev = c
	}
	p += (1 - prev) * h.CDFAt(slotEnd-start.Latest, estimate)
	return min(max(p, 0), 1)
}

// ComprehensivePoF is the probability of failure of comprehensive
// overbooking (thesis §3.3.1):
//
//	PoF = 1 − P_avail(procs) · P_exec · Survival(procs, min(x, l))
//
// with P_exec = ExecProb(start, h, estimate, slotEnd) and l = slotEnd −
// start.Latest the planned reservation length. All procs nodes are taken to
// share the rates of fm.
func ComprehensivePoF(start StartDist, h *Histogram, fm FailureModel, procs int, estimate, slotEnd int64) float64 {
	pe := ExecProb(start, h, estimate, slotEnd)
	if pe == 0 {
		return 1
	}
	t := min(estimate, slotEnd-start.Latest)
	return 1 - fm.Reliability(procs, t)*pe
}
