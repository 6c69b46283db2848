package e2e

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// SteppedResult is the end of a stepped replay.
type SteppedResult struct {
	// Origin is the shared clock's time at time 0 of the trace.
	Origin time.Time
	// Steps is how many times the clock was held; Unquiet how many of
	// them went on before the sites were quiet (see quiet).
	Steps, Unquiet int
	// FirstUnquiet is the trace time of the first step that went on
	// before the sites were quiet (-1: none did).
	FirstUnquiet int64
}

func (r *SteppedResult) unquiet(t int64) {
	if r.Unquiet == 0 {
		r.FirstUnquiet = t - r.Origin.Unix()
	}
	r.Unquiet++
}

// ReplayStepped replays jobs the way the simulator does, one event time
// after the other, each job at its site through the public API: the shared
// clock runs (at its scale) to the next time at which something is due — a
// submission, the end of a running job, the start of a reservation — and
// is held at the end of that second until the sites have done what was due
// by then (quiet); the jobs due then are submitted one at a time, in the
// order given (stable by time). So the live sites see every submission at
// its very second, after the ends of that second, in the simulator's
// order, however long anything takes in wall time. It returns when no job
// is live.
//
// With align (RQF's pull interval, in the sites' clock), time 0 is a whole
// multiple of it, so that the sites ask their peers for work on the same
// grid as the simulator's agents (site.NextPull), and the replay starts
// holding the clock one interval before time 0, so that every site's last
// round before the first job was at a second the simulator's agent has too.
func (c *Cluster) ReplayStepped(ctx context.Context, jobs []ReplayJob, align time.Duration) (SteppedResult, error) {
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b ReplayJob) int { return int(a.At - b.At) })
	sites := map[string]*Site{}
	for _, j := range jobs {
		if sites[j.Site] == nil {
			s, err := c.mustSite(j.Site)
			if err != nil {
				return SteppedResult{}, err
			}
			sites[j.Site] = s
		}
	}
	// Time 0 is a whole second, so that the trace's seconds are the
	// clock's.
	res := SteppedResult{Origin: c.clk.Now().Truncate(time.Second).Add(time.Second), FirstUnquiet: -1}
	next := res.Origin.Unix()
	if a := int64(align / time.Second); a > 0 {
		o := (next + a + a - 1) / a * a // at least one interval ahead
		res.Origin, next = time.Unix(o, 0), o-a
	}
	defer c.clk.HoldAt(time.Time{})
	run := fmt.Sprintf("stepped-%d", time.Now().UnixNano())
	i := 0
	for {
		// Held at the end of the second: the sites read whole seconds,
		// and what is due in it, at whatever fraction, happens first.
		t := next
		hold := time.Unix(t, 0).Add(time.Second - time.Nanosecond)
		c.clk.HoldAt(hold)
		for d := c.clk.Wall(hold.Sub(c.clk.Now())); d > 0; d = c.clk.Wall(hold.Sub(c.clk.Now())) {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(d):
			}
		}
		res.Steps++
		q, err := c.quietAt(ctx, t, 5*time.Second)
		if err != nil {
			return res, err
		}
		if !q.quiet {
			res.unquiet(t)
		}
		for ; i < len(jobs) && res.Origin.Unix()+jobs[i].At <= t; i++ {
			j := jobs[i]
			if i > 0 && jobs[i-1].At == j.At {
				// The previous submission may have changed what the
				// sites gossip.
				if q, err = c.quietAt(ctx, t, 5*time.Second); err != nil {
					return res, err
				} else if !q.quiet {
					res.unquiet(t)
				}
			}
			req := &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("%s-%d", run, i), Spec: j.spec(time.Unix(t, 0))}
			for try := 0; ; try++ {
				sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err = sites[j.Site].Client.SubmitJob(sctx, req)
				cancel()
				if code := status.Code(err); (code != codes.Unavailable && code != codes.ResourceExhausted) || try == 5 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				return res, fmt.Errorf("job %d of the trace at %s: %w", j.TraceID, j.Site, err)
			}
		}
		if i < len(jobs) {
			q, err = c.quietAt(ctx, t, 5*time.Second) // what the submissions started
			if err != nil {
				return res, err
			}
			next = min(q.next, res.Origin.Unix()+jobs[i].At)
		} else {
			if q, err = c.quietAt(ctx, t, 5*time.Second); err != nil {
				return res, err
			}
			if q.live == 0 {
				return res, nil
			}
			next = q.next
		}
		if next <= t || next == math.MaxInt64 {
			next = t + 1 // something the scan cannot date: step a second
		}
	}
}

// quietness is what one scan of the sites found.
type quietness struct {
	quiet bool
	// next is the earliest time after t at which a job is due to end or a
	// reservation to start (MaxInt64: none).
	next int64
	// live counts the jobs pending, running or delegated.
	live int
}

// quietAt waits, on a clock held at t, until the sites have done what was
// due by t, as the simulator has before it takes a submission at t: every
// job due to end by t has ended, every reservation due by t has started,
// every delegated job that ended has been reported to its origin, every
// delegation (an RQF hand-over among them) is settled, no RQF round of
// asking peers for work is on its way or due by t, and every site's
// gossip shows every peer's outlook as of t. Each condition
// is on state the sites report, not a wall-clock wait; giveUp (wall time)
// only bounds a wait that something no scan sees would make endless.
func (c *Cluster) quietAt(ctx context.Context, t int64, giveUp time.Duration) (quietness, error) {
	until := time.Now().Add(giveUp)
	for {
		q, err := c.quiet(ctx, t)
		if err != nil || q.quiet || time.Now().After(until) {
			return q, err
		}
		select {
		case <-ctx.Done():
			return q, ctx.Err()
		case <-time.After(10 * time.Millisecond): // polling faster only loads the machine
		}
	}
}

func (c *Cluster) quiet(ctx context.Context, t int64) (quietness, error) {
	q := quietness{quiet: true, next: math.MaxInt64}
	delegated := map[string]int{} // origin -> its jobs a peer owns
	remote := map[string]int{}    // origin -> its jobs live at a peer
	view := map[string]*fedschedv1.Member{}
	var seen [][]*fedschedv1.Member
	for _, s := range c.Sites() {
		// A turn of the site's loop at t: it publishes its outlook as of
		// t, as the simulator's membership view reads it.
		gs, err := s.Client.GetSite(ctx, &fedschedv1.GetSiteRequest{})
		if err != nil {
			return q, fmt.Errorf("site %s: %w", s.Name, err)
		}
		if si := gs.GetSite(); si.GetPulling() {
			q.quiet = false // an RQF round is on its way
		} else if p := si.GetNextPull(); p != nil {
			if p.GetSeconds() <= t {
				q.quiet = false // the site asks for work by now
			}
			q.next = min(q.next, p.GetSeconds())
		}
		js, err := listJobs(ctx, s, []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_PENDING,
			fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_DELEGATED})
		if err != nil {
			return q, err
		}
		for _, j := range js {
			if j.GetOriginSite() == s.Name {
				q.live++
			}
			switch {
			case j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED:
				delegated[j.GetOriginSite()]++
				continue
			case j.GetOriginSite() != s.Name:
				remote[j.GetOriginSite()]++
			}
			r := j.GetReservation()
			switch {
			case j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING && j.GetReason() == fedschedv1.Reason_REASON_DELEGATED:
				q.quiet = false // a delegation (an RQF hand-over) is on its way
			case j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING && r != nil:
				if r.GetStart().GetSeconds() <= t {
					q.quiet = false // its start is due
				}
				q.next = min(q.next, r.GetStart().GetSeconds())
			case j.GetState() == fedschedv1.JobState_JOB_STATE_RUNNING && j.GetStartTime() != nil:
				start := j.GetStartTime().GetSeconds()
				end := start + j.GetSpec().GetSimRuntimeSeconds()
				if r != nil {
					// Killed after the slot's length from its start,
					// after that last second.
					end = min(end, start+r.GetEnd().GetSeconds()-r.GetStart().GetSeconds()+1)
				}
				if end <= t {
					q.quiet = false // its end is due
				}
				q.next = min(q.next, end)
			}
		}
		r, err := s.Fed.ListMembers(ctx, &fedschedv1.ListMembersRequest{})
		if err != nil {
			return q, fmt.Errorf("members of %s: %w", s.Name, err)
		}
		for _, m := range r.GetMembers() {
			if m.GetLocal() {
				view[m.GetSite()] = m
			}
		}
		seen = append(seen, r.GetMembers())
	}
	for o, n := range delegated {
		if remote[o] != n {
			q.quiet = false // an outcome is on its way to its origin
		}
	}
	for _, ms := range seen {
		for _, m := range ms {
			v := view[m.GetSite()]
			if v != nil && (m.GetFreeNow() != v.GetFreeNow() || m.GetFree_1H() != v.GetFree_1H() || m.GetFree_4H() != v.GetFree_4H() || m.GetFree_24H() != v.GetFree_24H()) {
				q.quiet = false // gossip has not spread a digest yet
			}
		}
	}
	return q, nil
}
