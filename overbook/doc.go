// Package overbook is the risk mathematics of SLA overbooking in a
// planning-based resource manager, after Birkenheuer's thesis "Risk Aware
// Overbooking for SLA Based Scheduling Systems" (2012) and the 2008 paper
// before it. It is pure: no planner, no clock, no I/O, no global random
// state. Time is an integer number of seconds everywhere.
//
// # Basics
//
// Overbooking means accepting an SLA job into a gap of the plan that is
// shorter than the user's runtime estimate x, betting that the job needs
// less. Nodes are never shared: a job that has not finished when its
// reservation ends is killed, and the SLA is violated unless the job had
// received its full estimate.
//
// Runtime uncertainty is an empirical Histogram of the ratio actual/estimated
// runtime in 101 integer-percent bins (floor, ratios >= 100 % in bin 100).
// Stats keeps one histogram per job class (runtime band, processor band,
// user, application) plus a general one, learns them from finished jobs
// (Train, Observe, Record), ages old samples if configured, falls back to
// the general histogram for thin classes, and serialises to JSON. A job
// stopped before it ended (cut at an overbooked reservation's end) is a
// right-censored sample (Observation.Censored): the histograms read such
// samples with the Kaplan-Meier estimator over their bins. Admission
// takes its histograms through the small interface RatioStats, of which
// Stats is the default; the simulator plugs in per-job histograms built
// from runtime forecasts (Histogram.AddRatio).
//
// Node failures follow FailureModel, independent exponential failures and
// repairs with rates per node per hour: availability (μ/(λ+μ))^n at start,
// survival exp(−λ·t·n) while running.
//
// The probability of failure (PoF) of a placement comes in two variants:
//
//   - HeuristicPoF: the job's own CDF at the gap length, O(1):
//     PoF = 1 − P_avail·CDFAt(min(x,l), x)·Survival(min(x,l)).
//   - ComprehensivePoF: the job may also start early when the reservations
//     planned before it on its nodes end early. Their end-time distributions
//     (EndDist, on a time grid, with the mass past a planned end placed at
//     that end) give the start-time distribution (NewStartDist: the product
//     of their CDFs between release and planned start), and ExecProb sums
//     the start PMF against the runtime CDF. ChainedEndDist convolves the
//     two (directly or by FFT) into the job's own EndDist, which later jobs
//     chain on; ReservationDist starts a chain from a known start.
//
// An acceptance Test turns the PoF into a decision: Threshold (PoF < PoFMax)
// or Risk ((1−PoF)·fee > PoF·penalty·SF, SF 2 for the heuristic and 4 for
// the comprehensive algorithm). Settle turns what happened to a job into an
// Outcome and money; FeeModel (the thesis's node-hour fees) and
// UrgencyModel (Yeo's two urgency classes) make the SLA terms.
//
// A typical admission with the heuristic:
//
//	h := stats.Histogram(overbook.JobInfo{Procs: n, Estimate: x, User: u})
//	pof := overbook.HeuristicPoF(h, overbook.ThesisFailures, n, x, gapLen)
//	ok := overbook.Risk{SecurityFactor: overbook.DefaultSFHeuristic}.Accept(pof, fee, penalty)
//
// # Caveats
//
//   - An Admission overbooks only when the job's histogram holds
//     MinSamples (default DefaultAdmissionMinSamples) samples of ended
//     jobs, and adds the jobs running under the same statistics as
//     censored samples when it judges a gap.
//   - The histograms are evaluated at the bin that contains the granted
//     time, as in the thesis, which overstates P(actual <= got) by up to one
//     bin (1 % of the estimate). An empty histogram is read as "every job
//     uses its full estimate", so nothing is overbooked without data.
//   - Runtimes, predecessor ends and node failures are taken as
//     independent. Real failures are bursty and correlated; wide jobs carry a
//     large PoF even without overbooking (about 0.8 of a 10-hour, 1024-node
//     job fails under ThesisFailures).
//   - NewStartDist must be given each distinct predecessor once; the thesis
//     multiplies per node, which counts a wide predecessor many times. A
//     predecessor that is already running should be passed through
//     EndDist.Given so it is conditioned on its elapsed time.
//   - Grid distributions round times up to the grid (a start or an end is
//     never reported earlier than it can be), so the comprehensive PoF errs
//     high by up to a step per chained convolution; DefaultStep keeps
//     distributions near 1024 bins.
//   - A Histogram is not safe for concurrent use until it has been read once
//     after its last change; Stats hands out prepared read-only snapshots
//     and is itself safe for concurrent use.
//   - UniformOverbookedLength is the 2008 paper's rule d' = d/(1+PoFMax),
//     kept for reference; it is not the thesis's statistical PoF.
package overbook
