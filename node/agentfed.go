package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// The node as the site agent's driver, its federation part
// (docs/architecture.md, "The node as the agent's driver"): a federating
// node that drives its agent carries the agent's messages over the
// federation's gRPC (agentwire.go). A peer's RPC is a message the loop
// Steps into the agent (stepOp); the RPC's response is the answer the Step
// put in Ready. The agent's own messages are sent after the commit of the
// batch that decided them (flushOut, called by commit), by a bounded pool
// of goroutines the node owns (sendWorkers); each RPC's response, or its
// error, comes back to the loop as an op that Steps the answer (answerOp).
// Nothing here retries: the agent resends what it owes (reports,
// Terminates) and asks an agree again when its answer does not come, on
// its own timers (NextWake), and gives up on a quote that does not come
// within its reply period.

// sendQueue is how many of the agent's messages may wait for a sending
// goroutine; one that finds the queue full is dropped (logged): the agent
// resends what it owes, and a quote request it does not get an answer to
// counts as unanswered.
const sendQueue = 4096

// sendWorkers is how many RPCs a node sends at once for its agent.
const sendWorkers = 16

// heldJob is the full spec and route of a peer's job this site holds a
// slot for (a quote, or a job it takes from a peer's queue): the agent
// keeps the job's plan.Job only, and the job record of an accept needs the
// command, environment and route the origin sent. Forgotten at until.
type heldJob struct {
	spec  *fedschedv1.JobSpec
	route []*fedschedv1.RouteHop
	until int64
	// offer is the quote this site answered with (nil: none yet), for
	// GetAgreement's pending agreement.
	offer *fedschedv1.Offer
}

// outCall is one of the agent's messages as the RPC a sending goroutine
// makes.
type outCall struct {
	m      site.Message
	method string
	req    proto.Message
	addr   string
	// then are the calls made after this one, in order, by the same
	// goroutine: an RQF round's queue requests, whose answers the agent
	// takes in the order it asked (its ranking), as the simulator
	// delivers them.
	then []outCall
}

// wire is the node's message codec: a job's spec is the full one the node
// knows (its own job, or a peer's it holds).
func (n *Node) wire() agentWire {
	return agentWire{site: n.cfg.Site, spec: n.fullSpec}
}

// fullSpec is the spec the node keeps for a job (one of its own live jobs
// or a held peer's job), nil if none.
func (n *Node) fullSpec(k site.JobKey) *fedschedv1.JobSpec {
	if k.Site == n.cfg.Site {
		if lj := n.live[k.ID]; lj != nil {
			return lj.peek().GetSpec()
		}
		return nil
	}
	if h, ok := n.held[k]; ok {
		return h.spec
	}
	return nil
}

// stepOp is a peer's federation RPC, Stepped into the agent on the loop.
type stepOp struct {
	req   proto.Message
	reply chan stepResult
}

type stepResult struct {
	resp proto.Message
	err  error
}

func (o *stepOp) run(n *Node, now int64) func(error) {
	resp, err := n.stepPeer(o.req, now)
	return func(cerr error) {
		if cerr != nil && err == nil {
			resp, err = nil, fmt.Errorf("storing the decision failed: %w: %w", ErrUnavailable, cerr)
		}
		o.reply <- stepResult{resp: resp, err: err}
	}
}

// stepPeer Steps a peer's request into the agent and answers it: the
// response is the answer the Step put in Ready; the batch's decisions are
// written (applyReady) and its other messages sent after the commit.
func (n *Node) stepPeer(req proto.Message, now int64) (proto.Message, error) {
	w := n.wire()
	switch r := req.(type) {
	case *fedschedv1.QuoteRequest:
		if err := n.validateSpec(r.GetSpec(), now); err != nil {
			return nil, err
		}
	case *fedschedv1.PeerQueueRequest, *fedschedv1.TakeRequest:
		if !n.fed.DiscloseQueue {
			return nil, fmt.Errorf("site %s does not disclose its queue (delegation.disclose_queue is off): %w", n.cfg.Site, ErrQueueNotDisclosed)
		}
	}
	m, err := w.step(req, now)
	if err != nil {
		return nil, err
	}
	if r, ok := req.(*fedschedv1.TakeRequest); ok {
		// The origin agrees to the taker's hold by this id: one that
		// names no hold of this job would be refused for ever.
		if k, err := keyOfHold(r.GetHoldId()); err != nil || k != m.Job {
			return nil, fmt.Errorf("hold %q is not a hold of job %s: %w", r.GetHoldId(), r.GetJobId(), ErrInvalidRequest)
		}
	}
	// What the node's records settle without the agent, which forgets a
	// job once it has ended here: an agree asked again (a restarted
	// origin) is answered with the agreement, a quote for a job this
	// site took is refused.
	if a := n.agreementOfKey(m.Job); a != nil && a.Role == rolePeer && m.From == a.Origin {
		switch req.(type) {
		case *fedschedv1.AgreeRequest:
			if agreedState(fedschedv1.AgreementState(a.State)) {
				return &fedschedv1.AgreeResponse{Agreement: n.agreementMsg(a)}, nil
			}
		case *fedschedv1.QuoteRequest:
			return refuse(fedschedv1.Reason_REASON_RECEIVED_FROM_PEER, "this site already runs the job under agreement "+a.ID), nil
		}
	}
	if r, ok := req.(*fedschedv1.QuoteRequest); ok {
		if _, known := n.held[m.Job]; !known {
			n.held[m.Job] = heldJob{spec: r.GetSpec(), route: r.GetRoute(), until: now + max(n.fed.HoldSeconds, r.GetHoldSeconds()) + 1}
		}
	}
	n.agent.Step(now, m)
	r := n.agent.Ready()
	resp, rerr := w.response(m, r.Messages, now)
	if i := answerAt(m, r.Messages); i >= 0 {
		r.Messages = slices.Delete(r.Messages, i, i+1)
	}
	n.stepReq = req
	err = n.applyReady(context.Background(), now, r)
	n.stepReq = nil
	if err != nil {
		n.log.Error("site agent decision not applied", "err", err)
	}
	if _, held := n.held[m.Job]; rerr != nil && m.Kind == site.KindAgree && !held {
		// The hold is not known here at all (this site restarted
		// since it quoted, or never quoted): NotFound, as the node's
		// Agree answers; the origin then has nothing to release.
		rerr = fmt.Errorf("no hold %q for job %s of %s at %s: %w", m.Job.String(), wireID(m.Job), m.From, n.cfg.Site, ErrJobNotFound)
	}
	if rerr != nil {
		return nil, rerr
	}
	switch r := resp.(type) {
	case *fedschedv1.QuoteResponse:
		n.metrics.quotesGiven.WithLabelValues(m.From, quoteAnswer(r, nil)).Inc()
		if h, ok := n.held[m.Job]; ok && r.GetOffer() != nil {
			h.offer, h.until = r.GetOffer(), r.GetOffer().GetExpires().AsTime().Unix()
			n.held[m.Job] = h
		} else if ok && h.offer == nil {
			delete(n.held, m.Job)
		}
	case *fedschedv1.ReleaseResponse:
		delete(n.held, m.Job)
	case *fedschedv1.AgreeResponse:
		// Today's answer: the agreement as this site keeps it (its id
		// and the job's id here).
		if a := n.agreementOfKey(m.Job); a != nil && a.Role == rolePeer {
			return &fedschedv1.AgreeResponse{Agreement: n.agreementMsg(a)}, nil
		}
	case *fedschedv1.TerminateResponse:
		if a := n.agreementOfKey(m.Job); a != nil && a.Role == rolePeer {
			return &fedschedv1.TerminateResponse{Agreement: n.agreementMsg(a)}, nil
		}
	}
	return resp, nil
}

// agreementOfKey is the agreement this site keeps for the job key (as
// origin or as the peer that runs it), nil if none.
func (n *Node) agreementOfKey(k site.JobKey) *agreementRec {
	return n.agreements[n.byOrigin[originKey(k.Site, wireID(k))]]
}

// answerOp is the response (or error) of an RPC the node sent for its
// agent: the answer is Stepped on the loop.
type answerOp struct {
	m    site.Message
	resp proto.Message
	err  error
}

func (o *answerOp) run(n *Node, now int64) func(error) {
	peer := o.m.To
	switch o.m.Kind {
	case site.KindQueueRequest:
		n.rqf.out--
		n.metrics.queuesAsked.WithLabelValues(peer, queueAnswer(o.err)).Inc()
	case site.KindTake:
		n.rqf.out--
		n.metrics.takes.WithLabelValues(peer, queueAnswer(o.err)).Inc()
	}
	if o.m.Kind == site.KindQuoteRequest {
		qr, _ := o.resp.(*fedschedv1.QuoteResponse)
		n.metrics.quotesAsked.WithLabelValues(peer, quoteAnswer(qr, o.err)).Inc()
		if lj := n.live[o.m.Job.ID]; lj != nil && o.m.Job.Site == n.cfg.Site {
			// For explain: every asked peer's answer.
			lj.job().QuoteAnswers = append(lj.job().QuoteAnswers, answerOf(peer, qr, o.err, now))
		}
	}
	if o.err != nil {
		n.log.Debug("federation call failed", "to", peer, "kind", o.m.Kind.String(), "job", o.m.Job.String(), "err", o.err)
	}
	a, ok := n.wire().answer(o.m, peer, o.resp, o.err)
	if !ok {
		return nil
	}
	if r, ok := o.resp.(*fedschedv1.PeerQueueResponse); ok {
		// The full specs of the jobs this site may take: the origin's
		// agree to the hold of one makes it this site's job.
		for _, q := range r.GetJobs() {
			if k, err := keyOfID(q.GetJobId()); err == nil {
				n.held[k] = heldJob{spec: q.GetSpec(), route: q.GetRoute(), until: now + n.agentReply()*2}
			}
		}
	}
	if ab, ok := n.absent[o.m.Job]; ok && o.m.Kind == site.KindAgree && ab.peer == o.m.To {
		// The agree is answered: the job leaves agreeing with that peer,
		// and its absence no longer counts (agreeGivenUp).
		delete(n.absent, o.m.Job)
	}
	n.stepResp = o.resp
	n.agent.Step(now, a)
	n.applyOwn(now)
	n.stepResp = nil
	if a.Kind == site.KindAgreed && a.Offer == nil && CodeOf(FromStatus(o.err)) != codes.NotFound {
		// A peer that did not confirm may still hold the slot (it did
		// not say it has no hold): let it go rather than keep it held
		// until it expires, as the node's own core did.
		n.outq = append(n.outq, site.Message{Kind: site.KindRelease, From: n.cfg.Site, To: peer, Job: o.m.Job})
	}
	return nil
}

// awaitPeers waits, before the agent is restored with offers or agrees in
// flight, until gossip knows a peer to ask, at most wait (wall time): an
// offer restored before the membership is known would find no peer and
// fall back to the site at once, as the node's own core avoided by
// waiting for the membership.
func (n *Node) awaitPeers(ctx context.Context, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for len(n.peerCandidates()) == 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	n.log.Info("restoring offers in flight", "peers_known", len(n.peerCandidates()))
}

// inFlight reports whether a saved agent has offers or agrees in flight.
func inFlight(s *site.Saved) bool {
	for _, sj := range s.Jobs {
		if sj.Phase == site.PhaseOffering || sj.Phase == site.PhaseAgreeing {
			return true
		}
	}
	return false
}

// queueAnswer is a queue request's or a take's answer as the RQF metrics
// label it.
func queueAnswer(err error) string {
	if err != nil {
		return "refused"
	}
	return "ok"
}

// rqfRound tells the messages of an RQF round (GetSite's pulling).
func rqfRound(k site.Kind) bool { return k == site.KindQueueRequest || k == site.KindTake }

// agentReply is the agent's reply period in the site's clock.
func (n *Node) agentReply() int64 { return n.siteSeconds(n.fed.QuoteTimeout.Seconds()) }

// queueOut takes the messages of a batch for sending after its commit. An
// owed report or Terminate to a site that has not been an alive member for
// outbox_give_up is given up instead (Agent.GiveUp).
func (n *Node) queueOut(now int64, ms []site.Message) {
	for _, m := range ms {
		if answerKind(m.Kind) == 0 && m.Kind != site.KindRelease {
			n.log.Warn("site agent answer outside a request's Step dropped", "kind", m.Kind.String(), "to", m.To, "job", m.Job.String())
			continue
		}
		if (m.Kind == site.KindReport || m.Kind == site.KindTerminate) && n.givenUp(now, m) {
			continue
		}
		if m.Kind == site.KindAgree && n.agreeGivenUp(now, m) {
			continue
		}
		m.Route = slices.Clone(m.Route)
		m.Jobs = slices.Clone(m.Jobs)
		if rqfRound(m.Kind) {
			n.rqf.out++
		}
		n.outq = append(n.outq, m)
	}
}

// givenUp applies outbox_give_up to an owed message (outbox.go's rule):
// the agreement records since when the site it is owed to has not been an
// alive member; after outbox_give_up the node gives up on it.
func (n *Node) givenUp(now int64, m site.Message) bool {
	a := n.agreementOfKey(m.Job)
	if a == nil || !n.peerAway(a, m.To, now) {
		return false
	}
	kind := "outcome"
	if m.Kind == site.KindTerminate {
		kind = "terminate"
	}
	a.Undelivered = fmt.Sprintf("gave up delivering the %s to %s at %s: it has not been an alive member since %s",
		kind, m.To, time.Unix(now, 0).UTC().Format(time.RFC3339), time.Unix(a.AbsentSince, 0).UTC().Format(time.RFC3339))
	a.Pending, a.AbsentSince = "", 0
	n.log.Warn("outbox item given up", "agreement", a.ID, "kind", kind, "to", m.To, "why", a.Undelivered)
	n.putAgreement(a, now)
	n.agent.GiveUp(now, m.Job)
	return true
}

// peerAway keeps a.AbsentSince for peer (the site a's message is owed
// to, or its report awaited from): cleared while peer is an alive member,
// set when it is first seen not one. It reports whether peer has not
// been an alive member for outbox_give_up.
func (n *Node) peerAway(a *agreementRec, peer string, now int64) bool {
	switch alive := n.aliveMember(peer); {
	case alive && a.AbsentSince != 0:
		a.AbsentSince = 0
		n.putAgreement(a, now)
	case alive:
	case a.AbsentSince == 0:
		a.AbsentSince = now
		n.putAgreement(a, now)
	default:
		return now-a.AbsentSince >= int64(n.fed.OutboxGiveUp/time.Second)
	}
	return false
}

// reportSweep is how often, in seconds of the site's clock, the node
// looks for delegated jobs whose report comes from a peer gone for
// outbox_give_up (reportsGivenUp).
const reportSweep = 60

// awaitsReport reports whether a is the agreement of a delegated job of
// this site whose report is awaited, nothing else owed on it (a
// Terminate owed is given up by givenUp, as it is resent).
func awaitsReport(a *agreementRec) bool {
	return a.Role == roleOrigin && a.State == delegation.Observed && a.Pending == "" && a.Undelivered == ""
}

// reportsGivenUp applies outbox_give_up to the reports the site awaits:
// once the peer a delegated job went to has not been an alive member for
// that long, the node gives the job up (Agent.GiveUp: its report is no
// longer awaited). Nothing is sent for such a job, so no resend finds
// it: the loop calls this every turn, and it looks at the awaited
// agreements (n.awaited) at most every reportSweep seconds (reportWake
// wakes the loop for it while one is awaited). The absence is the
// agreement's AbsentSince, durable as an owed message's.
func (n *Node) reportsGivenUp(now int64) {
	if !n.federating() || now < n.sweepAt {
		return
	}
	n.sweepAt = now + reportSweep
	for _, id := range slices.Sorted(maps.Keys(n.awaited)) {
		if a := n.agreements[id]; awaitsReport(a) {
			n.reportGivenUp(a, now)
		} else {
			delete(n.awaited, id) // changed without putAgreement
		}
	}
}

// noteAwaited keeps a's entry in n.awaited: there while its report is
// awaited (awaitsReport).
func (n *Node) noteAwaited(a *agreementRec) {
	if !awaitsReport(a) {
		delete(n.awaited, a.ID)
		return
	}
	if n.awaited == nil {
		n.awaited = make(map[string]struct{})
	}
	n.awaited[a.ID] = struct{}{}
}

// reportWake is when the loop next looks for reports to give up.
func (n *Node) reportWake() int64 {
	if len(n.awaited) == 0 {
		return plan.Forever
	}
	return n.sweepAt
}

// reportGivenUp gives up the report of a's delegated job once its peer
// has been away for outbox_give_up. As an agree given up (agreeGivenUp),
// the job ends FAILED, reason PEER_UNREACHABLE, its outcome unknown; the
// agreement says why (Undelivered: the outcome was never delivered).
func (n *Node) reportGivenUp(a *agreementRec, now int64) {
	if !n.peerAway(a, a.Peer, now) {
		return
	}
	k, err := keyOfID(a.JobID)
	if err != nil || !n.agent.GiveUp(now, k) {
		return // not awaited by the agent: nothing to give up
	}
	since := a.AbsentSince
	msg := fmt.Sprintf("gave up awaiting the outcome from %s at %s: it has not been an alive member since %s (delegation.outbox_give_up); the job's outcome is unknown here",
		a.Peer, time.Unix(now, 0).UTC().Format(time.RFC3339), time.Unix(since, 0).UTC().Format(time.RFC3339))
	n.log.Warn("awaited report given up", "job", a.JobID, "agreement", a.ID, "peer", a.Peer, "why", msg)
	a.Undelivered, a.AbsentSince = msg, 0
	n.putAgreement(a, now)
	rec, err := n.jobRecord(a.JobID)
	if err != nil {
		n.log.Error("the record of a job whose report was given up not updated", "job", a.JobID, "err", err)
		return
	}
	j := rec.Job
	if j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
		return
	}
	if j.GetSpec().GetDeadline() != nil {
		j.SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED
		n.pending.putSLA(store.SLARecord{JobID: j.GetId(), Outcome: j.SlaOutcome, Fee: j.GetSpec().GetFee(), Penalty: j.GetSpec().GetPenalty(),
			PoF: j.GetPof(), DecidedAt: time.Unix(now, 0)})
	}
	if j.GetEndTime() == nil {
		j.EndTime = toTime(now)
	}
	n.setState(j, rec, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_PEER_UNREACHABLE, msg, now)
}

// agreeGivenUp applies outbox_give_up to an agree the agent resends: once
// the peer it is for has not been an alive member for that long, the node
// gives up on it (Agent.GiveUp: the job is forgotten). The job is not
// placed here, since the peer may have taken it: it ends FAILED, reason
// PEER_UNREACHABLE, its outcome unknown.
func (n *Node) agreeGivenUp(now int64, m site.Message) bool {
	if n.aliveMember(m.To) {
		delete(n.absent, m.Job)
		return false
	}
	ab, ok := n.absent[m.Job]
	if !ok || ab.peer != m.To {
		// (An agree to another peer: its absence counts from now.)
		n.absent[m.Job] = absence{peer: m.To, since: now}
		return false
	}
	since := ab.since
	if now-since < int64(n.fed.OutboxGiveUp/time.Second) {
		return false
	}
	delete(n.absent, m.Job)
	if !n.agent.GiveUp(now, m.Job) {
		return false
	}
	msg := fmt.Sprintf("gave up agreeing with %s at %s: it has not been an alive member since %s (delegation.outbox_give_up); it may have taken the job, whose outcome is unknown here",
		m.To, time.Unix(now, 0).UTC().Format(time.RFC3339), time.Unix(since, 0).UTC().Format(time.RFC3339))
	n.log.Warn("agree given up", "job", wireID(m.Job), "peer", m.To, "why", msg)
	lj := n.liveOf(m.Job)
	if lj == nil {
		// Cancelled while its agree was out: its record ended then; the
		// agree was resent only to learn whether a Terminate is owed.
		return true
	}
	n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_PEER_UNREACHABLE, msg, fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED, now)
	n.replyDelegation(lj)
	return true
}

// absence is since when peer, which an agree is resent to, has not been
// an alive member.
type absence struct {
	peer  string
	since int64
}

// flushOut sends the messages decided before the commit that just
// succeeded: a message that promises something goes out only once the
// decision behind it is durable.
func (n *Node) flushOut() {
	if len(n.outq) == 0 {
		return
	}
	w := n.wire()
	var round []outCall
	for _, m := range n.outq {
		method, req, err := w.request(m)
		if err != nil {
			n.log.Warn("site agent message not sent", "kind", m.Kind.String(), "to", m.To, "err", err)
			if rqfRound(m.Kind) {
				n.rqf.out--
			}
			continue
		}
		if r, ok := req.(*fedschedv1.ReportOutcomeRequest); ok {
			// The report carries the job's final record, as the node's
			// reports always have (exit code, SLA outcome, reason).
			if a := n.agreementOfKey(m.Job); a != nil && len(a.PeerJob) > 0 {
				var j fedschedv1.Job
				if proto.Unmarshal(a.PeerJob, &j) == nil {
					r.Job = &j
					r.AgreementId = m.Job.String()
				}
			}
		}
		c := outCall{m: m, method: method, req: req, addr: n.addrOf(m.To)}
		if m.Kind == site.KindQueueRequest {
			round = append(round, c)
			continue
		}
		n.enqueue(c)
	}
	if len(round) > 0 {
		round[0].then = round[1:]
		n.enqueue(round[0])
	}
	clear(n.outq)
	n.outq = n.outq[:0]
}

// enqueue hands a call (and those that follow it) to the sending
// goroutines; one that finds the queue full is dropped.
func (n *Node) enqueue(c outCall) {
	select {
	case n.sendq <- c:
	default:
		for _, d := range append([]outCall{c}, c.then...) {
			n.log.Warn("federation message dropped: the send queue is full", "kind", d.m.Kind.String(), "to", d.m.To, "job", d.m.Job.String())
			if rqfRound(d.m.Kind) {
				n.rqf.out--
			}
		}
	}
}

// sendLoop is one sending goroutine: it makes the RPCs of the queued
// messages until ctx ends, and gives each response back to the loop.
func (n *Node) sendLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-n.sendq:
			for _, d := range append([]outCall{c}, c.then...) {
				resp, err := n.call(ctx, d)
				if answerKind(d.m.Kind) == 0 {
					continue // a release has no answer
				}
				if serr := n.send(ctx, &answerOp{m: d.m, resp: resp, err: err}); serr != nil {
					return
				}
			}
		}
	}
}

// call makes one RPC for the agent, bounded by the quote timeout.
func (n *Node) call(ctx context.Context, c outCall) (proto.Message, error) {
	if c.addr == "" {
		return nil, fmt.Errorf("%s has no known address: %w", c.m.To, ErrUnavailable)
	}
	cctx, cancel := context.WithTimeout(ctx, n.fed.QuoteTimeout)
	defer cancel()
	cl, err := n.client(cctx, c.m.To, c.addr)
	if err != nil {
		return nil, err
	}
	switch r := c.req.(type) {
	case *fedschedv1.QuoteRequest:
		return cl.Quote(cctx, r)
	case *fedschedv1.AgreeRequest:
		return cl.Agree(cctx, r)
	case *fedschedv1.ReleaseRequest:
		return cl.Release(cctx, r)
	case *fedschedv1.ReportOutcomeRequest:
		return cl.ReportOutcome(cctx, r)
	case *fedschedv1.TerminateRequest:
		return cl.Terminate(cctx, r)
	case *fedschedv1.PeerQueueRequest:
		return cl.PeerQueue(cctx, r)
	case *fedschedv1.TakeRequest:
		return cl.Take(cctx, r)
	}
	return nil, fmt.Errorf("%s: %T is not a federation request: %w", c.method, c.req, ErrInvalidRequest)
}

// afterCommit runs what waits for the commit that just ended: the replies
// of submissions whose delegation ended, and, if it succeeded, the
// messages its decisions sent.
func (n *Node) afterCommit(err error) {
	rs := n.settled
	n.settled = nil
	for _, r := range rs {
		r(err)
	}
	if err == nil {
		n.flushOut()
	}
}

// forgetHeld drops the full specs of peers' jobs no longer held.
func (n *Node) forgetHeld(now int64) {
	for k, h := range n.held {
		if h.until <= now {
			delete(n.held, k)
		}
	}
}

// offering reports whether lj is being offered to peers (PENDING with the
// reason DELEGATED: out of the plan until a peer takes it or it comes
// back).
func offering(lj *liveJob) bool {
	return lj.state() == fedschedv1.JobState_JOB_STATE_PENDING && lj.peek().GetReason() == fedschedv1.Reason_REASON_DELEGATED
}

// replyDelegation answers the submission of an offered job that waits for
// the delegation's end, once the decision that ended it is durable.
func (n *Node) replyDelegation(lj *liveJob) {
	r := n.deferred[lj.seq]
	if r == nil {
		return
	}
	delete(n.deferred, lj.seq)
	job := proto.Clone(lj.job()).(*fedschedv1.Job)
	n.settled = append(n.settled, func(err error) {
		if err != nil {
			r(submitResult{err: fmt.Errorf("storing the delegation failed: %w: %w", ErrUnavailable, err)})
			return
		}
		r(submitResult{job: job})
	})
}

// applyFed writes one federation decision of the agent to the node's
// records: the offer, the agree (written ahead), the delegation and its
// outcome at the origin; a peer's job accepted here; the Terminates and
// reports owed and acknowledged. It reports false for a decision that is
// not the federation's.
func (n *Node) applyFed(d site.Decision, lj *liveJob, now int64) (bool, error) {
	switch d.Kind {
	case site.DecideOffer:
		if lj == nil {
			return true, fmt.Errorf("site agent: offer of unknown job %v: %w", d.Job, ErrInvalidRequest)
		}
		msg := acfOffering
		if !d.Offer.StartNow {
			msg = "no local slot: asking peers for quotes"
		}
		lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_DELEGATED, msg, now)
		n.live[lj.seq] = lj
	case site.DecideAgree:
		if lj == nil {
			return true, fmt.Errorf("site agent: agree for unknown job %v: %w", d.Job, ErrInvalidRequest)
		}
		// Written ahead: after a crash the origin asks this peer again,
		// and no other.
		if d.HandOver {
			// RQF's hand-over: the job has left the plan; the taker's
			// answer makes it its own, or brings it back.
			msg := fmt.Sprintf("%s %s, which would start it now: agreeing to its hold %s", rqfHandingOver, d.Peer, d.HoldID)
			j := lj.job()
			j.Reservation, j.Pof, j.Overbooked = nil, 0, false
			j.Route = append(j.Route, &fedschedv1.RouteHop{Site: n.cfg.Site, PeerSite: d.Peer, Reason: fedschedv1.Reason_REASON_DELEGATED,
				Message: msg, Time: toTime(now), Taken: true, HoldId: d.HoldID})
			lj.rec = n.setState(j, lj.rec, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_DELEGATED, msg, now)
			break
		}
		lj.job().Route = append(lj.job().Route, &fedschedv1.RouteHop{Site: n.cfg.Site, PeerSite: d.Peer, Reason: fedschedv1.Reason_REASON_DELEGATED,
			Message: "agreeing to the quote of " + d.Peer + " (hold " + d.HoldID + ")", Time: toTime(now), HoldId: d.HoldID})
		lj.rec.Job = lj.job()
		n.pending.putJob(lj.rec)
	case site.DecideDelegate:
		if lj == nil {
			return true, fmt.Errorf("site agent: delegation of unknown job %v: %w", d.Job, ErrInvalidRequest)
		}
		n.delegatedTo(lj, d, now)
	case site.DecideOutcome:
		return true, n.outcome(d, now)
	case site.DecideTerminate:
		a := n.agreementOfKey(d.Job)
		if a == nil {
			// Cancelled while its agree was out, and the peer took it.
			id := d.Job.String()
			a = &agreementRec{Role: roleOrigin, Seq: d.Job.ID, Agreement: delegation.Agreement{ID: id, JobID: wireID(d.Job), Origin: n.cfg.Site,
				Peer: d.Peer, State: delegation.Observed, Quote: delegation.Quote{Site: d.Peer, HoldID: id}}}
			n.byOrigin[originKey(n.cfg.Site, a.JobID)] = a.ID
		}
		if a.State == delegation.Observed {
			a.Apply(delegation.EventTerminate, now) //nolint:errcheck // observed -> terminating is allowed
		}
		a.Pending = "terminate"
		n.putAgreement(a, now)
	case site.DecideAcked:
		a := n.agreementOfKey(d.Job)
		if a == nil {
			return true, nil // a refused agree of a job cancelled while agreeing
		}
		if a.Pending == "terminate" {
			a.Apply(delegation.EventTerminated, now) //nolint:errcheck // terminating -> terminated is allowed
		}
		a.Pending, a.AbsentSince = "", 0
		n.putAgreement(a, now)
	case site.DecideGaveUp:
		// Written when the node gave up (givenUp, agreeGivenUp: its only
		// calls of Agent.GiveUp), with why; the decision comes in a
		// later batch.
	case site.DecideReport:
		// Written where the job ended (finish, peerJobEnded), which the
		// op that ended it calls after the agent.
	default:
		return false, nil
	}
	return true, nil
}

// delegatedTo records that a peer took lj (DecideDelegate): the job is
// DELEGATED, with the peer's slot, and the origin's agreement is kept.
func (n *Node) delegatedTo(lj *liveJob, d site.Decision, now int64) {
	peerJob, id := "", d.Job.String()
	if r, ok := n.stepResp.(*fedschedv1.AgreeResponse); ok && r.GetAgreement().GetId() != "" {
		peerJob, id = r.GetAgreement().GetPeerJobId(), r.GetAgreement().GetId()
	}
	// Taken from the queue (RQF): the hand-over's hop, written ahead.
	taken := handedOver(lj.job(), d.Peer)
	delete(n.live, lj.seq)
	j := lj.job()
	j.Site = d.Peer
	pl := d.Placement
	j.Reservation = nil
	if pl.Start != 0 || pl.End != 0 {
		// (A restored agree knows no slot: the peer's comes with its
		// report, settleReport.)
		j.Reservation = &fedschedv1.Reservation{Start: toTime(pl.Start), Procs: j.GetSpec().GetProcs(), Site: d.Peer}
		if pl.End < plan.Forever {
			j.Reservation.End = toTime(pl.End)
		}
	}
	j.Pof, j.Overbooked = pl.PoF, pl.Reason == plan.ReasonOverbooked
	as := " as " + peerJob
	if peerJob == "" {
		as = ""
	}
	j.Route = append(j.Route, &fedschedv1.RouteHop{Site: d.Peer, PeerSite: n.cfg.Site, Reason: fedschedv1.Reason_REASON_RECEIVED_FROM_PEER,
		Message: "accepted" + as, Time: toTime(now)})
	slices.SortStableFunc(j.QuoteAnswers, func(a, b *fedschedv1.QuoteAnswer) int { return compareStr(a.GetPeerSite(), b.GetPeerSite()) })
	ag := &agreementRec{Role: roleOrigin, Seq: lj.seq, Overbooked: j.Overbooked, Agreement: delegation.Agreement{ID: id, JobID: j.GetId(),
		PeerJobID: peerJob, Origin: n.cfg.Site, Peer: d.Peer, State: delegation.Observed,
		Quote: delegation.Quote{Site: d.Peer, HoldID: id, Start: pl.Start, End: pl.End, PoF: pl.PoF, Price: d.Price}}}
	n.putAgreement(ag, now)
	n.byOrigin[originKey(n.cfg.Site, ag.JobID)] = ag.ID
	var asked []string
	for _, a := range j.QuoteAnswers {
		asked = append(asked, a.GetPeerSite())
	}
	asked = slices.Compact(asked) // sorted: a peer asked again after a restart is named once
	msg := fmt.Sprintf("delegated to %s%s (quotes asked of %v)", d.Peer, as, asked)
	if taken {
		msg = fmt.Sprintf("delegated to %s%s: it took the job from this site's queue to start it at once (RQF)", d.Peer, as)
	}
	lj.rec = n.setState(j, lj.rec, fedschedv1.JobState_JOB_STATE_DELEGATED, fedschedv1.Reason_REASON_DELEGATED, msg, now)
	n.replyDelegation(lj)
}

// handedOver reports whether j's last agree is the hand-over to peer, which
// took it from this site's queue (RQF): its hop is marked taken.
func handedOver(j *fedschedv1.Job, peer string) bool {
	r := j.GetRoute()
	for i := len(r) - 1; i >= 0; i-- {
		if h := r[i]; h.GetReason() == fedschedv1.Reason_REASON_DELEGATED && h.GetPeerSite() != "" {
			return h.GetTaken() && h.GetPeerSite() == peer
		}
	}
	return false
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// outcome settles a delegated job at the origin (DecideOutcome) from the
// peer's report: the job record the report carries when it came in this
// Step, otherwise the outcome the agent knows.
func (n *Node) outcome(d site.Decision, now int64) error {
	a := n.agreementOfKey(d.Job)
	if a == nil || a.Role != roleOrigin {
		return fmt.Errorf("site agent: outcome of %v without an agreement: %w", d.Job, ErrInvalidRequest)
	}
	pj := outcomeJob(d.Peer, d.Job, d.Outcome)
	if r, ok := n.stepReq.(*fedschedv1.ReportOutcomeRequest); ok && r.GetJob() != nil {
		pj = r.GetJob()
	}
	return n.settleReport(a, pj, now)
}

// peerAccepted records a peer's job this site accepted (DecideAccept with
// a Peer: agreed to its quote, or taken from its queue): the job record,
// its SLA and the peer's agreement, as the node's Agree writes them.
func (n *Node) peerAccepted(d site.Decision, now int64) error {
	h := n.held[d.Job]
	delete(n.held, d.Job)
	spec := h.spec
	if spec == nil {
		spec = n.wire().wireSpec(d.Job, d.Spec)
	}
	seq := d.Spec.ID
	id := jobID(n.cfg.Site, uint64(seq))
	job := &fedschedv1.Job{Id: id, Spec: proto.Clone(spec).(*fedschedv1.JobSpec), Site: n.cfg.Site, OriginSite: d.Job.Site, SubmitTime: toTime(now),
		Route: cloneRoute(h.route)}
	if h.route == nil {
		job.Route = wireRoute(d.Route)
		if len(job.Route) > 0 {
			job.Route = job.Route[:len(job.Route)-1] // this site's accept: the hop below says it
		}
	}
	a := &agreementRec{Role: rolePeer, Seq: seq, Overbooked: d.Placement.Reason == plan.ReasonOverbooked, Agreement: delegation.Agreement{
		ID: id, JobID: wireID(d.Job), PeerJobID: id, Origin: d.Job.Site, Peer: n.cfg.Site, State: delegation.Observed, IdempotencyKey: d.HoldID,
		Quote: delegation.Quote{Site: n.cfg.Site, HoldID: d.HoldID, Start: d.Placement.Start, End: d.Placement.End, PoF: d.Placement.PoF, Price: d.Price}}}
	job.Route = append(job.Route, &fedschedv1.RouteHop{Site: n.cfg.Site, PeerSite: d.Peer, Reason: fedschedv1.Reason_REASON_RECEIVED_FROM_PEER,
		Message: fmt.Sprintf("received from %s (its job %s) under agreement %s", d.Peer, a.JobID, a.ID), Time: toTime(now)})
	pj := d.Spec
	lj := &liveJob{seq: seq, j: job, pj: pj, sla: spec.GetDeadline() != nil}
	pl := d.Placement
	if pl.Reason != plan.ReasonQueued {
		api, over := n.reservationOf(pj.Procs, pl, pj.Estimate)
		job.Reservation, job.Pof, job.Overbooked = api, pl.PoF, over
	}
	if lj.sla {
		job.SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN
		n.pending.putSLA(store.SLARecord{JobID: id, Outcome: job.SlaOutcome, Fee: pj.Fee, Penalty: pj.Penalty, PoF: pl.PoF})
	}
	lj.rec = n.setState(job, store.JobRecord{Job: job}, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_RECEIVED_FROM_PEER,
		fmt.Sprintf("received from %s under agreement %s", d.Peer, a.ID), now)
	n.live[seq] = lj
	n.nextSeq = max(n.nextSeq, uint64(seq))
	n.putAgreement(a, now)
	n.byOrigin[originKey(a.Origin, a.JobID)] = a.ID
	return nil
}

// terminated cancels a peer's job its origin terminated (DecideCancel with
// the origin as Peer): a waiting job ends CANCELLED (its report follows),
// a running one is killed (DecideKill) and ends when its process does.
func (n *Node) terminated(lj *liveJob, origin string, now int64) {
	note := "cancelled by the user: terminated by the origin " + origin
	if lj.job().GetState() == fedschedv1.JobState_JOB_STATE_RUNNING {
		lj.cancelled = true
		if lj.sla {
			lj.job().SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED
			n.pending.putSLA(store.SLARecord{JobID: lj.job().GetId(), Outcome: lj.job().SlaOutcome, Fee: lj.pj.Fee, Penalty: lj.pj.Penalty, PoF: lj.job().GetPof(), DecidedAt: time.Unix(now, 0)})
		}
		lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, note, now)
		return
	}
	n.finish(lj, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, note, fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED, now)
}

// offerEnded records that an offered job of this site came back (DecideAccept
// or DecideReject after DecideOffer): no peer took it.
func (n *Node) offerEnded(lj *liveJob, d site.Decision, now int64) {
	j := lj.job()
	slices.SortStableFunc(j.QuoteAnswers, func(a, b *fedschedv1.QuoteAnswer) int { return compareStr(a.GetPeerSite(), b.GetPeerSite()) })
	j.OverbookSamples, j.TooFewSamples = d.Placement.Samples, d.Placement.TooFewSamples
	if d.Kind == site.DecideAccept {
		n.acceptLocal(lj, d.Placement, now)
	} else {
		var refused []string
		for _, a := range j.QuoteAnswers {
			if !a.GetOffered() {
				refused = append(refused, a.GetPeerSite())
			}
		}
		why := "; no peer offered a slot"
		switch {
		case len(j.QuoteAnswers) == 0:
			why = "; no reachable peer could take the job"
		case len(refused) > 0:
			why += fmt.Sprintf(" (refused by %v)", refused)
		}
		reason, msg := rejectReason(d.Placement, lj.pj, n.cfg.Site, now)
		if lj.sla {
			j.SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED
			n.pending.putSLA(store.SLARecord{JobID: j.GetId(), Outcome: fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED, Fee: lj.pj.Fee, Penalty: lj.pj.Penalty})
		}
		delete(n.live, lj.seq)
		lj.rec = n.setState(j, lj.rec, fedschedv1.JobState_JOB_STATE_REJECTED, reason, msg+why, now)
	}
	n.replyDelegation(lj)
}

// agentCancelAway cancels one of the site's own jobs that is out of its
// plan: being offered to peers (the agent releases the holds it got, or,
// with its agree out, terminates the job if the peer took it), or
// delegated (a Terminate is owed to the peer until it acknowledges). It
// reports false when the job is neither.
func (n *Node) agentCancelAway(id string, seq int64, lj *liveJob, note string, now int64) (submitResult, bool) {
	msg := "cancelled by the user"
	if note != "" {
		msg += ": " + note
	}
	key := site.JobKey{Site: n.cfg.Site, ID: seq}
	switch {
	case lj != nil && offering(lj):
		if !n.agent.Cancel(now, key) {
			return submitResult{}, false
		}
		n.applyOwn(now)
		n.finish(lj, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, msg+" (while it was offered to peers)",
			fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED, now)
		n.replyDelegation(lj)
		return submitResult{job: proto.Clone(lj.job()).(*fedschedv1.Job)}, true
	case lj == nil:
		rec, ok := n.pending.jobs[id]
		if !ok {
			var err error
			if rec, err = n.deps.Store.GetJob(context.Background(), id); err != nil {
				return submitResult{}, false
			}
		}
		if rec.Job.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || !n.agent.Cancel(now, key) {
			return submitResult{}, false
		}
		n.applyOwn(now)
		j := rec.Job
		if j.GetSpec().GetDeadline() != nil {
			j.SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED
			n.pending.putSLA(store.SLARecord{JobID: j.GetId(), Outcome: j.SlaOutcome, Fee: j.GetSpec().GetFee(), Penalty: j.GetSpec().GetPenalty(), DecidedAt: time.Unix(now, 0)})
		}
		rec = n.setState(j, rec, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, msg+" (termination sent to "+j.GetSite()+")", now)
		return submitResult{job: proto.Clone(rec.Job).(*fedschedv1.Job)}, true
	}
	return submitResult{}, false
}

// heldAgreement is the pending agreement of a hold this site's agent gave
// the origin job's quote (GetAgreement), nil if none.
func (n *Node) heldAgreement(originSite, originJob string, now int64) *fedschedv1.Agreement {
	k, err := keyOfID(originJob)
	if err != nil || k.Site != originSite {
		return nil
	}
	h, ok := n.held[k]
	if !ok || h.offer == nil || h.until <= now {
		return nil
	}
	return &fedschedv1.Agreement{Id: k.String(), OriginSite: k.Site, OriginJobId: originJob, PeerSite: n.cfg.Site,
		State: fedschedv1.AgreementState_AGREEMENT_STATE_PENDING, Offer: h.offer, UpdateTime: toTime(now)}
}
