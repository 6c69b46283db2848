package swf

// KeepSpan returns the prefix of jobs (in file order, which SWF sorts by
// submission) submitted within span seconds of the first one: the
// federation study aligns its traces to equal lengths (its SDSC00₁₁ is the
// first eleven months of the two-year log), so that an early-ending site
// cannot absorb everyone else's load. span <= 0 keeps every job. The slice is shared, not copied.
func KeepSpan(jobs []Job, span int64) []Job {
	if span <= 0 || len(jobs) == 0 {
		return jobs
	}
	t0 := jobs[0].Submit
	for i, j := range jobs {
		if j.Submit-t0 >= span {
			return jobs[:i]
		}
	}
	return jobs
}
