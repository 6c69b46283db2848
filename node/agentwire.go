package node

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// The site agent's messages over the federation's gRPC: the first step of
// the node switch (docs/architecture.md, "The node as the agent's driver:
// plan"). Every message kind is the request of one RPC or its response:
//
//	quote-request -> Quote         -> quote
//	agree         -> Agree         -> agreed
//	release       -> Release       (no answer)
//	report        -> ReportOutcome -> report-ack
//	terminate     -> Terminate     -> terminated
//	queue-request -> PeerQueue     -> queue
//	take          -> Take          -> taken (a refusal), or none
//
// The origin's driver sends a request message as its RPC (request) and
// turns the response, or the RPC's error, into the answer message it
// Steps into its agent (answer); the peer's driver turns the RPC's request
// into the message it Steps (step) and the answer the Step put in Ready
// into the RPC's response (response). A job travels by its key: the
// origin's job id (jobID) and the agreement ids are the key's text
// (site.JobKey.String). A hold's id is that text with the holder's "#n"
// suffix, new at every hold (a quote's, or an RQF take's): the agree
// names it, and so does its refusal (site.Message.HoldID).
//
// A refused quote's reason code is the node's (refusal, from the agent's
// site.Refusal); an offer carries the agent's Overbooked and Queued flags
// (Offer.overbooked, queued). RQF's hand-over is two-phase, as a node's: a
// take the origin accepts is answered by an agree to the taker's hold
// (the agent's agree, sent as its own Agree RPC and resent until
// answered), so the Take's response is empty and Steps nothing; only a
// refused take has an answer (taken, as the RPC's error).

// agentWire converts one site's messages.
type agentWire struct {
	site string
	// spec is the full spec of a job this site knows (its own job, or a
	// peer's it holds or runs): a quote request carries it, so that the
	// peer can run the job; nil when unknown (the agent's plan.Job is
	// sent then).
	spec func(site.JobKey) *fedschedv1.JobSpec
}

// wireID is a job key as a job id of its site.
func wireID(k site.JobKey) string { return jobID(k.Site, uint64(k.ID)) }

// keyOfID parses a job id of any site ("site.000000000012").
func keyOfID(id string) (site.JobKey, error) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 {
		return site.JobKey{}, fmt.Errorf("job id %q: %w", id, ErrInvalidRequest)
	}
	seq, ok := seqOf(id[:i], id)
	if !ok || seq == 0 {
		return site.JobKey{}, fmt.Errorf("job id %q: %w", id, ErrInvalidRequest)
	}
	return site.JobKey{Site: id[:i], ID: int64(seq)}, nil
}

// keyOfHold parses a hold or agreement id (site.JobKey.String, a hold's
// with its "#n" suffix).
func keyOfHold(id string) (site.JobKey, error) {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 {
		return site.JobKey{}, fmt.Errorf("hold id %q: %w", id, ErrInvalidRequest)
	}
	seq, _, _ := strings.Cut(id[i+1:], "#")
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n <= 0 {
		return site.JobKey{}, fmt.Errorf("hold id %q: %w", id, ErrInvalidRequest)
	}
	return site.JobKey{Site: id[:i], ID: n}, nil
}

// wireRoute is the part of an agent's route a node carries: the sites the
// job was at (quote answers are kept apart, for explain).
func wireRoute(r delegation.Route) []*fedschedv1.RouteHop {
	out := make([]*fedschedv1.RouteHop, 0, len(r))
	for i, h := range r {
		hop := &fedschedv1.RouteHop{Site: h.Site, Time: toTime(h.At), Message: h.Reason}
		switch h.Action {
		case delegation.ActionQuoted, delegation.ActionRefused:
			continue
		case delegation.ActionSubmitted:
			hop.Message = "submitted"
		case delegation.ActionDelegated:
			hop.Reason = fedschedv1.Reason_REASON_RECEIVED_FROM_PEER
			if i > 0 {
				hop.PeerSite = r[0].Site
			}
		case delegation.ActionAccepted:
			hop.Reason = fedschedv1.Reason_REASON_PLACED_IN_FULL
		}
		out = append(out, hop)
	}
	return out
}

// agentRoute is a carried route as the agent reads it.
func agentRoute(route []*fedschedv1.RouteHop) delegation.Route {
	r := make(delegation.Route, 0, len(route))
	for i, h := range route {
		hop := delegation.Hop{Site: h.GetSite(), At: h.GetTime().AsTime().Unix(), Action: delegation.ActionAccepted}
		switch {
		case i == 0:
			hop.Action = delegation.ActionSubmitted
		case h.GetReason() == fedschedv1.Reason_REASON_RECEIVED_FROM_PEER:
			hop.Action, hop.Reason = delegation.ActionDelegated, h.GetMessage()
		}
		r = append(r, hop)
	}
	return r
}

// wireSpec is the spec a message's job travels with.
func (w agentWire) wireSpec(k site.JobKey, pj plan.Job) *fedschedv1.JobSpec {
	if w.spec != nil {
		if s := w.spec(k); s != nil {
			return s
		}
	}
	s := &fedschedv1.JobSpec{Procs: int32(pj.Procs), EstimateSeconds: pj.Estimate, User: pj.User, App: pj.App, Fee: pj.Fee, Penalty: pj.Penalty}
	if pj.Release > 0 {
		s.Release = toTime(pj.Release)
	}
	if pj.Deadline < plan.Forever {
		s.Deadline = toTime(pj.Deadline)
	}
	return s
}

func wireOffer(o *site.Offer) *fedschedv1.Offer {
	w := &fedschedv1.Offer{HoldId: o.HoldID, Site: o.Site, Start: toTime(o.Start), Pof: o.PoF, Price: o.Price, Expires: toTime(o.Expires),
		Overbooked: o.Overbooked, Queued: o.Queued}
	if o.End < plan.Forever {
		w.End = toTime(o.End)
	}
	return w
}

func agentOffer(o *fedschedv1.Offer) *site.Offer {
	end := int64(plan.Forever)
	if o.GetEnd() != nil {
		end = o.GetEnd().AsTime().Unix()
	}
	return &site.Offer{Quote: delegation.Quote{Site: o.GetSite(), HoldID: o.GetHoldId(), Start: o.GetStart().AsTime().Unix(), End: end,
		PoF: o.GetPof(), Price: o.GetPrice(), Expires: o.GetExpires().AsTime().Unix()}, Overbooked: o.GetOverbooked(), Queued: o.GetQueued()}
}

// outcomeJob is an outcome as the executing site's job record says it.
func outcomeJob(executing string, k site.JobKey, o site.Outcome) *fedschedv1.Job {
	j := &fedschedv1.Job{Id: wireID(k), Site: executing, OriginSite: k.Site, State: fedschedv1.JobState_JOB_STATE_KILLED}
	switch {
	case o.Cancelled:
		j.State = fedschedv1.JobState_JOB_STATE_CANCELLED
	case o.Dropped:
		j.State = fedschedv1.JobState_JOB_STATE_REJECTED
	case o.Failed:
		j.State = fedschedv1.JobState_JOB_STATE_FAILED
	case o.Completed:
		j.State = fedschedv1.JobState_JOB_STATE_COMPLETED
	}
	if !o.Dropped && !(o.Cancelled && o.Start == o.End) {
		j.StartTime = toTime(o.Start)
	}
	j.EndTime = toTime(o.End)
	return j
}

// agentOutcome is the outcome a report's job record says.
func agentOutcome(j *fedschedv1.Job) site.Outcome {
	o := site.Outcome{End: j.GetEndTime().AsTime().Unix()}
	o.Start = o.End
	if j.GetStartTime() != nil {
		o.Start = j.GetStartTime().AsTime().Unix()
	}
	switch j.GetState() {
	case fedschedv1.JobState_JOB_STATE_COMPLETED:
		o.Completed = true
	case fedschedv1.JobState_JOB_STATE_CANCELLED:
		o.Cancelled = true
	case fedschedv1.JobState_JOB_STATE_REJECTED:
		o.Dropped = true
	case fedschedv1.JobState_JOB_STATE_FAILED:
		o.Failed = true
	}
	return o
}

// request is the RPC a request message is sent as: its method name (the
// FederationService's) and its request.
func (w agentWire) request(m site.Message) (string, proto.Message, error) {
	hold := m.Job.String()
	if m.HoldID != "" {
		hold = m.HoldID
	}
	switch m.Kind {
	case site.KindQuoteRequest:
		return "Quote", &fedschedv1.QuoteRequest{OriginSite: m.Job.Site, OriginJobId: wireID(m.Job), Spec: w.wireSpec(m.Job, m.Spec),
			Route: wireRoute(m.Route), HoldSeconds: m.HoldSeconds, StartNow: m.StartNow}, nil
	case site.KindAgree:
		return "Agree", &fedschedv1.AgreeRequest{HoldId: hold, IdempotencyKey: hold, OriginSite: m.Job.Site, OriginJobId: wireID(m.Job)}, nil
	case site.KindRelease:
		return "Release", &fedschedv1.ReleaseRequest{HoldId: hold}, nil
	case site.KindReport:
		return "ReportOutcome", &fedschedv1.ReportOutcomeRequest{AgreementId: hold, OriginJobId: wireID(m.Job), Job: outcomeJob(w.site, m.Job, m.Outcome)}, nil
	case site.KindTerminate:
		return "Terminate", &fedschedv1.TerminateRequest{AgreementId: hold}, nil
	case site.KindQueueRequest:
		return "PeerQueue", &fedschedv1.PeerQueueRequest{Site: w.site, FreeProcs: int32(m.Spec.Procs)}, nil
	case site.KindTake:
		return "Take", &fedschedv1.TakeRequest{Site: w.site, JobId: wireID(m.Job), HoldId: hold}, nil
	}
	return "", nil, fmt.Errorf("message %v is an answer, not a request: %w", m.Kind, ErrInvalidRequest)
}

// step is the message a peer's RPC request is, to Step into this site's
// agent at now.
func (w agentWire) step(req proto.Message, now int64) (site.Message, error) {
	m := site.Message{To: w.site}
	var err error
	switch r := req.(type) {
	case *fedschedv1.QuoteRequest:
		m.Kind, m.From, m.HoldSeconds, m.StartNow = site.KindQuoteRequest, r.GetOriginSite(), r.GetHoldSeconds(), r.GetStartNow()
		m.Job, err = keyOfID(r.GetOriginJobId())
		m.Spec, m.Route = planJob(r.GetSpec(), 0, now), agentRoute(r.GetRoute())
	case *fedschedv1.AgreeRequest:
		m.Kind, m.From, m.HoldID = site.KindAgree, r.GetOriginSite(), r.GetHoldId()
		m.Job, err = keyOfHold(r.GetHoldId())
		if err == nil && (m.Job.Site != r.GetOriginSite() || wireID(m.Job) != r.GetOriginJobId()) {
			err = fmt.Errorf("hold %q is not job %s of %s: %w", r.GetHoldId(), r.GetOriginJobId(), r.GetOriginSite(), ErrJobNotFound)
		}
	case *fedschedv1.ReleaseRequest:
		m.Kind = site.KindRelease
		m.Job, err = keyOfHold(r.GetHoldId())
		m.From = m.Job.Site
	case *fedschedv1.ReportOutcomeRequest:
		m.Kind, m.From, m.Outcome = site.KindReport, r.GetJob().GetSite(), agentOutcome(r.GetJob())
		m.Job, err = keyOfHold(r.GetAgreementId())
	case *fedschedv1.TerminateRequest:
		m.Kind = site.KindTerminate
		m.Job, err = keyOfHold(r.GetAgreementId())
		m.From = m.Job.Site
	case *fedschedv1.PeerQueueRequest:
		m.Kind, m.From, m.Spec.Procs = site.KindQueueRequest, r.GetSite(), int(r.GetFreeProcs())
	case *fedschedv1.TakeRequest:
		m.Kind, m.From, m.HoldID = site.KindTake, r.GetSite(), r.GetHoldId()
		m.Job, err = keyOfID(r.GetJobId())
	default:
		err = fmt.Errorf("%T is not a federation request: %w", req, ErrInvalidRequest)
	}
	return m, err
}

// answerKind is the kind of the answer to a request, 0 if none.
func answerKind(k site.Kind) site.Kind {
	switch k {
	case site.KindQuoteRequest:
		return site.KindQuote
	case site.KindAgree:
		return site.KindAgreed
	case site.KindReport:
		return site.KindReportAck
	case site.KindTerminate:
		return site.KindTerminated
	case site.KindQueueRequest:
		return site.KindQueue
	case site.KindTake:
		return site.KindTaken
	}
	return 0
}

// response is the RPC response to req, from the messages the Step of req
// put in Ready (the answer is the one to req's sender, of req's answer
// kind, about its job). A refused agree or take is an error (its reason,
// ErrJobFinished), as the node's RPCs answer today; a take answered by an
// agree to the taker's hold (the hand-over) is an empty TakeResponse.
func (w agentWire) response(req site.Message, out []site.Message, now int64) (proto.Message, error) {
	if answerKind(req.Kind) == 0 {
		return responseOf(req.Kind), nil
	}
	for _, m := range out {
		if req.Kind == site.KindTake && m.Kind == site.KindAgree && m.To == req.From && m.Job == req.Job {
			return &fedschedv1.TakeResponse{}, nil // the hand-over: its agree goes as an RPC of its own
		}
	}
	i := answerAt(req, out)
	if i < 0 {
		return nil, fmt.Errorf("site %s did not answer the %v of %s for %v: %w", w.site, req.Kind, req.From, req.Job, ErrUnavailable)
	}
	a := out[i]
	switch a.Kind {
	case site.KindQuote:
		if a.Offer == nil && a.Refusal != nil {
			return refusal(a.Refusal, req.Spec, now), nil
		}
		if a.Offer == nil {
			return &fedschedv1.QuoteResponse{Refusal: fedschedv1.Reason_REASON_REJECTED_NO_GAP, Message: a.Reason}, nil
		}
		return &fedschedv1.QuoteResponse{Offer: wireOffer(a.Offer)}, nil
	case site.KindAgreed:
		if a.Offer == nil {
			return nil, fmt.Errorf("%s: %w", a.Reason, ErrJobFinished)
		}
		return &fedschedv1.AgreeResponse{Agreement: &fedschedv1.Agreement{Id: req.Job.String(), OriginSite: req.Job.Site, OriginJobId: wireID(req.Job),
			PeerSite: w.site, State: fedschedv1.AgreementState_AGREEMENT_STATE_OBSERVED, Offer: wireOffer(a.Offer)}}, nil
	case site.KindReportAck:
		return &fedschedv1.ReportOutcomeResponse{}, nil
	case site.KindTerminated:
		return &fedschedv1.TerminateResponse{Agreement: &fedschedv1.Agreement{Id: req.Job.String(), OriginSite: req.Job.Site, OriginJobId: wireID(req.Job),
			PeerSite: w.site, State: fedschedv1.AgreementState_AGREEMENT_STATE_TERMINATED}}, nil
	case site.KindQueue:
		resp := &fedschedv1.PeerQueueResponse{}
		for _, q := range a.Jobs {
			resp.Jobs = append(resp.Jobs, &fedschedv1.QueuedJob{JobId: wireID(q.Job), Spec: w.wireSpec(q.Job, q.Spec), Route: wireRoute(q.Route)})
		}
		return resp, nil
	case site.KindTaken:
		return nil, fmt.Errorf("%s: %w", a.Reason, ErrJobFinished)
	}
	return nil, fmt.Errorf("answer %v: %w", a.Kind, ErrInvalidRequest)
}

// answerAt is the position in out of the answer to req (one to req's
// sender, of req's answer kind, about its job), -1 if none.
func answerAt(req site.Message, out []site.Message) int {
	want := answerKind(req.Kind)
	if want == 0 {
		return -1
	}
	for k, m := range out {
		if m.Kind == want && m.To == req.From && (m.Job == req.Job || want == site.KindQueue) {
			return k
		}
	}
	return -1
}

func responseOf(k site.Kind) proto.Message {
	if k == site.KindRelease {
		return &fedschedv1.ReleaseResponse{}
	}
	return nil
}

// answer is the message the origin Steps for the RPC of req that gave
// resp or err; false when there is none to Step: a transport failure (the
// agent gives up on the peer after its reply period, or resends), a
// request that has no answer (release), or a take the peer accepted (its
// agree to the hold comes as its own RPC). A refused agree or take is an
// answer with its reason; a report or Terminate the peer no longer knows
// is acknowledged (the node's reporter does the same).
func (w agentWire) answer(req site.Message, peer string, resp proto.Message, err error) (site.Message, bool) {
	a := site.Message{Kind: answerKind(req.Kind), From: peer, To: w.site, Job: req.Job, HoldID: req.HoldID}
	if a.Kind == 0 {
		return site.Message{}, false
	}
	if err != nil {
		switch code := CodeOf(FromStatus(err)); {
		case code == codes.NotFound && (a.Kind == site.KindReportAck || a.Kind == site.KindTerminated):
			return a, true
		case (code == codes.NotFound || code == codes.FailedPrecondition || errors.Is(err, ErrJobFinished)) && (a.Kind == site.KindAgreed || a.Kind == site.KindTaken):
			a.Reason = err.Error()
			return a, true
		}
		return site.Message{}, false
	}
	switch r := resp.(type) {
	case *fedschedv1.QuoteResponse:
		if r.GetOffer() != nil {
			a.Offer = agentOffer(r.GetOffer())
		} else {
			a.Reason = r.GetMessage()
		}
	case *fedschedv1.AgreeResponse:
		a.Offer = agentOffer(r.GetAgreement().GetOffer())
	case *fedschedv1.TakeResponse:
		return site.Message{}, false
	case *fedschedv1.PeerQueueResponse:
		for _, q := range r.GetJobs() {
			k, kerr := keyOfID(q.GetJobId())
			if kerr != nil {
				continue
			}
			a.Jobs = append(a.Jobs, site.QueuedJob{Job: k, Spec: planJob(q.GetSpec(), 0, 0), Route: agentRoute(q.GetRoute())})
		}
	}
	return a, true
}
