package sim

// TimelineBin is a site's state over one bin [Start, Start+width) of a
// replay, as time-weighted means: Busy processors (running jobs) and
// Waiting jobs (accepted, submitted, not yet started).
type TimelineBin struct {
	Start   int64
	Busy    float64
	Waiting float64
}

// Timeline averages a replay's busy processors and waiting jobs over the
// bins of width seconds that cover [from, to). A job counts as busy over
// [Start, End) and as waiting over [Submit, Start); jobs that never
// started (rejected, expired) count in neither.
func Timeline(recs []Record, from, to, width int64) []TimelineBin {
	if width <= 0 || to <= from {
		return nil
	}
	n := (to - from + width - 1) / width
	bins := make([]TimelineBin, n)
	for i := range bins {
		bins[i].Start = from + int64(i)*width
	}
	// add spreads weight w over [a, b) onto the bins' sums of w x seconds.
	add := func(a, b int64, w float64, field func(*TimelineBin) *float64) {
		a, b = max(a, from), min(b, to)
		for a < b {
			i := (a - from) / width
			end := min(b, bins[i].Start+width)
			*field(&bins[i]) += w * float64(end-a)
			a = end
		}
	}
	busy := func(b *TimelineBin) *float64 { return &b.Busy }
	waiting := func(b *TimelineBin) *float64 { return &b.Waiting }
	for _, r := range recs {
		if !r.Started {
			continue
		}
		add(r.Start, r.End, float64(r.Procs), busy)
		add(r.Submit, r.Start, 1, waiting)
	}
	for i := range bins {
		d := float64(min(width, to-bins[i].Start))
		bins[i].Busy /= d
		bins[i].Waiting /= d
	}
	return bins
}

// ReplaySpan returns the first submission and the last end of a replay's jobs
// (0, 0 for none).
func ReplaySpan(recs []Record) (first, last int64) {
	for i, r := range recs {
		if i == 0 || r.Submit < first {
			first = r.Submit
		}
		if r.Started && r.End > last {
			last = r.End
		}
	}
	return first, max(first, last)
}
