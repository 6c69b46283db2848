package sim

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/fedsched/fedsched/plan"
)

// ErrFixedFlag is returned for a malformed --fixed-reservations value.
var ErrFixedFlag = errors.New("bad fixed-reservations value: want EVERY,LENGTH[,SHARE], e.g. 6h,1h or 1d,4h,0.5")

// maxDays bounds the day count of a span so that it never overflows.
const maxDays = 1_000_000

// ParseSpan parses a span of time as a whole number of seconds: a Go
// duration ("90m", "1h30m", "45s") optionally preceded by a whole number of
// days with the unit d ("1d", "7d", "1d12h"). The span must be positive and
// a whole number of seconds.
func ParseSpan(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty span: %w", ErrFixedFlag)
	}
	var days int64
	rest := s
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		ds := s[:i]
		if ds == "" || strings.TrimLeft(ds, "0123456789") != "" {
			return 0, fmt.Errorf("span %q: days must be a whole number: %w", s, ErrFixedFlag)
		}
		n, err := strconv.ParseInt(ds, 10, 64)
		if err != nil || n > maxDays {
			return 0, fmt.Errorf("span %q: too many days: %w", s, ErrFixedFlag)
		}
		days, rest = n, s[i+1:]
	}
	var secs int64
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("span %q: %v: %w", s, err, ErrFixedFlag)
		}
		if d%time.Second != 0 {
			return 0, fmt.Errorf("span %q: not a whole number of seconds: %w", s, ErrFixedFlag)
		}
		secs = int64(d / time.Second)
	}
	if secs < 0 {
		return 0, fmt.Errorf("span %q: negative: %w", s, ErrFixedFlag)
	}
	total := days*86400 + secs
	if total <= 0 {
		return 0, fmt.Errorf("span %q: not positive: %w", s, ErrFixedFlag)
	}
	return total, nil
}

// parseShare returns ceil(share*siteProcs) for a share in (0, 1], written
// as a decimal ("0.5"), a fraction ("1/3") or a percentage ("50%"). It is
// exact: no floating point.
func parseShare(s string, siteProcs int) (int, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	num := strings.TrimSpace(strings.TrimSuffix(s, "%"))
	// Plain decimals and fractions only: no exponents, which would let a
	// value like 1e-99999999 cost unbounded work.
	if num == "" || len(num) > 32 || strings.Trim(num, "0123456789./") != "" {
		return 0, fmt.Errorf("share %q: not a number: %w", s, ErrFixedFlag)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("share %q: not a number: %w", s, ErrFixedFlag)
	}
	if pct {
		r.Quo(r, big.NewRat(100, 1))
	}
	if r.Sign() <= 0 || r.Cmp(big.NewRat(1, 1)) > 0 {
		return 0, fmt.Errorf("share %s: not in (0, 1]: %w", r.RatString(), ErrFixedFlag)
	}
	r.Mul(r, big.NewRat(int64(siteProcs), 1))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return int(q.Int64()), nil
}

// StandingFromFlag parses the value of --fixed-reservations,
// EVERY,LENGTH[,SHARE]: every EVERY, starting at start, hold
// ceil(SHARE*siteProcs) processors (SHARE defaults to 1, the whole site) for
// LENGTH, until until (0 for no end). EVERY and LENGTH are spans as
// ParseSpan reads them ("6h", "1d", "1d12h"); LENGTH must not exceed EVERY.
// SHARE is in (0, 1] ("0.5", "1/4", "25%"). It never panics; every error
// wraps ErrFixedFlag. The rule has no weekday filter and Epoch 0; set them
// on the result if needed.
func StandingFromFlag(s string, siteProcs int, start, until int64) (plan.Standing, error) {
	if siteProcs <= 0 {
		return plan.Standing{}, fmt.Errorf("site of %d processors: %w", siteProcs, ErrFixedFlag)
	}
	parts := strings.Split(s, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return plan.Standing{}, fmt.Errorf("%q: %w", s, ErrFixedFlag)
	}
	every, err := ParseSpan(parts[0])
	if err != nil {
		return plan.Standing{}, fmt.Errorf("EVERY: %w", err)
	}
	length, err := ParseSpan(parts[1])
	if err != nil {
		return plan.Standing{}, fmt.Errorf("LENGTH: %w", err)
	}
	if length > every {
		return plan.Standing{}, fmt.Errorf("%q: LENGTH longer than EVERY: %w", s, ErrFixedFlag)
	}
	procs := siteProcs
	if len(parts) == 3 {
		if procs, err = parseShare(parts[2], siteProcs); err != nil {
			return plan.Standing{}, fmt.Errorf("SHARE: %w", err)
		}
	}
	st := plan.Standing{Name: strings.TrimSpace(s), Procs: procs, Start: start, Every: every, Length: length, Until: until}
	if err := st.Validate(); err != nil {
		return plan.Standing{}, fmt.Errorf("%q: %v: %w", s, err, ErrFixedFlag)
	}
	return st, nil
}

// StandingSpecs lays out the instances of the rules that intersect
// [from, to), clipped to it, as fixed reservations with ids firstID,
// firstID-1, firstID-2, ... (rule by rule, in time order within a rule).
// It also returns the processor-seconds they hold.
func StandingSpecs(st []plan.Standing, from, to, firstID int64) ([]plan.FixedSpec, int64, error) {
	var out []plan.FixedSpec
	var area int64
	id := firstID
	for i := range st {
		if err := st[i].Validate(); err != nil {
			return nil, 0, err
		}
		for _, w := range st[i].Instances(from, to) {
			s, e := max(w.Start, from), min(w.End, to)
			out = append(out, plan.FixedSpec{ID: id, Name: st[i].Name, Procs: st[i].Procs, Start: s, End: e})
			area += int64(st[i].Procs) * (e - s)
			id--
		}
	}
	return out, area, nil
}

// AddStanding adds every instance of the rules that intersects [from, to),
// clipped to it, to site as a fixed reservation, as of time from, and
// returns the processor-seconds they hold. It is meant for a fresh site
// before a replay. Ids are negative (job ids are positive): -1, -2, ...,
// below any negative id already in the plan. It does not displace anything:
// on a site with jobs, an instance that collides with one fails with
// plan.ErrConflict; instances that collide with each other beyond the
// site's size fail with plan.ErrNoFit. On error the site holds the
// instances added so far; discard it.
func AddStanding(site *plan.Site, st []plan.Standing, from, to int64) (int64, error) {
	first := int64(-1)
	for _, r := range site.Plan().Reservations() {
		first = min(first, r.ID-1)
	}
	specs, area, err := StandingSpecs(st, from, to, first)
	if err != nil {
		return 0, err
	}
	for _, f := range specs {
		if _, err := site.AddFixed(from, f, false); err != nil {
			return 0, fmt.Errorf("standing reservation %q: %w", f.Name, err)
		}
	}
	return area, nil
}

// patternCap bounds the margin StandingRange adds for the rules' cycle.
const patternCap = 28 * 86400

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// lcmCapped returns lcm(a, b), or patternCap if it exceeds it.
func lcmCapped(a, b int64) int64 {
	if a >= patternCap || b >= patternCap {
		return patternCap
	}
	l := a / gcd(a, b) * b // a, b < patternCap: no overflow
	return min(l, patternCap)
}

// StandingRange returns the range [from, to) over which a replay of jobs
// lays out the instances of the rules: from the first submission to the
// last submission plus the longest estimate plus the rules' common cycle
// (the least common multiple of their periods, a week counting as the
// period of a weekday filter), capped at 28 days. Past to the replay has no
// fixed reservations; the margin makes sure that every job submitted has a
// full cycle of them after it, so that a job that finds no room in
// [submit, to) would find none later either (exactly so when the common
// cycle is at most 28 days, which covers hourly, daily and weekly rules).
func StandingRange(jobs []Job, st []plan.Standing) (from, to int64) {
	if len(jobs) == 0 {
		return 0, 0
	}
	from, last := plan.Forever, plan.Never
	var est int64
	for _, j := range jobs {
		from, last = min(from, j.Submit), max(last, j.Submit)
		est = max(est, j.Estimate)
	}
	cycle := int64(1)
	for i := range st {
		c := max(st[i].Every, 1)
		if len(st[i].Weekdays) > 0 {
			c = lcmCapped(c, 7*86400)
		}
		cycle = lcmCapped(cycle, c)
	}
	to = last + min(est, plan.Forever/4) + cycle
	return from, min(to, plan.Forever)
}

// FixedPlan is the standing reservations of one replay, laid out.
type FixedPlan struct {
	// Standing are the rules.
	Standing []plan.Standing
	// Procs is the site size.
	Procs int
	// From and To are the range of the instances (see StandingRange).
	From, To int64
	// Specs are the instances as fixed reservations, clipped to [From, To),
	// with ids -1, -2, ...
	Specs []plan.FixedSpec
	// ReservedProcSeconds is the processor-seconds the instances hold.
	ReservedProcSeconds int64
	walls               *plan.Profile // the instances alone
}

// LayStanding lays out the rules over the range StandingRange gives for
// jobs on a site of procs processors. It fails if a rule is invalid, wider
// than the site, or if the rules together hold more processors than the site
// has at some time.
func LayStanding(jobs []Job, st []plan.Standing, procs int) (*FixedPlan, error) {
	if procs <= 0 {
		return nil, fmt.Errorf("standing reservations on %d processors: %w", procs, plan.ErrInvalid)
	}
	for i := range st {
		if st[i].Procs > procs {
			return nil, fmt.Errorf("standing reservation %q: %d procs on a %d-processor site: %w", st[i].Name, st[i].Procs, procs, plan.ErrExceedsCapacity)
		}
	}
	from, to := StandingRange(jobs, st)
	specs, area, err := StandingSpecs(st, from, to, -1)
	if err != nil {
		return nil, err
	}
	walls := plan.NewProfile(procs)
	for _, f := range specs {
		walls.Add(f.Start, f.End, -f.Procs)
	}
	if from < to && walls.MinFree(from, to) < 0 {
		return nil, fmt.Errorf("standing reservations hold more than %d processors at once: %w", procs, plan.ErrNoFit)
	}
	return &FixedPlan{Standing: st, Procs: procs, From: from, To: to, Specs: specs, ReservedProcSeconds: area, walls: walls}, nil
}

// Excludes reports whether the fixed reservations alone leave job j no
// room: j is well formed and fits the site, its window [Submit,
// min(Deadline, To)) is long enough for its estimate, but on a site that
// holds nothing except the fixed reservations there is no slot of
// j.Estimate seconds on j.Procs processors in that window. Such a job can
// never run while the rules stand; the replay should reject it at
// submission (plan.ReasonRejectedNoGap) rather than queue it behind the end
// of the laid-out range. These are the "jobs that could not be placed
// because of" the fixed reservations.
func (fp *FixedPlan) Excludes(j Job) bool {
	if j.Procs <= 0 || j.Procs > fp.Procs || j.Estimate <= 0 {
		return false
	}
	end := min(j.Deadline, fp.To)
	if end-j.Submit < j.Estimate {
		return false
	}
	_, ok := fp.walls.EarliestFit(j.Procs, j.Estimate, j.Submit, end)
	return !ok
}

// overlaps reports whether a fixed reservation holds processors somewhere
// in [from, to).
func (fp *FixedPlan) overlaps(from, to int64) bool {
	from, to = max(from, fp.From), min(to, fp.To)
	return from < to && fp.walls.MinFree(from, to) < fp.Procs
}

// FixedReport is how a replay's fixed reservations are reported. They earn
// nothing and are kept out of the job metrics.
type FixedReport struct {
	// Rules is the number of standing rules.
	Rules int `json:"rules"`
	// Instances is the number of instances laid out.
	Instances int `json:"instances"`
	// ReservedProcSeconds is what the instances hold inside the replay's
	// span, [first submission, makespan); ReservedProcHours the same in
	// processor-hours.
	ReservedProcSeconds int64   `json:"reserved_proc_seconds"`
	ReservedProcHours   float64 `json:"reserved_proc_hours"`
	// Excluded counts the jobs that could not be placed because of the
	// fixed reservations: those Excludes reports, whatever the replay did
	// with them.
	Excluded int `json:"excluded"`
	// RejectedOverlapping counts the jobs the site rejected for want of a
	// gap or for risk whose window overlaps a fixed reservation. It bounds
	// from above the rejections the fixed reservations may have caused
	// (with other work they may have taken the slot a job needed).
	RejectedOverlapping int `json:"rejected_overlapping"`
}

// Report computes the fixed-reservation figures of a replay's records.
func (fp *FixedPlan) Report(records []Record) FixedReport {
	rep := FixedReport{Rules: len(fp.Standing), Instances: len(fp.Specs)}
	makespan := fp.From
	for i := range records {
		r := &records[i]
		if r.Started {
			makespan = max(makespan, r.End)
		}
		if fp.Excludes(r.Job) {
			rep.Excluded++
		}
		switch r.Decision.Reason {
		case plan.ReasonRejectedNoGap, plan.ReasonRejectedRisk:
			if fp.overlaps(r.Submit, min(r.Deadline, plan.Forever)) {
				rep.RejectedOverlapping++
			}
		}
	}
	for _, f := range fp.Specs {
		s, e := max(f.Start, fp.From), min(f.End, makespan)
		if s < e {
			rep.ReservedProcSeconds += int64(f.Procs) * (e - s)
		}
	}
	rep.ReservedProcHours = float64(rep.ReservedProcSeconds) / 3600
	return rep
}

// ReportFixed lays out the rules over the range of a replay's records
// (StandingRange of their jobs) and reports them: reserved processor-hours
// and the jobs they kept out.
func ReportFixed(records []Record, st []plan.Standing, procs int) (FixedReport, error) {
	jobs := make([]Job, len(records))
	for i := range records {
		jobs[i] = records[i].Job
	}
	fp, err := LayStanding(jobs, st, procs)
	if err != nil {
		return FixedReport{}, err
	}
	return fp.Report(records), nil
}
