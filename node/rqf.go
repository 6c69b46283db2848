package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// RQF, the pull transfer policy, live. The rules are the site agent's
// (site/rqf.go): a site with idle processors and nothing waiting asks the
// location policy's ranking of its peers for the jobs waiting in their
// queues; a peer lists the jobs submitted there that wait, may still be
// delegated, have not been at the asker and fit its free processors, in
// queue order; the asker holds a slot for each job its own policy would
// start now (the quote rule with start_now, quote in federation.go) and
// asks to take it; the peer takes the job out of its plan and hands it
// over. The hand-over is an ordinary delegation from the peer's side: it
// records (durably) that it agrees to the taker's hold, agrees with
// Agree, and from then on outcome reports, termination, status and
// explain work as for any delegated job. A node answers queue requests
// only if its operator opted in (delegation.disclose_queue): the answer
// discloses its waiting jobs.

// rqfHandingOver starts the state message of a job handed over to a peer
// that took it from the queue; recovery tells such a job by it.
const rqfHandingOver = "taken from the queue (RQF) by"

// rqfState is when the site last asked its peers for work and whether a
// round is on its way; the loop owns it.
type rqfState struct {
	last    int64 // site.NeverPulled: never
	pulling bool
	wake    int64 // pullWake as of the last pass (plan.Forever: none)
	// out counts the site agent's queue requests and takes whose answer
	// has not come back (agentfed.go).
	out int
}

func newRQFState() rqfState { return rqfState{last: site.NeverPulled, wake: plan.Forever} }

// pullEvery is RQF's interval in seconds of the site's clock.
func (n *Node) pullEvery() int64 { return max(int64(n.fed.PullInterval/time.Second), 1) }

// pullWake is when the site asks its peers by itself (site.NextPull): on
// the interval's grid of the site's clock while it stays idle, so that a
// scaled or held clock (the stepped replay) triggers it, as the agent's
// NextWake does in the simulator.
func (n *Node) pullWake(now int64) int64 {
	if n.fed.Transfer != delegation.RQF || !n.federating() || n.pulling() {
		return plan.Forever
	}
	every := n.pullEvery()
	return site.NextPull(n.idle(now), n.rqf.last, now, every, site.PullOffset(n.cfg.Site, every))
}

// pulling reports whether an RQF round is on its way: the node's own
// round, or the agent's queue requests and takes not answered yet.
func (n *Node) pulling() bool { return n.rqf.pulling || n.rqf.out > 0 }

// nextPullTime is the loop's pull wake for GetSite (at or before now: the
// site asks at the end of this turn): nil when the site does not ask by
// itself.
func (n *Node) nextPullTime() *timestamppb.Timestamp {
	if w := n.rqf.wake; w < plan.Forever {
		return timestamppb.New(time.Unix(w, 0))
	}
	return nil
}

// pull is RQF's trigger, the agent's rule (site.PullDue): after a turn in
// which something happened to the site (event: a submission, a job's end,
// a peer's request or answer, its own wake) that leaves it idle, it asks
// the peers for their queues, at most once per interval of its clock. The
// round runs beside the loop; until it is over the site starts no other
// (and reports it, GetSite's pulling).
func (n *Node) pull(ctx context.Context, now int64, event bool) {
	if !event || n.fed.Transfer != delegation.RQF || !n.federating() || n.rqf.pulling || n.agent != nil {
		return
	}
	free := n.idle(now)
	if !site.PullDue(free, n.rqf.last, now, n.pullEvery()) {
		return
	}
	n.rqf.last, n.rqf.pulling = now, true
	n.log.Debug("asking peers for work (RQF)", "free", free)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		n.pullRound(ctx, free)
		n.send(ctx, pullDoneOp{}) //nolint:errcheck // only when the node stops
	}()
}

// pullDoneOp ends a pull round.
type pullDoneOp struct{}

func (pullDoneOp) run(n *Node, _ int64) func(error) {
	n.rqf.pulling = false
	return nil
}

// siteEvent marks the requests that are something happening to the site,
// as the agent's events (Submit, End, Step): after a turn with one, an
// idle RQF site checks whether to ask its peers for work. Reads (status,
// listings, watches, explain), the node's own housekeeping and a peer's
// queue request (as for the agent: an idle site does not ask because a
// peer does) are not.
type siteEvent interface{ siteEvent() }

func (*submitOp) siteEvent()         {}
func (*cancelOp) siteEvent()         {}
func (*reservationOp) siteEvent()    {}
func (*quoteOp) siteEvent()          {}
func (*agreeOp) siteEvent()          {}
func (*releaseOp) siteEvent()        {}
func (*reportOp) siteEvent()         {}
func (*terminateOp) siteEvent()      {}
func (*deliveredOp) siteEvent()      {}
func (*delegationResult) siteEvent() {}
func (*takeOp) siteEvent()           {}
func (*pickOp) siteEvent()           {}

// anyEvent reports whether a turn's requests hold a site event.
func anyEvent(batch []op) bool {
	for _, o := range batch {
		if _, ok := o.(siteEvent); ok {
			return true
		}
	}
	return false
}

// idle is the free processors of a site that has nothing waiting, 0 when
// it is not idle: the agent's condition for pulling (site.IdleProcs).
func (n *Node) idle(now int64) int { return site.IdleProcs(n.site, now) }

// pullRound asks the ranked peers, in rank order, for their queues and
// takes from each what this site would start now.
func (n *Node) pullRound(ctx context.Context, free int) {
	n.histMu.Lock()
	hist := maps2(n.history)
	n.histMu.Unlock()
	ranked := site.PullRanking(n.peerCandidates(), n.cfg.Site, hist, delegation.LocationConfig{MaxCandidates: n.fed.MaxCandidates, Jitter: n.fed.Jitter},
		rand.New(rand.NewPCG(uint64(n.now()), 0x5eed)))
	for _, c := range ranked {
		qctx, cancel := context.WithTimeout(ctx, n.fed.QuoteTimeout)
		cl, err := n.client(qctx, c.Site, c.Addr)
		var r *fedschedv1.PeerQueueResponse
		if err == nil {
			r, err = cl.PeerQueue(qctx, &fedschedv1.PeerQueueRequest{Site: n.cfg.Site, FreeProcs: int32(free)})
		}
		cancel()
		n.metrics.queuesAsked.WithLabelValues(c.Site, queueAnswer(err)).Inc()
		if err != nil {
			n.log.Debug("queue request refused or failed", "peer", c.Site, "err", err)
			continue
		}
		if len(r.GetJobs()) == 0 {
			continue
		}
		p := &pickOp{from: c.Site, jobs: r.GetJobs(), reply: make(chan []picked, 1)}
		if n.send(ctx, p) != nil {
			return
		}
		picks, err := await(ctx, n, (<-chan []picked)(p.reply))
		if err != nil {
			return
		}
		for _, pk := range picks {
			n.take(ctx, c.Site, c.Addr, pk)
		}
	}
}

// take asks the origin to hand a job over under this site's hold; if it
// does not, the hold is dropped at once (it would expire anyway).
func (n *Node) take(ctx context.Context, site, addr string, pk picked) {
	tctx, cancel := context.WithTimeout(ctx, n.fed.QuoteTimeout)
	defer cancel()
	cl, err := n.client(tctx, site, addr)
	if err == nil {
		_, err = cl.Take(tctx, &fedschedv1.TakeRequest{Site: n.cfg.Site, JobId: pk.job, HoldId: pk.hold})
	}
	n.metrics.takes.WithLabelValues(site, queueAnswer(err)).Inc()
	if err == nil {
		n.log.Info("took a waiting job from a peer's queue (RQF)", "peer", site, "job", pk.job, "hold", pk.hold)
		return
	}
	n.log.Debug("take refused or failed; releasing the hold", "peer", site, "job", pk.job, "err", err)
	// If the origin did record the hand-over and its reply was lost, its
	// Agree now finds no hold and it keeps the job: never both.
	o := &releaseOp{id: pk.hold, reply: make(chan error, 1)}
	if n.send(ctx, o) == nil {
		await(ctx, n, (<-chan error)(o.reply)) //nolint:errcheck // an unreleased hold expires by itself
	}
}

func queueAnswer(err error) string {
	if err != nil {
		return "refused"
	}
	return "ok"
}

// picked is a job this site holds a slot for, to take from a peer.
type picked struct{ job, hold string }

// pickOp holds, for each job of a peer's queue this site's own policy
// would start now, a slot that starts now (the agent's pick): the quote
// rule with start_now, so that the same test decides a pulled job and an
// offered one.
type pickOp struct {
	from  string
	jobs  []*fedschedv1.QueuedJob
	reply chan []picked
}

func (o *pickOp) run(n *Node, now int64) func(error) {
	var out []picked
	for _, q := range o.jobs {
		if _, known := n.byOrigin[originKey(o.from, q.GetJobId())]; known || n.site.Plan().Free(now) == 0 {
			continue
		}
		resp, err := n.quote(&fedschedv1.QuoteRequest{OriginSite: o.from, OriginJobId: q.GetJobId(), Spec: q.GetSpec(), Route: q.GetRoute(),
			HoldSeconds: n.fed.HoldSeconds, StartNow: true}, now)
		if err != nil || resp.GetOffer() == nil {
			continue
		}
		out = append(out, picked{job: q.GetJobId(), hold: resp.GetOffer().GetHoldId()})
	}
	return func(error) { o.reply <- out }
}

// queueOp answers a peer's queue request.
type queueOp struct {
	req   *fedschedv1.PeerQueueRequest
	reply chan queueResult
}

type queueResult struct {
	jobs []*fedschedv1.QueuedJob
	err  error
}

func (o *queueOp) run(n *Node, _ int64) func(error) {
	jobs, err := n.disclose(o.req)
	return func(error) { o.reply <- queueResult{jobs: jobs, err: err} }
}

// disclose lists the jobs waiting here that the agent's disclosure rule
// (site.Discloses) lets the asking site see, in queue order, at most
// site.MaxDisclosed.
func (n *Node) disclose(req *fedschedv1.PeerQueueRequest) ([]*fedschedv1.QueuedJob, error) {
	if !n.fed.DiscloseQueue {
		return nil, fmt.Errorf("site %s does not disclose its queue (delegation.disclose_queue is off): %w", n.cfg.Site, ErrQueueNotDisclosed)
	}
	var out []*fedschedv1.QueuedJob
	rules := n.rules()
	for _, id := range n.site.WaitingIDs(nil) {
		lj := n.live[id]
		// The tests that need no decoding first; the rest read a frozen
		// job without thawing it (freeze.go).
		if !n.waitsHere(lj) || lj.pj.Procs > int(req.GetFreeProcs()) {
			continue
		}
		j := lj.peek()
		if !site.Discloses(rules, j.GetOriginSite(), routeOf(j.GetRoute()), lj.pj.Procs, req.GetSite(), int(req.GetFreeProcs())) {
			continue
		}
		out = append(out, &fedschedv1.QueuedJob{JobId: j.GetId(), Spec: proto.Clone(j.GetSpec()).(*fedschedv1.JobSpec),
			Route: cloneRoute(j.GetRoute())})
		if len(out) == site.MaxDisclosed {
			break
		}
	}
	return out, nil
}

// waitsHere reports whether lj waits for its start in this site's plan,
// not cancelled and not being delegated: the node's side of "waiting"
// (the agent's plan holds only such jobs).
func (n *Node) waitsHere(lj *liveJob) bool {
	return lj != nil && lj.state() == fedschedv1.JobState_JOB_STATE_PENDING && !lj.cancelled && n.inflight[lj.seq] == nil
}

func cloneRoute(r []*fedschedv1.RouteHop) []*fedschedv1.RouteHop {
	out := make([]*fedschedv1.RouteHop, len(r))
	for i, h := range r {
		out[i] = proto.Clone(h).(*fedschedv1.RouteHop)
	}
	return out
}

// takeOp hands a waiting job over to the peer that asks to take it.
type takeOp struct {
	req   *fedschedv1.TakeRequest
	reply chan error
}

func (o *takeOp) run(n *Node, now int64) func(error) {
	err := n.handOver(o.req, now)
	return func(cerr error) {
		if err == nil && cerr != nil {
			err = fmt.Errorf("storing the hand-over failed: %w: %w", ErrUnavailable, cerr)
		}
		o.reply <- err
	}
}

// handOver takes a waiting job out of the plan and records, before the
// reply, that the site agrees to the taker's hold: the delegation then
// runs as any other (delegate, settleTake), and survives a restart.
func (n *Node) handOver(req *fedschedv1.TakeRequest, now int64) error {
	if !n.fed.DiscloseQueue {
		return fmt.Errorf("site %s does not disclose its queue (delegation.disclose_queue is off): %w", n.cfg.Site, ErrQueueNotDisclosed)
	}
	seq, ok := seqOf(n.cfg.Site, req.GetJobId())
	if fl := n.inflight[int64(seq)]; ok && fl != nil && fl.take && fl.peer == req.GetSite() && fl.hold == req.GetHoldId() {
		return nil // a retried take
	}
	lj := n.live[int64(seq)]
	// The disclosure rule again: only a job the taker may see may be
	// taken (its free processors are its hold's business).
	if !ok || !n.waitsHere(lj) || !site.Discloses(n.rules(), lj.job().GetOriginSite(), routeOf(lj.job().GetRoute()), lj.pj.Procs, req.GetSite(), lj.pj.Procs) ||
		!n.site.Cancel(now, lj.seq) {
		return fmt.Errorf("job %s does not wait at %s for %s to take: %w", req.GetJobId(), n.cfg.Site, req.GetSite(), ErrNotWaiting)
	}
	if n.adm != nil {
		n.adm.Forget(lj.seq) // it never ran here: nothing to learn
	}
	lj.job().Reservation, lj.job().Pof, lj.job().Overbooked = nil, 0, false
	msg := fmt.Sprintf("%s %s, which would start it now: agreeing to its hold %s", rqfHandingOver, req.GetSite(), req.GetHoldId())
	lj.job().Route = append(lj.job().Route, &fedschedv1.RouteHop{Site: n.cfg.Site, PeerSite: req.GetSite(), Reason: fedschedv1.Reason_REASON_DELEGATED,
		Message: msg, Time: toTime(now), Taken: true})
	lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_DELEGATED, msg, now)
	n.inflight[lj.seq] = &inflight{seq: lj.seq, job: lj.job(), peer: req.GetSite(), hold: req.GetHoldId(), take: true}
	n.launch = append(n.launch, lj.seq)
	return nil
}

// isHandOver tells a stored job being handed over to a taker.
func isHandOver(j *fedschedv1.Job) bool { return strings.HasPrefix(j.GetMessage(), rqfHandingOver) }

// settleTake agrees to the taker's hold for a job handed over under RQF.
// After a restart the hold id is asked of the taker; a taker that no
// longer holds a slot (or agreed already) settles it.
func (n *Node) settleTake(ctx context.Context, fl inflight, res *delegationResult) *delegationResult {
	if fl.hold == "" {
		a, err := n.findAgreement(ctx, fl.peer, fl.job.GetId())
		switch {
		case err != nil:
			n.retryDelegation(ctx, fl)
			return &delegationResult{seq: -1}
		case a != nil && agreedState(a.GetState()):
			res.agreed, res.peer = a, fl.peer
			return res
		case a == nil || a.GetState() != fedschedv1.AgreementState_AGREEMENT_STATE_PENDING:
			res.err = fmt.Errorf("%s no longer holds a slot for the job", fl.peer)
			return res
		}
		fl.hold = a.GetId()
	}
	return n.agreeWith(ctx, fl, fl.peer, n.addrOf(fl.peer), fl.hold, res)
}

// PeerQueue and Take, the RQF calls of FederationService.

func (s *fedService) PeerQueue(ctx context.Context, req *fedschedv1.PeerQueueRequest) (*fedschedv1.PeerQueueResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetSite() == "" || req.GetFreeProcs() < 0 {
		return nil, ToStatus(fmt.Errorf("site is required and free_procs must be >= 0: %w", ErrInvalidRequest))
	}
	if s.n.agent != nil {
		return stepAs[*fedschedv1.PeerQueueResponse](ctx, s, req)
	}
	o := &queueOp{req: req, reply: make(chan queueResult, 1)}
	if err := s.n.send(ctx, o); err != nil {
		return nil, ToStatus(err)
	}
	r, err := await(ctx, s.n, (<-chan queueResult)(o.reply))
	if e := firstErr(err, r.err); e != nil {
		return nil, ToStatus(e)
	}
	return &fedschedv1.PeerQueueResponse{Jobs: r.jobs}, nil
}

func (s *fedService) Take(ctx context.Context, req *fedschedv1.TakeRequest) (*fedschedv1.TakeResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetSite() == "" || req.GetJobId() == "" || req.GetHoldId() == "" {
		return nil, ToStatus(fmt.Errorf("site, job_id and hold_id are required: %w", ErrInvalidRequest))
	}
	if s.n.agent != nil {
		return stepAs[*fedschedv1.TakeResponse](ctx, s, req)
	}
	o := &takeOp{req: req, reply: make(chan error, 1)}
	if err := s.n.send(ctx, o); err != nil {
		return nil, ToStatus(err)
	}
	err, werr := await(ctx, s.n, (<-chan error)(o.reply))
	if e := firstErr(werr, err); e != nil {
		return nil, ToStatus(e)
	}
	return &fedschedv1.TakeResponse{}, nil
}
