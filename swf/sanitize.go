package swf

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Rule4Mode selects how Sanitize treats a job that ran longer than its
// runtime estimate (p_j > p̄_j), the subject of sanitisation rule 4.
type Rule4Mode int

const (
	// Rule4Clip, the default, keeps such a job and cuts its Runtime to its
	// ReqTime (p_j := p̄_j). A planning-based site kills a job at the end of
	// its estimate, so this is the faithful replay of the job; on the KTH
	// trace the literal rule would drop 475 jobs, 411 of which overran by
	// under a minute.
	Rule4Clip Rule4Mode = iota
	// Rule4Drop applies the thesis's rule literally and drops such a job.
	Rule4Drop
)

// String returns "clip" or "drop", the spelling ParseRule4 accepts.
func (m Rule4Mode) String() string {
	switch m {
	case Rule4Clip:
		return "clip"
	case Rule4Drop:
		return "drop"
	}
	return fmt.Sprintf("Rule4Mode(%d)", int(m))
}

// ParseRule4 parses a rule 4 mode, as given on a command line: "clip" or
// "drop" (case-insensitive). Other values give an error wrapping
// ErrInvalidOption.
func ParseRule4(s string) (Rule4Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "clip":
		return Rule4Clip, nil
	case "drop":
		return Rule4Drop, nil
	}
	return Rule4Clip, fmt.Errorf("%w: rule 4 mode %q (want clip or drop)", ErrInvalidOption, s)
}

// SanitizeOptions controls Sanitize.
type SanitizeOptions struct {
	// SiteProcs is the site size m_k for rule 1. It is used by
	// Trace.Sanitize, where 0 means the header's Procs(), and by Sanitize
	// when its siteProcs argument is 0.
	SiteProcs int64
	// Rule4 selects clipping (the zero value, the default) or dropping of
	// jobs that ran past their runtime estimate. Values other than
	// Rule4Drop clip.
	Rule4 Rule4Mode
	// RequireEstimate enables rule 5: drop jobs without a runtime estimate
	// (ReqTime <= 0). It is on in DefaultSanitizeOptions as the thesis
	// prescribes, but must be switched off for traces that carry no
	// estimates at all (NASA, Lublin), which would otherwise lose every job;
	// such traces need an estimate model instead.
	RequireEstimate bool
}

// DefaultSanitizeOptions returns the options that reproduce the thesis's
// sanitisation with the rule 4 correction: site size from the header,
// Rule4Clip, and rule 5 on.
func DefaultSanitizeOptions() SanitizeOptions {
	return SanitizeOptions{Rule4: Rule4Clip, RequireEstimate: true}
}

// SanitizeReport counts what Sanitize did, per rule, so that every
// experiment can state how its workload was derived from the raw trace. A
// dropped job is counted once, under the first rule (in application order)
// that dropped it; In == Out + all the *Dropped, *TooWide, *NoRuntime and
// *NoEstimate counts.
type SanitizeReport struct {
	In              int   `json:"in"`
	Out             int   `json:"out"`
	SiteProcs       int64 `json:"site_procs"`        // m_k used by rule 1; 0 means rule 1 was not applied
	Rule1TooWide    int   `json:"rule1_too_wide"`    // dropped: procs > site procs
	Rule2Fixed      int   `json:"rule2_fixed"`       // requested/allotted repaired
	Rule2Dropped    int   `json:"rule2_dropped"`     // both invalid
	Rule3NoRuntime  int   `json:"rule3_no_runtime"`  // dropped: runtime <= 0
	Rule4Clipped    int   `json:"rule4_clipped"`     // runtime cut to the estimate
	Rule4Dropped    int   `json:"rule4_dropped"`     // dropped (Drop mode)
	Rule5NoEstimate int   `json:"rule5_no_estimate"` // dropped: no estimate
	Reordered       bool  `json:"reordered"`         // the surviving jobs were not in submit order and were sorted
}

// Dropped returns the total number of jobs removed by all rules.
func (r SanitizeReport) Dropped() int {
	return r.Rule1TooWide + r.Rule2Dropped + r.Rule3NoRuntime + r.Rule4Dropped + r.Rule5NoEstimate
}

// String summarises the report on one line, for logs and experiment reports.
func (r SanitizeReport) String() string {
	return fmt.Sprintf("sanitise: %d -> %d jobs (m_k=%d; r1 too wide %d; r2 fixed %d, dropped %d; r3 no runtime %d; r4 clipped %d, dropped %d; r5 no estimate %d)",
		r.In, r.Out, r.SiteProcs, r.Rule1TooWide, r.Rule2Fixed, r.Rule2Dropped,
		r.Rule3NoRuntime, r.Rule4Clipped, r.Rule4Dropped, r.Rule5NoEstimate)
}

// Sanitize applies the five sanitisation rules of the federation study
// (Papaspyrou 2013, §3.2.3) to jobs for a site of siteProcs processors (m_k)
// and returns the surviving jobs as a new slice; jobs itself is not modified.
// If siteProcs is 0 (or negative), opts.SiteProcs is used; if that is also
// 0, the site size is unknown and rule 1 is skipped.
//
// "Valid" processor counts are positive ones. The rules are applied to each
// job in this order, and a job leaves at the first rule that drops it:
//
//  2. Repair the processor counts: if the job requested processors, has
//     none allotted and ran successfully (Status 1), set AllocProcs =
//     ReqProcs; else if both are valid and differ, set ReqProcs =
//     AllocProcs; if both are invalid, drop the job. (Rule 2 comes first
//     because rule 1 must judge the repaired width.)
//  1. Drop the job if Procs() > m_k.
//  3. Drop the job if Runtime <= 0 (this includes an unknown runtime, -1).
//  4. If it has an estimate (ReqTime > 0) and Runtime > ReqTime: with
//     Rule4Clip set Runtime = ReqTime; with Rule4Drop drop the job.
//  5. With RequireEstimate, drop the job if ReqTime <= 0.
//
// Rules 4 and 5 concern disjoint jobs, so their relative order is immaterial.
// Every surviving job has 1 <= Procs() <= m_k and Runtime > 0. A job that
// requested processors, has none allotted and did not complete keeps
// AllocProcs unset; Procs() then falls back to ReqProcs.
//
// Finally the result is sorted by Submit with a stable sort (file order
// breaks ties), because replay requires non-decreasing release times and not
// every trace is sorted; report.Reordered says whether this changed anything.
func Sanitize(jobs []Job, siteProcs int64, opts SanitizeOptions) ([]Job, SanitizeReport) {
	m := siteProcs
	if m <= 0 {
		m = opts.SiteProcs
	}
	if m < 0 {
		m = 0
	}
	rep := SanitizeReport{In: len(jobs), SiteProcs: m}
	out := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		// Rule 2.
		reqOK, allocOK := j.ReqProcs > 0, j.AllocProcs > 0
		switch {
		case !reqOK && !allocOK:
			rep.Rule2Dropped++
			continue
		case reqOK && !allocOK && j.Status == 1:
			j.AllocProcs = j.ReqProcs
			rep.Rule2Fixed++
		case reqOK && allocOK && j.ReqProcs != j.AllocProcs:
			j.ReqProcs = j.AllocProcs
			rep.Rule2Fixed++
		}
		// Rule 1.
		if m > 0 && j.Procs() > m {
			rep.Rule1TooWide++
			continue
		}
		// Rule 3.
		if j.Runtime <= 0 {
			rep.Rule3NoRuntime++
			continue
		}
		// Rule 4.
		if j.ReqTime > 0 && j.Runtime > j.ReqTime {
			if opts.Rule4 == Rule4Drop {
				rep.Rule4Dropped++
				continue
			}
			j.Runtime = j.ReqTime
			rep.Rule4Clipped++
		}
		// Rule 5.
		if opts.RequireEstimate && j.ReqTime <= 0 {
			rep.Rule5NoEstimate++
			continue
		}
		out = append(out, j)
	}
	bySubmit := func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) }
	if !slices.IsSortedFunc(out, bySubmit) {
		slices.SortStableFunc(out, bySubmit)
		rep.Reordered = true
	}
	rep.Out = len(out)
	return out, rep
}
