package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// jobID is the id of the seq-th job of a site; ids sort in submission order.
func jobID(site string, seq uint64) string { return fmt.Sprintf("%s.%012d", site, seq) }

// seqOf parses the sequence number out of a job id of this site.
func seqOf(site, id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, site+".")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(rest, 10, 64)
	return v, err == nil
}

// submitOp decides one submission.
type submitOp struct {
	ctx   context.Context
	req   *fedschedv1.SubmitJobRequest
	hash  []byte
	reply chan submitResult
}

type submitResult struct {
	job      *fedschedv1.Job
	replayed bool
	err      error
	// deferred, if not 0, is the core id of a job being delegated: the
	// reply comes when the delegation ends.
	deferred int64
}

func (o *submitOp) run(n *Node, now int64) func(error) {
	res := n.submit(o.ctx, o.req, o.hash, now)
	return func(err error) {
		if res.deferred != 0 && err == nil {
			if lj := n.live[res.deferred]; lj != nil && offering(lj) {
				n.deferred[res.deferred] = func(r submitResult) { o.reply <- r }
				return
			}
			res = n.jobResult(res.deferred)
		}
		if err != nil && res.err == nil {
			res = submitResult{err: fmt.Errorf("storing the decision failed: %w: %w", ErrUnavailable, err)}
		}
		o.reply <- res
	}
}

// jobResult is the reply with job seq's record as it stands (this turn's
// writes first).
func (n *Node) jobResult(seq int64) submitResult {
	if lj := n.live[seq]; lj != nil {
		return submitResult{job: proto.Clone(lj.job()).(*fedschedv1.Job)}
	}
	rec, err := n.jobRecord(jobID(n.cfg.Site, uint64(seq)))
	if err != nil {
		return submitResult{err: err}
	}
	return submitResult{job: proto.Clone(rec.Job).(*fedschedv1.Job)}
}

// userKey is the stored form of a submission's idempotency key, "" if it
// has none. Keys are their user's: another user's key never replays (and
// so never reveals) someone else's job.
func userKey(req *fedschedv1.SubmitJobRequest) string {
	if req.GetIdempotencyKey() == "" {
		return ""
	}
	return req.GetSpec().GetUser() + "/" + req.GetIdempotencyKey()
}

func (n *Node) submit(ctx context.Context, req *fedschedv1.SubmitJobRequest, hash []byte, now int64) submitResult {
	key := userKey(req)
	if key != "" {
		if rec, ok := n.pending.keyed(key); ok {
			return replay(rec, hash)
		}
		ir, err := n.deps.Store.GetIdempotencyKey(ctx, key)
		switch {
		case err == nil:
			rec, err := n.deps.Store.GetJob(ctx, ir.JobID)
			if err == nil {
				return replay(rec, hash)
			}
			if !errors.Is(err, store.ErrNotFound) {
				return submitResult{err: fmt.Errorf("%w: %w", ErrUnavailable, err)}
			}
		case !errors.Is(err, store.ErrNotFound):
			return submitResult{err: fmt.Errorf("%w: %w", ErrUnavailable, err)}
		}
	}
	spec := req.GetSpec()
	if limit, have := n.cfg.Limits.WithDefaults().MaxPendingJobs, n.pendingOf(spec.GetUser()); have >= limit {
		return submitResult{err: fmt.Errorf("user %s has %d pending jobs at site %s, the most it allows (limits.max_pending_jobs); cancel some or wait for them to start: %w",
			spec.GetUser(), have, n.cfg.Site, ErrLimitReached)}
	}
	if key != "" {
		if res, refused := n.checkKeyLimit(ctx, spec.GetUser()); refused {
			return res
		}
	}
	n.nextSeq++
	seq := n.nextSeq
	id := jobID(n.cfg.Site, seq)
	pj := plan.Job{ID: int64(seq), Procs: int(spec.GetProcs()), Estimate: spec.GetEstimateSeconds(), Release: now,
		Deadline: plan.Forever, User: spec.GetUser(), App: spec.GetApp()}
	if r := spec.GetRelease(); r != nil {
		pj.Release = max(now, r.AsTime().Unix())
	}
	hasSLA := spec.GetDeadline() != nil
	if hasSLA {
		pj.Deadline = spec.GetDeadline().AsTime().Unix()
		pj.Fee, pj.Penalty = spec.GetFee(), spec.GetPenalty()
	}
	job := &fedschedv1.Job{Id: id, Spec: proto.Clone(spec).(*fedschedv1.JobSpec), Site: n.cfg.Site, OriginSite: n.cfg.Site,
		SubmitTime: toTime(now)}
	job.Route = []*fedschedv1.RouteHop{{Site: n.cfg.Site, Reason: fedschedv1.Reason_REASON_UNSPECIFIED, Message: "submitted", Time: toTime(now)}}
	rec := store.JobRecord{Job: job, IdempotencyKey: key, BodyHash: hash}
	lj := &liveJob{seq: int64(seq), j: job, rec: rec, pj: pj, sla: hasSLA}
	if err := n.agentSubmit(lj, now); err != nil {
		return submitResult{err: err}
	}
	if offering(lj) {
		// Offered to peers: the reply waits for the offer's end (the
		// agent's reply period bounds it).
		return submitResult{deferred: lj.seq}
	}
	return submitResult{job: proto.Clone(lj.job()).(*fedschedv1.Job)}
}

// acceptLocal records that the site accepted lj with placement pl: its
// reservation (not under the queue policies), its SLA and its state.
func (n *Node) acceptLocal(lj *liveJob, pl plan.Placement, now int64) {
	job, pj, id := lj.job(), lj.pj, lj.job().GetId()
	reason, msg := fedschedv1.Reason_REASON_PLACED_IN_FULL, "accepted with a reservation for its full estimate"
	switch pl.Reason {
	case plan.ReasonOverbooked:
		reason, msg = fedschedv1.Reason_REASON_OVERBOOKED, fmt.Sprintf("overbooked into a gap of %d of its %d estimated seconds with PoF %.3f", pl.End-pl.Start, pj.Estimate, pl.PoF)
	case plan.ReasonQueued:
		reason, msg = fedschedv1.Reason_REASON_UNSPECIFIED, fmt.Sprintf("queued (%s policy): starts when processors are free", n.pol)
	}
	if pl.Reason != plan.ReasonQueued {
		api, over := n.reservationOf(pj.Procs, pl, pj.Estimate)
		job.Reservation, job.Pof, job.Overbooked = api, pl.PoF, over
	}
	if lj.sla {
		job.SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN
		n.pending.putSLA(store.SLARecord{JobID: id, Outcome: job.SlaOutcome, Fee: pj.Fee, Penalty: pj.Penalty, PoF: pl.PoF})
	}
	lj.rec = n.setState(job, lj.rec, fedschedv1.JobState_JOB_STATE_PENDING, reason, msg, now)
	n.live[lj.seq] = lj
}

// acfOffering is the state message of a job offered under ACF; recovery
// tells such a job from one that had no local slot by it.
const acfOffering = "this site would not start the job now (ACF): offering it to peers that would"

// keyed finds a job submitted with key earlier in the current turn.
func (c *changes) keyed(key string) (store.JobRecord, bool) {
	for _, r := range c.jobs {
		if r.IdempotencyKey == key {
			return r, true
		}
	}
	return store.JobRecord{}, false
}

func replay(rec store.JobRecord, hash []byte) submitResult {
	if !bytes.Equal(rec.BodyHash, hash) {
		return submitResult{err: fmt.Errorf("idempotency key %q was used for job %s with a different request: %w", rec.IdempotencyKey, rec.ID(), ErrIdempotencyConflict)}
	}
	return submitResult{job: proto.Clone(rec.Job).(*fedschedv1.Job), replayed: true}
}

func rejectReason(pl plan.Placement, pj plan.Job, site string, now int64) (fedschedv1.Reason, string) {
	switch pl.Reason {
	case plan.ReasonRejectedRisk:
		if pl.TooFewSamples {
			return fedschedv1.Reason_REASON_REJECTED_RISK, fmt.Sprintf("not overbooked: only %s: the site does not bet on a slot shorter than the estimate before its runtime statistics are large enough, and no slot for the full estimate fits the window", samplesText(pl.Samples))
		}
		return fedschedv1.Reason_REASON_REJECTED_RISK, "every gap in the job's window is too risky for the site's acceptance test"
	case plan.ReasonRejectedTooWide:
		return fedschedv1.Reason_REASON_REJECTED_TOO_WIDE, fmt.Sprintf("the job needs %d processors; site %s has fewer", pj.Procs, site)
	case plan.ReasonRejectedInvalid:
		return fedschedv1.Reason_REASON_REJECTED_DEADLINE_UNREACHABLE,
			fmt.Sprintf("the deadline %s cannot be met: it is earlier than now plus the estimate", time.Unix(pj.Deadline, 0).UTC().Format(time.RFC3339))
	}
	return fedschedv1.Reason_REASON_REJECTED_NO_GAP, fmt.Sprintf("no slot of %d processors for %d s between %s and the deadline",
		pj.Procs, pj.Estimate, time.Unix(max(now, pj.Release), 0).UTC().Format(time.RFC3339))
}

// cancelOp cancels one job.
type cancelOp struct {
	id    string
	msg   string
	reply chan submitResult
}

func (o *cancelOp) run(n *Node, now int64) func(error) {
	res := n.cancel(o.id, o.msg, now)
	return func(err error) {
		if err != nil && res.err == nil {
			res = submitResult{err: fmt.Errorf("storing the cancellation failed: %w: %w", ErrUnavailable, err)}
		}
		o.reply <- res
	}
}

func (n *Node) cancel(id, note string, now int64) submitResult {
	seq, ok := seqOf(n.cfg.Site, id)
	lj := n.live[int64(seq)]
	if ok {
		if res, done := n.agentCancelAway(id, int64(seq), lj, note, now); done {
			return res
		}
	}
	if ok && lj != nil && lj.cancelled {
		// Cancelled while running, its process not ended yet: cancelling
		// again is harmless.
		return submitResult{job: proto.Clone(lj.job()).(*fedschedv1.Job)}
	}
	if !ok || lj == nil {
		return submitResult{err: errJobNotLive}
	}
	msg := "cancelled by the user"
	if note != "" {
		msg += ": " + note
	}
	n.agent.Cancel(now, n.keyOf(lj))
	n.applyOwn(now)
	if lj.job().GetState() == fedschedv1.JobState_JOB_STATE_RUNNING {
		// The processors stay reserved until the process has ended.
		lj.cancelled = true
		if lj.sla {
			lj.job().SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED
			n.pending.putSLA(store.SLARecord{JobID: id, Outcome: lj.job().SlaOutcome, Fee: lj.pj.Fee, Penalty: lj.pj.Penalty, PoF: lj.job().GetPof(), DecidedAt: time.Unix(now, 0)})
		}
		lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, msg, now)
		n.kill(lj, now)
		return submitResult{job: proto.Clone(lj.job()).(*fedschedv1.Job)}
	}
	n.finish(lj, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, msg, fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED, now)
	return submitResult{job: proto.Clone(lj.job()).(*fedschedv1.Job)}
}

// errJobNotLive marks a cancel of a job that is not pending or running; the
// handler turns it into NotFound or FailedPrecondition from the store.
var errJobNotLive = errors.New("job not live")

// siteOp reads the site's load.
type siteOp struct{ reply chan *fedschedv1.Site }

func (o *siteOp) run(n *Node, now int64) func(error) {
	s := n.siteInfo(now)
	return func(error) { o.reply <- s }
}

func (n *Node) siteInfo(now int64) *fedschedv1.Site {
	return &fedschedv1.Site{Name: n.cfg.Site, Procs: int32(n.procs), Policy: n.pol.String(), FreeProcs: int32(n.site.Plan().Free(now)),
		RunningJobs: int32(n.site.Running()), PendingJobs: int32(n.site.Waiting()), Version: n.deps.Version, Executor: n.cfg.Executor,
		TimeScale: n.cfg.TimeScale, Now: timestamppb.New(time.Unix(now, 0)), Overbooking: n.adm != nil, PofMax: n.pofMax(),
		NextPull: n.nextPullTime(), Pulling: n.pulling()}
}

// pofMax is the site's PoF threshold, 0 when it does not overbook.
func (n *Node) pofMax() float64 {
	if n.adm == nil {
		return 0
	}
	return n.cfg.Overbooking.PoFMax
}

// pendingOf counts the PENDING jobs of a user (limits.max_pending_jobs).
func (n *Node) pendingOf(user string) int { return n.pendingBy[user] }
