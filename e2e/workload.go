package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/overbook"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/sim"
)

// ReplayJob is one job of a replay: submitted to Site At virtual seconds
// after the replay begins.
type ReplayJob struct {
	Site string
	At   int64
	// Procs, Estimate and Runtime (virtual seconds) are the trace job's,
	// scaled to the site and the replay.
	Procs             int32
	Estimate, Runtime int64
	User, App         string
	// TraceID is the job's number in the trace.
	TraceID int64
}

// SliceSite is a site a trace slice is spread over (sim.SliceSite).
type SliceSite = sim.SliceSite

// SliceInfo describes a built slice (sim.SliceInfo).
type SliceInfo = sim.SliceInfo

// TraceSlice chooses jobs of a real trace and fits them to a federation
// and a time budget: sim.TraceSlice, whose jobs a scenario's workload
// block replays in the simulator too.
type TraceSlice sim.TraceSlice

// Build returns the slice's jobs as replay jobs, in submission order.
func (ts TraceSlice) Build() ([]ReplayJob, SliceInfo, error) {
	jobs, info, err := sim.TraceSlice(ts).Build()
	if err != nil {
		return nil, info, err
	}
	out := make([]ReplayJob, len(jobs))
	for i, j := range jobs {
		out[i] = ReplayJob{Site: j.Site, At: j.At, Procs: int32(j.Procs), Estimate: j.Estimate, Runtime: j.Runtime, User: j.User, App: j.App, TraceID: j.TraceID}
	}
	return out, info, nil
}

// spec is the job as submitted at now, with the simulator's SLA terms:
// deadline = now + 2 x estimate, fee = procs x estimate hours, penalty =
// fee.
func (j ReplayJob) spec(now time.Time) *fedschedv1.JobSpec {
	fm := overbook.FeeModel{PenaltyRatio: 1}
	return &fedschedv1.JobSpec{Procs: j.Procs, EstimateSeconds: j.Estimate, SimRuntimeSeconds: j.Runtime, User: j.User, App: j.App,
		Deadline: timestamppb.New(now.Add(time.Duration(2*j.Estimate) * time.Second)),
		Fee:      fm.Fee(int(j.Procs), j.Estimate), Penalty: fm.Penalty(int(j.Procs), j.Estimate)}
}

// ReplayProgress is how far a replay has come.
type ReplayProgress struct {
	// Total jobs; Submitted so far; Answered by their site (accepted,
	// delegated or rejected, or failed: Errors); Settled: answered and
	// no longer live (ended, rejected, or the outcome of a delegated job
	// reported to its origin).
	Total, Submitted, Answered, Settled, Errors int
	// Delegated and Rejected count the answers.
	Delegated, Rejected int
	// Virtual is the shared clock's time since the replay began; Wall
	// the wall-clock time.
	Virtual, Wall time.Duration
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Progress, if not nil, is called every Interval (default 500 ms)
	// and once at the end, from one goroutine.
	Progress func(ReplayProgress)
	Interval time.Duration
	// Concurrency bounds the submissions in flight (default 64).
	Concurrency int
	// SettleTimeout bounds the wait for the last jobs to settle after
	// the last submission, in wall time; 0 waits as long as ctx allows.
	SettleTimeout time.Duration
}

// ReplayResult is the end of a replay.
type ReplayResult struct {
	ReplayProgress
	// FirstErr is the first submission that failed.
	FirstErr error
	// SubmitWall is the wall time the submissions took; the rest of Wall
	// was waiting for the last jobs to settle.
	SubmitWall time.Duration
	// TimedOut: SettleTimeout passed with jobs still live.
	TimedOut bool
	// Promised maps the id of every job its site accepted at submission
	// (PENDING in the answer) to the start of the reservation the answer
	// gave it: the start promised at submission.
	Promised map[string]time.Time
}

// Replay submits jobs at their times on the shared clock, each to its
// site, through the site's public API, with SLA terms as the simulator
// gives them (deadline = submission + 2 x estimate, fee = procs x estimate
// in hours, penalty = fee), then waits until every job has settled.
func (c *Cluster) Replay(ctx context.Context, jobs []ReplayJob, o ReplayOptions) (ReplayResult, error) {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	sites := map[string]*Site{}
	for _, j := range jobs {
		if sites[j.Site] == nil {
			s, err := c.mustSite(j.Site)
			if err != nil {
				return ReplayResult{}, err
			}
			sites[j.Site] = s
		}
	}
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b ReplayJob) int { return int(a.At - b.At) })
	var submitted, answered, errs, delegated, rejected atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	promised := map[string]time.Time{} // under errMu
	wall0, virt0 := time.Now(), c.clk.Now()
	run := fmt.Sprintf("replay-%d", wall0.UnixNano())

	// The progress reporter also decides when everything has settled.
	var settled atomic.Int64
	allSubmitted := make(chan struct{})
	var submitWall time.Duration
	report := func() ReplayProgress {
		return ReplayProgress{Total: len(jobs), Submitted: int(submitted.Load()), Answered: int(answered.Load()), Settled: int(settled.Load()),
			Errors: int(errs.Load()), Delegated: int(delegated.Load()), Rejected: int(rejected.Load()),
			Virtual: c.clk.Now().Sub(virt0), Wall: time.Since(wall0)}
	}
	// live counts the jobs still live at their origin.
	live := func(ctx context.Context) (int, error) {
		n := 0
		for _, s := range sites {
			js, err := listJobs(ctx, s, []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_PENDING,
				fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_DELEGATED})
			if err != nil {
				return 0, err
			}
			for _, j := range js {
				if j.GetOriginSite() == s.Name {
					n++
				}
			}
		}
		return n, nil
	}

	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	submitErr := func(err error) {
		errs.Add(1)
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	dispatch := func() error {
		defer close(allSubmitted)
		for i, j := range jobs {
			due := virt0.Add(time.Duration(j.At) * time.Second)
			if d := c.clk.Wall(due.Sub(c.clk.Now())); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			submitted.Add(1)
			wg.Go(func() {
				defer func() { <-sem }()
				// The deadline counts from the submission: deadline =
				// now + 2 x estimate, on the shared clock.
				spec := func() *fedschedv1.JobSpec { return j.spec(c.clk.Now()) }
				req := &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("%s-%d", run, i), Spec: spec()}
				var r *fedschedv1.SubmitJobResponse
				var err error
				// Refusals of a deadline that came too close do not count
				// against the tries: each retry is a fresh submission.
				for try, late := 0, 0; try < 5 && late < 100; try++ {
					sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					r, err = sites[j.Site].Client.SubmitJob(sctx, req)
					cancel()
					code := status.Code(err)
					if code == codes.InvalidArgument && strings.Contains(err.Error(), "deadline") {
						// The request took longer to arrive than the
						// job's slack (an overloaded test machine): the
						// site refused it and stored nothing; submit it
						// as of now.
						req.Spec = spec()
						try--
						late++
						continue
					}
					if code != codes.Unavailable && code != codes.ResourceExhausted {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					submitErr(fmt.Errorf("job %d of the trace at %s: %w", j.TraceID, j.Site, err))
					return
				}
				answered.Add(1)
				switch r.GetJob().GetState() {
				case fedschedv1.JobState_JOB_STATE_PENDING:
					if rs := r.GetJob().GetReservation(); rs.GetStart() != nil {
						errMu.Lock()
						promised[r.GetJob().GetId()] = rs.GetStart().AsTime()
						errMu.Unlock()
					}
				case fedschedv1.JobState_JOB_STATE_DELEGATED:
					delegated.Add(1)
				case fedschedv1.JobState_JOB_STATE_REJECTED:
					rejected.Add(1)
				}
			})
		}
		return nil
	}
	dispatchErr := make(chan error, 1)
	go func() {
		err := dispatch()
		wg.Wait()
		submitWall = time.Since(wall0)
		dispatchErr <- err
	}()

	var res ReplayResult
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	var settleDeadline <-chan time.Time
	dispatched := false
	for {
		select {
		case <-ctx.Done():
			if !dispatched {
				<-dispatchErr
			}
			res.ReplayProgress, res.FirstErr = report(), firstErr
			return res, ctx.Err()
		case err := <-dispatchErr:
			if err != nil {
				res.ReplayProgress, res.FirstErr = report(), firstErr
				return res, err
			}
			dispatched = true
			dispatchErr = nil
			res.SubmitWall = submitWall
			if o.SettleTimeout > 0 {
				settleDeadline = time.After(o.SettleTimeout)
			}
		case <-tick.C:
		case <-settleDeadline:
			res.TimedOut = true
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := live(lctx)
		cancel()
		if err == nil {
			// Answered jobs that are no longer live have settled; a job
			// answered and listed live at once is counted live.
			settled.Store(max(0, answered.Load()-int64(n)))
		}
		p := report()
		if o.Progress != nil {
			o.Progress(p)
		}
		if dispatched && (err == nil && n == 0 || res.TimedOut) {
			res.ReplayProgress, res.FirstErr = p, firstErr
			// Every submission has returned (dispatch waited for them).
			res.Promised = promised
			return res, nil
		}
	}
}
