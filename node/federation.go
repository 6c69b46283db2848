package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// Peers is what the node needs of membership: who is in the federation and
// what they gossip. *discovery.Membership implements it.
type Peers interface {
	Members() []discovery.Member
}

// Dialer opens a client connection to the gRPC address of the peer site
// named site. Under mutual TLS the connection must prove that it reaches
// that very site (its certificate names it): a member that gossips
// another's name, or has no site certificate, gets no request. Tests and
// the e2e harness wrap it to cut links between chosen sites.
type Dialer func(ctx context.Context, site, addr string) (*grpc.ClientConn, error)

// FederationConfig configures delegation. The zero value of a field means
// its default.
type FederationConfig struct {
	// Peers is the membership; nil turns federation off.
	Peers Peers
	// Dial opens connections to peers. Required with Peers.
	Dial Dialer
	// MaxCandidates is how many peers are asked for quotes in parallel
	// (default 3).
	MaxCandidates int
	// QuoteTimeout bounds one quote round trip (default 2 s of wall time):
	// SubmitJob answers within about twice this.
	QuoteTimeout time.Duration
	// HoldSeconds is how long a quote's hold lasts, in the site's clock
	// (default 60).
	HoldSeconds int64
	// MaxHops limits how often a job is delegated (default 1).
	MaxHops int
	// CommunityShare is the share of processors kept for local users:
	// remote jobs are not quoted into slots that would leave less free
	// (default 0).
	CommunityShare float64
	// Pricing prices this site's quotes (nil: free); a job whose fee does
	// not cover the price is refused (delegation.QuotePrice).
	Pricing delegation.Pricing
	// ReportInterval is how often unacknowledged outcomes and
	// terminations are retried (default 1 s of wall time).
	ReportInterval time.Duration
	// OutboxGiveUp is how long an outcome or termination owed to a site
	// that is no longer an alive member (dead, left, or gone from the
	// membership) is retried before the site gives up on it (outbox.go);
	// in the site's clock, default 24 hours.
	OutboxGiveUp time.Duration
	// Transfer is the transfer policy: OnReject (default), ACF (a job
	// accepted here that the site's own policy would not start now is
	// offered to peers that would start it now; it stays if none does) or
	// RQF (no job is offered; an idle site pulls waiting jobs from the
	// queues of peers that disclose them, rqf.go).
	Transfer delegation.TransferMode
	// DiscloseQueue lets peers list this site's waiting jobs and take
	// those they would start now (RQF); off, queue requests are refused.
	DiscloseQueue bool
	// PullInterval is RQF's interval in the site's clock (default 60 s,
	// whole seconds): an idle site asks its peers for their queues at
	// most once per interval when something happens to it, and at every
	// multiple of it while idle (site.PullDue, site.NextPull; rqf.go).
	PullInterval time.Duration
	// Prefer lists peers asked first, one at a time, in this order.
	Prefer []string
	// Jitter is the location policy's spread (delegation.LocationConfig;
	// 0 means 0.1, negative none). The differential test turns it off in
	// both drivers, whose jitter streams differ.
	Jitter float64
}

func (c *FederationConfig) defaults() {
	if c.MaxCandidates <= 0 {
		c.MaxCandidates = 3
	}
	if c.QuoteTimeout <= 0 {
		c.QuoteTimeout = 2 * time.Second
	}
	if c.HoldSeconds <= 0 {
		c.HoldSeconds = 60
	}
	if c.MaxHops <= 0 {
		c.MaxHops = 1
	}
	if c.ReportInterval <= 0 {
		c.ReportInterval = time.Second
	}
	if c.OutboxGiveUp <= 0 {
		c.OutboxGiveUp = 24 * time.Hour
	}
	if c.PullInterval <= 0 {
		c.PullInterval = 60 * time.Second
	}
}

// agreementRec is an agreement as the node stores it, on either side.
type agreementRec struct {
	delegation.Agreement
	// Role is "origin" (this site delegated the job) or "peer" (this site
	// executes it).
	Role string `json:"role"`
	// Seq is the core id: the hold and then the job at the peer, the job
	// at the origin.
	Seq int64 `json:"seq"`
	// Spec and Route are the job as quoted (peer side), in protobuf
	// encoding, so that Agree can create the job.
	Spec  []byte `json:"spec,omitempty"`
	Route []byte `json:"route,omitempty"`
	// Overbooked: the quoted slot is shorter than the job's estimate (the
	// peer's admission overbooked it), as the peer's quote said.
	Overbooked bool `json:"overbooked,omitempty"`
	// Pending says what must still be sent to the other side: "outcome"
	// (peer to origin) or "terminate" (origin to peer); "" for nothing.
	Pending string `json:"pending,omitempty"`
	// PeerJob is the executing site's final job record (peer side, for
	// the outcome report).
	PeerJob []byte `json:"peer_job,omitempty"`
	// AbsentSince is when the site Pending is owed to (or, for a
	// delegated job, the peer its report is awaited from) was first seen
	// not an alive member while the message was undelivered (0: it is
	// alive, or nothing is owed or awaited). Undelivered says what the
	// site gave up delivering, or the report it gave up awaiting, and why
	// (outbox.go, reportsGivenUp).
	AbsentSince int64  `json:"absent_since,omitempty"`
	Undelivered string `json:"undelivered,omitempty"`
	// stored is set once the agreement has been written. A hold is kept in
	// memory only: after a restart it would be rejected anyway (holds are
	// not restored), so writing it would only slow every quote down.
	stored bool
}

const (
	roleOrigin = "origin"
	rolePeer   = "peer"
)

func (n *Node) putAgreement(a *agreementRec, now int64) {
	a.Updated = now
	a.stored = true
	n.agreements[a.ID] = a
	n.noteAwaited(a)
	if n.pending.agree == nil {
		n.pending.agree = make(map[string]*agreementRec)
	}
	n.pending.agree[a.ID] = a
}

func encodeAgreement(a *agreementRec) (store.AgreementRecord, error) {
	b, err := json.Marshal(a)
	return store.AgreementRecord{ID: a.ID, Body: b}, err
}

func originKey(site, job string) string { return site + "/" + job }

// federating reports whether the node delegates and takes remote work.
func (n *Node) federating() bool { return n.fed.Peers != nil }

// ---------------------------------------------------------------------
// Origin side: delegating a job the site cannot take.

// peerCandidates are the peers that may be asked now: alive in gossip,
// not leaving, with a readable digest and an address, as gossip
// describes them.
func (n *Node) peerCandidates() []delegation.Candidate {
	var cands []delegation.Candidate
	for _, m := range n.fed.Peers.Members() {
		if m.Local || m.State != discovery.Alive || m.DigestErr != nil || m.Digest.Leaving || m.Digest.Addr == "" {
			continue
		}
		d := m.Digest
		cands = append(cands, delegation.Candidate{Site: d.Site, Addr: d.Addr, Procs: int(d.Procs), FreeNow: int(d.FreeNow),
			Free1h: int(d.Free1h), Free4h: int(d.Free4h), Free24h: int(d.Free24h)})
	}
	return cands
}

// client returns a FederationService client for a peer site at addr.
func (n *Node) client(ctx context.Context, site, addr string) (fedschedv1.FederationServiceClient, error) {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	key := site + "@" + addr
	if c, ok := n.conns[key]; ok {
		return fedschedv1.NewFederationServiceClient(c), nil
	}
	c, err := n.fed.Dial(ctx, site, addr)
	if err != nil {
		return nil, err
	}
	n.conns[key] = c
	return fedschedv1.NewFederationServiceClient(c), nil
}

func (n *Node) addrOf(site string) string {
	for _, m := range n.fed.Peers.Members() {
		if m.Name == site && m.DigestErr == nil {
			return m.Digest.Addr
		}
	}
	return ""
}

// ---------------------------------------------------------------------
// Peer side: quoting, agreeing, releasing.

func refuse(reason fedschedv1.Reason, msg string) *fedschedv1.QuoteResponse {
	return &fedschedv1.QuoteResponse{Refusal: reason, Message: msg}
}

// refusal is a refusal of the shared hold rule as a quote answer: its
// reason code, and its message (for a job the site has no slot for, the
// window it searched: rejectReason).
func refusal(r *site.Refusal, pj plan.Job, now int64) *fedschedv1.QuoteResponse {
	switch r.Kind {
	case site.RefuseNoPlacement:
		reason, msg := rejectReason(r.Placement, pj, r.Site, now)
		return refuse(reason, msg)
	case site.RefuseCommunityShare:
		return refuse(fedschedv1.Reason_REASON_REJECTED_COMMUNITY_SHARE, r.Error())
	case site.RefuseBudget:
		return refuse(fedschedv1.Reason_REASON_REJECTED_BUDGET, r.Error())
	}
	return refuse(fedschedv1.Reason_REASON_REJECTED_NO_GAP, r.Error())
}

func offerOf(a *agreementRec, site string) *fedschedv1.Offer {
	q := a.Quote
	return &fedschedv1.Offer{HoldId: a.ID, Site: site, Start: toTime(q.Start), End: toTime(q.End), Pof: q.PoF, Price: q.Price, Expires: toTime(q.Expires),
		Overbooked: a.Overbooked}
}

// planJob is the core's view of a spec submitted (or quoted) at now.
func planJob(spec *fedschedv1.JobSpec, seq, now int64) plan.Job {
	pj := plan.Job{ID: seq, Procs: int(spec.GetProcs()), Estimate: spec.GetEstimateSeconds(), Release: now,
		Deadline: plan.Forever, User: spec.GetUser(), App: spec.GetApp()}
	if r := spec.GetRelease(); r != nil {
		pj.Release = max(now, r.AsTime().Unix())
	}
	if d := spec.GetDeadline(); d != nil {
		pj.Deadline, pj.Fee, pj.Penalty = d.AsTime().Unix(), spec.GetFee(), spec.GetPenalty()
	}
	return pj
}

type agreeResult struct {
	a   *fedschedv1.Agreement
	err error
}

func (n *Node) agreementMsg(a *agreementRec) *fedschedv1.Agreement {
	out := &fedschedv1.Agreement{Id: a.ID, OriginSite: a.Origin, OriginJobId: a.JobID, PeerSite: a.Peer, PeerJobId: a.PeerJobID,
		State: fedschedv1.AgreementState(a.State), Offer: offerOf(a, a.Peer), UpdateTime: toTime(a.Updated), Undelivered: a.Undelivered}
	if lj := n.live[a.Seq]; lj != nil && a.Role == rolePeer {
		out.Job = proto.Clone(lj.job()).(*fedschedv1.Job)
	}
	return out
}

type getAgreementOp struct {
	req   *fedschedv1.GetAgreementRequest
	reply chan agreeResult
}

func (o *getAgreementOp) run(n *Node, now int64) func(error) {
	id := o.req.GetAgreementId()
	if id == "" {
		id = n.byOrigin[originKey(o.req.GetOriginSite(), o.req.GetOriginJobId())]
	}
	a := n.agreements[id]
	var res agreeResult
	switch {
	case a == nil && o.req.GetAgreementId() == "" && n.heldAgreement(o.req.GetOriginSite(), o.req.GetOriginJobId(), now) != nil:
		// A hold of the site agent's: memory only, as the node's holds.
		res.a = n.heldAgreement(o.req.GetOriginSite(), o.req.GetOriginJobId(), now)
	case a == nil:
		res.err = fmt.Errorf("no agreement %q at %s: %w", id, n.cfg.Site, ErrJobNotFound)
	default:
		res.a = n.agreementMsg(a)
	}
	return func(error) { o.reply <- res }
}

// ---------------------------------------------------------------------
// Ends: the peer reports outcomes to the origin; the origin terminates.

// peerJobEnded is called when a job received from a peer ends: its
// agreement completes (or is terminated) and the outcome is queued for the
// origin.
func (n *Node) peerJobEnded(lj *liveJob, now int64) {
	if a := n.peerAgreement(lj.seq); a != nil {
		ev := delegation.EventFinish
		if lj.job().GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED {
			if a.State == delegation.Observed {
				a.Apply(delegation.EventTerminate, now) //nolint:errcheck // observed -> terminating is allowed
			}
			ev = delegation.EventTerminated
		}
		a.Apply(ev, now) //nolint:errcheck // observed/terminating -> complete/terminated are allowed
		a.Outcome = outcomeOf(lj.job())
		a.PeerJob, _ = proto.Marshal(lj.job())
		a.Pending = "outcome"
		n.putAgreement(a, now)
	}
}

func outcomeOf(j *fedschedv1.Job) delegation.Outcome {
	switch {
	case j.GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED:
		return delegation.OutcomeCancelled
	case j.GetSlaOutcome() == fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED:
		return delegation.OutcomeViolated
	case j.GetState() == fedschedv1.JobState_JOB_STATE_KILLED:
		return delegation.OutcomeKilled
	}
	return delegation.OutcomeMet
}

// settleReport settles the delegated job of the origin agreement a from
// the executing site's final record of it, pj (the site agent has learnt
// from it what the peer's service was).
func (n *Node) settleReport(a *agreementRec, pj *fedschedv1.Job, now int64) error {
	// This turn's writes first: the agreement may have been recorded
	// in this very turn, its job's record not yet committed.
	rec, err := n.jobRecord(a.JobID)
	if err != nil {
		return err
	}
	j := rec.Job
	j.StartTime, j.EndTime, j.ExitCode = pj.GetStartTime(), pj.GetEndTime(), pj.ExitCode
	if r := pj.GetReservation(); r != nil {
		j.Reservation = r
		if a.Quote.Start == 0 && a.Quote.End == 0 {
			// Delegated by a restored agree, which knows no slot: the
			// peer's is the one it agreed to.
			a.Quote.Start, a.Quote.End = r.GetStart().AsTime().Unix(), plan.Forever
			if r.GetEnd() != nil {
				a.Quote.End = r.GetEnd().AsTime().Unix()
			}
		}
	}
	if j.GetSpec().GetDeadline() != nil {
		j.SlaOutcome = pj.GetSlaOutcome()
		n.pending.putSLA(store.SLARecord{JobID: j.GetId(), Outcome: j.SlaOutcome, Fee: j.GetSpec().GetFee(), Penalty: j.GetSpec().GetPenalty(),
			PoF: j.GetPof(), DecidedAt: time.Unix(now, 0)})
	}
	ev := delegation.EventFinish
	if pj.GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED {
		if a.State == delegation.Observed {
			a.Apply(delegation.EventTerminate, now) //nolint:errcheck // observed -> terminating is allowed
		}
		ev = delegation.EventTerminated
	}
	a.Apply(ev, now) //nolint:errcheck // from observed or terminating both are allowed
	a.Outcome = outcomeOf(pj)
	a.Settled = true
	n.putAgreement(a, now)
	if j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED {
		n.setState(j, rec, pj.GetState(), pj.GetReason(), fmt.Sprintf("at %s: %s", a.Peer, pj.GetMessage()), now)
	} else {
		rec.Job = j
		n.pending.putJob(rec)
	}
	return nil
}

// jobRecord is job id's record: this turn's write if any, otherwise the
// store's.
func (n *Node) jobRecord(id string) (store.JobRecord, error) {
	if rec, ok := n.pending.jobs[id]; ok {
		return rec, nil
	}
	rec, err := n.deps.Store.GetJob(context.Background(), id)
	if err != nil {
		return rec, fmt.Errorf("job %s: %w: %w", id, ErrUnavailable, err)
	}
	return rec, nil
}

// agreedPrice is the price agreed with a peer for j, as the ledger needs it
// (metrics.transition): only at the end of a met SLA of a job delegated out
// or in (0 otherwise, and when the agreement had no price).
func (n *Node) agreedPrice(j *fedschedv1.Job, prev fedschedv1.JobState) float64 {
	if !terminal(j.GetState()) || terminal(prev) || j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
		return 0
	}
	out := j.GetSite() != n.cfg.Site
	if !out && (j.GetOriginSite() == "" || j.GetOriginSite() == n.cfg.Site) {
		return 0 // the site's own job, run here
	}
	// byOrigin indexes this site's own delegated jobs as (this site, job
	// id); a job run here for a peer is its agreement's id.
	if out {
		if a := n.agreements[n.byOrigin[originKey(n.cfg.Site, j.GetId())]]; a != nil && a.Role == roleOrigin && a.JobID == j.GetId() {
			return a.Quote.Price
		}
	} else if a := n.agreements[j.GetId()]; a != nil && a.Role == rolePeer && a.PeerJobID == j.GetId() {
		return a.Quote.Price
	}
	return 0
}

// agreedState reports whether a peer's agreement in state s means it took
// the job (it may have run it already).
func agreedState(s fedschedv1.AgreementState) bool {
	switch s {
	case fedschedv1.AgreementState_AGREEMENT_STATE_OBSERVED, fedschedv1.AgreementState_AGREEMENT_STATE_COMPLETE,
		fedschedv1.AgreementState_AGREEMENT_STATE_TERMINATED, fedschedv1.AgreementState_AGREEMENT_STATE_OBSERVED_AND_TERMINATING:
		return true
	}
	return false
}
