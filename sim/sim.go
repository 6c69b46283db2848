package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/fedsched/fedsched/plan"
)

// Job is a job of a replay: what the site is told (procs, estimate, window,
// money, class keys) plus what only the simulator knows, its actual runtime.
type Job struct {
	ID       int64
	Submit   int64 // release time: the job is submitted and may start from here
	Runtime  int64 // actual runtime; the job finishes this long after it starts
	Estimate int64 // the user's estimate; the site kills the job at the end of its reservation
	Procs    int
	Deadline int64 // latest end; plan.Forever for none
	Fee      float64
	Penalty  float64
	// Hard marks a HARD deadline (Yeo's high urgency class); only the
	// LibraSLA strategy treats it differently.
	Hard  bool
	User  string
	Group string
	App   string
	Queue string // the trace's queue; only runtime forecasts use it
}

func (j Job) planJob() plan.Job {
	return plan.Job{ID: j.ID, Procs: j.Procs, Estimate: j.Estimate, Release: j.Submit, Deadline: j.Deadline,
		Fee: j.Fee, Penalty: j.Penalty, User: j.User, Group: j.Group, App: j.App}
}

// Record is what happened to one job.
type Record struct {
	Job
	Decision plan.Placement // the admission decision at submission
	// Planned is the start the site promised at submission: the start of
	// its reservation (conservative backfilling), or, under the queue
	// policies, which promise none, the earliest fit in the plan then (what
	// a user asking would be told). Promised is false if the job was not
	// accepted (or no fit exists).
	Planned  int64
	Promised bool
	Started  bool
	Start    int64 // start time, if started
	End      int64 // when it stopped running, if started
	Reserved int64 // length of its reservation when it stopped (after any growth)
	Killed   bool  // cut at the end of its reservation before it finished
	Expired  bool  // accepted into a queue, and its window closed before it started
	// Forecast is the runtime forecast the core was given at submission
	// (Config.Predictor); 0 for none.
	Forecast int64
	// NodeFailed is set when a processor failed under the job, or a
	// failure took its reservation away; Restarts counts how often it was
	// placed again after a failure hit it while running.
	NodeFailed bool
	Restarts   int
}

// Ran is how long the job actually occupied its processors.
func (r Record) Ran() int64 { return r.End - r.Start }

// Observer learns of every job that finishes while the replay runs, in the
// order they finish. Admission tests that learn online (runtime statistics)
// implement it.
type Observer interface {
	Finished(now int64, r *Record)
}

// Predictor forecasts a job's runtime when it is submitted, for the LTTR
// policy's key (plan.Job.Forecast). It learns of finished jobs like an
// Observer, and Run calls Predict at a job's submission after every job that
// finished by then, so a forecast can only use jobs completed before it.
// Predict must not read the job's Runtime (only the simulator knows it);
// it returns seconds, 0 for no forecast (the core then uses the estimate).
type Predictor interface {
	Observer
	Predict(now int64, j *Job) int64
}

// Config configures a single-site replay.
type Config struct {
	// Name names the site in reports.
	Name string
	// Site configures the scheduling core.
	Site plan.Config
	// Observer, if not nil, is told of every finished job.
	Observer Observer
	// Predictor, if not nil, forecasts every job's runtime at its
	// submission (Record.Forecast, plan.Job.Forecast) and is told of every
	// finished job, after Observer.
	Predictor Predictor
	// SoftDeadlines makes the jobs' deadlines targets to measure
	// (ComputeDeadlineMetrics) rather than windows: the core sees them only
	// under a deadline policy (EDF, LTTR), which orders by them and never
	// holds a job back for one; under the other policies jobs are submitted
	// without a deadline. Off, every policy gets the deadlines as they are
	// (conservative rejects a job whose deadline it cannot meet).
	SoftDeadlines bool
	// Progress, if not nil, is called now and then with the number of jobs
	// submitted so far.
	Progress func(submitted int)
	// Standing lists standing reservations (maintenance windows, sessions)
	// laid over the replay as fixed reservations. Jobs whose window they
	// leave no room in are rejected at submission. Default: none.
	Standing []plan.Standing
	// Failures, if its rates are set, makes processors fail and be
	// repaired during the replay (see failures.go). Default: none.
	Failures FailureConfig
}

// Result is the outcome of a replay.
type Result struct {
	Name    string
	Procs   int
	Records []Record // in the order of the input jobs
	Events  int      // distinct event times processed
	// Fixed reports the standing reservations, if any: they earn nothing
	// and are kept out of the job metrics.
	Fixed *FixedReport
}

// completion is a job's pending end: it finishes at its start plus its
// runtime, or is killed at the end of its reservation, whichever is first.
// gen invalidates the event when the reservation is extended.
type completion struct {
	at  int64
	idx int32 // index of the record
	gen int32
}

// completions is a min-heap of completions in (time, record index) order.
// It is kept by hand rather than through container/heap: that boxes every
// pushed and popped value in an interface, an allocation per job.
type completions []completion

func (c completion) before(o completion) bool {
	if c.at != o.at {
		return c.at < o.at
	}
	return c.idx < o.idx
}

func (h *completions) push(c completion) {
	q := append(*h, c)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].before(q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
	*h = q
}

func (h *completions) pop() completion {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].before(q[l]) {
			m = r
		}
		if !q[m].before(q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// popDue calls f with the record index of every completion due at t that is
// still current (gens invalidates the others), in (time, index) order.
func (h *completions) popDue(t int64, gens []int32, f func(idx int32)) {
	for len(*h) > 0 && (*h)[0].at == t {
		c := h.pop()
		if c.gen == gens[c.idx] {
			f(c.idx)
		}
	}
}

// apply carries out a core decision for record r (index i) at t: a start,
// or a later kill time; either way the job's end is scheduled anew.
func (h *completions) apply(r *Record, i int32, d plan.Decision, t int64, gens []int32) {
	switch d.Kind {
	case plan.DecideExpire:
		// Its window closed before it could start: it never runs, and
		// Settle counts its SLA as violated.
		r.Expired = true
		return
	case plan.DecideStart:
		r.Started, r.Start = true, t
	}
	r.Reserved = d.End - r.Start
	gens[i]++
	h.push(completion{at: min(r.Start+r.Runtime, d.End), idx: i, gen: gens[i]})
}

// ended records that the job stopped at t: finished, or killed at the end
// of its reservation if it needed longer.
func (r *Record) ended(t int64) {
	r.End = t
	r.Killed = plan.Killed(r.Start+r.Runtime, t)
}

// Run replays jobs, which must be sorted by Submit and have distinct IDs,
// on one site. It is deterministic: the same input gives the same result.
//
// At each event time t the order is: jobs that end at t (completions and
// kills), then jobs submitted at t (in input order), then one scheduling
// pass. Jobs the pass starts with a zero runtime end at t too, in a second
// round at the same time.
func Run(ctx context.Context, jobs []Job, cfg Config) (*Result, error) {
	var fx *FixedPlan
	if len(cfg.Standing) > 0 {
		var err error
		if fx, err = LayStanding(jobs, cfg.Standing, cfg.Site.Procs); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		cfg.Site.Fixed = append(slices.Clip(cfg.Site.Fixed), fx.Specs...)
	}
	site, err := plan.NewSite(cfg.Site)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	res := &Result{Name: cfg.Name, Procs: cfg.Site.Procs, Records: make([]Record, len(jobs))}
	index := newJobIndex(jobs)
	for i, j := range jobs {
		if i > 0 && j.Submit < jobs[i-1].Submit {
			return nil, fmt.Errorf("sim: job %d submitted at %d before job %d at %d: %w", j.ID, j.Submit, jobs[i-1].ID, jobs[i-1].Submit, ErrUnsorted)
		}
		if fx != nil && j.ID <= 0 {
			return nil, fmt.Errorf("sim: job id %d: ids must be positive with standing reservations: %w", j.ID, ErrDuplicateJob)
		}
		if !index.add(j.ID, int32(i)) {
			return nil, fmt.Errorf("sim: job %d: %w", j.ID, ErrDuplicateJob)
		}
		res.Records[i].Job = j
	}
	soft := cfg.SoftDeadlines && !cfg.Site.Policy.DeadlineOrdered()
	fails := newFailureProcess(cfg.Failures, cfg.Site.Procs)
	gens := make([]int32, len(jobs))
	var pending completions
	next := 0
	wake := plan.Forever
	for {
		t := wake
		if next < len(jobs) && jobs[next].Submit < t {
			t = jobs[next].Submit
		}
		if len(pending) > 0 && pending[0].at < t {
			t = pending[0].at
		}
		if t == plan.Forever {
			break
		}
		// Failures and repairs only happen while there is work to do.
		if ft := fails.next(); ft < t {
			t = ft
		}
		res.Events++
		if res.Events&0x3ff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("sim: %w", err)
			}
			if cfg.Progress != nil {
				cfg.Progress(next)
			}
		}
		pending.popDue(t, gens, func(i int32) {
			r := &res.Records[i]
			r.ended(t)
			site.End(t, r.ID)
			if cfg.Observer != nil {
				cfg.Observer.Finished(t, r)
			}
			if cfg.Predictor != nil {
				cfg.Predictor.Finished(t, r)
			}
		})
		for fails.due(t) {
			if fails.isRepair() {
				site.NodeUp(t)
				fails.repaired(t)
				continue
			}
			hit, lost := site.NodeDown(t, fails.pick(site.Down()))
			fails.failed(t)
			if hit != 0 {
				i := index.of(hit)
				r := &res.Records[i]
				gens[i]++ // its completion will not come
				r.End, r.Killed, r.NodeFailed = t, true, true
				// The job is placed again from now inside its window, to
				// run from the start (the thesis's restart of disabled
				// jobs); if it cannot be, its SLA is violated.
				pj := jobs[i].planJob()
				pj.Release = t
				if pl := site.Submit(t, pj); pl.OK() {
					r.Restarts++
					r.Started = false
				}
			}
			for _, id := range lost {
				res.Records[index.of(id)].NodeFailed = true
			}
		}
		for next < len(jobs) && jobs[next].Submit == t {
			if fx != nil && fx.Excludes(jobs[next]) {
				res.Records[next].Decision = plan.Placement{Reason: plan.ReasonRejectedNoGap}
			} else {
				pj := jobs[next].planJob()
				if soft {
					pj.Deadline = plan.Forever
				}
				if cfg.Predictor != nil {
					j := jobs[next] // a copy: the predictor cannot change the input
					pj.Forecast = max(0, cfg.Predictor.Predict(t, &j))
					res.Records[next].Forecast = pj.Forecast
				}
				pl := site.Submit(t, pj)
				res.Records[next].Decision = pl
				res.Records[next].Planned, res.Records[next].Promised = plannedStart(site, pl, pj, t)
			}
			next++
		}
		for _, d := range site.Pass(t) {
			i := index.of(d.JobID)
			pending.apply(&res.Records[i], i, d, t, gens)
		}
		wake = site.NextWake(t)
	}
	if cfg.Progress != nil {
		cfg.Progress(next)
	}
	if fx != nil {
		r := fx.Report(res.Records)
		res.Fixed = &r
	}
	return res, nil
}

// plannedStart is the start promised to a job at its submission (see
// Record.Planned).
func plannedStart(site *plan.Site, pl plan.Placement, j plan.Job, t int64) (int64, bool) {
	switch {
	case !pl.OK():
		return 0, false
	case pl.Reason != plan.ReasonQueued:
		return pl.Start, true
	}
	return site.Plan().EarliestFit(j.Procs, j.Estimate, max(t, j.Release), plan.Forever)
}

// jobIndex maps job ids to their index in the input. Traces number their
// jobs densely (SWF: 1, 2, 3, ...), so it is a slice over the id range
// when that range is not much larger than the job count, and a map
// otherwise.
type jobIndex struct {
	lo    int64
	dense []int32 // index+1 of the job with id lo+k at k; 0 for none
	m     map[int64]int32
}

func newJobIndex(jobs []Job) jobIndex {
	if len(jobs) == 0 {
		return jobIndex{m: map[int64]int32{}}
	}
	lo, hi := jobs[0].ID, jobs[0].ID
	for _, j := range jobs {
		lo, hi = min(lo, j.ID), max(hi, j.ID)
	}
	// hi-lo is compared without overflow: ids may span all of int64.
	if hi-lo >= 0 && uint64(hi-lo) < 2*uint64(len(jobs)) {
		return jobIndex{lo: lo, dense: make([]int32, hi-lo+1)}
	}
	return jobIndex{m: make(map[int64]int32, len(jobs))}
}

// add records that job id is at index i; false if id is already there.
func (x *jobIndex) add(id int64, i int32) bool {
	if x.dense != nil {
		k := id - x.lo
		if x.dense[k] != 0 {
			return false
		}
		x.dense[k] = i + 1
		return true
	}
	if _, dup := x.m[id]; dup {
		return false
	}
	x.m[id] = i
	return true
}

// of returns the index of job id, which must have been added.
func (x *jobIndex) of(id int64) int32 {
	if x.dense != nil {
		return x.dense[id-x.lo] - 1
	}
	return x.m[id]
}
