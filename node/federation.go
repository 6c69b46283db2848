package node

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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
	// AbsentSince is when the site Pending is owed to was first seen not
	// an alive member while the message was undelivered (0: it is alive,
	// or nothing is owed). Undelivered says what the site gave up
	// delivering and why (outbox.go).
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

// delegation is one in-flight delegation: the job waits in PENDING with
// reason DELEGATED until the protocol has run.
type inflight struct {
	seq   int64
	job   *fedschedv1.Job
	reply func(submitResult) // nil after recovery: nobody waits
	// peer is the site the origin decided to agree with, once persisted.
	peer, hold string
	// acf: the site would accept the job but not start it now; it is
	// offered, out of the plan, to peers that would start it now (ACF),
	// and comes back into the plan if none does.
	acf bool
	// offer is the transfer policy's decision (site.OfferFirst or
	// OfferRejected): what a quote must beat to be taken (site.Choose).
	offer site.OfferDecision
	// take: a peer took the job from this site's queue (RQF, rqf.go);
	// peer and hold name the taker's hold, which the site agrees to; the
	// job comes back into the plan if the taker does not confirm.
	take bool
}

// startDelegation marks a job as being delegated; the protocol runs after
// the mark is durable.
func (n *Node) startDelegation(lj *liveJob, local plan.Placement, d site.OfferDecision, now int64) {
	_, msg := rejectReason(local, lj.pj, n.cfg.Site, now)
	lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_DELEGATED,
		"no local slot ("+msg+"): asking peers for quotes", now)
	n.inflight[lj.seq] = &inflight{seq: lj.seq, job: lj.job(), offer: d}
}

// delegationResult is what a delegation goroutine found.
type delegationResult struct {
	seq     int64
	offer   *fedschedv1.Offer
	agreed  *fedschedv1.Agreement
	peer    string
	asked   []string
	refused []string
	// answers are every asked peer's answer, for explain.
	answers []*fedschedv1.QuoteAnswer
	err     error
	// intent: the goroutine has chosen and asks the loop to persist the
	// choice before it agrees.
	intent  bool
	proceed chan bool
}

func (o *delegationResult) run(n *Node, now int64) func(error) {
	fl := n.inflight[o.seq]
	lj := n.live[o.seq]
	if fl == nil || lj == nil {
		if o.proceed != nil {
			o.proceed <- false
		}
		return nil
	}
	if o.intent {
		// Write ahead: the origin records which peer it is about to agree
		// with, so that after a crash it asks that peer and no other.
		fl.peer, fl.hold = o.peer, o.offer.GetHoldId()
		lj.job().Route = append(lj.job().Route, &fedschedv1.RouteHop{Site: n.cfg.Site, PeerSite: o.peer, Reason: fedschedv1.Reason_REASON_DELEGATED,
			Message: "agreeing to the quote of " + o.peer + " (hold " + o.offer.GetHoldId() + ")", Time: toTime(now)})
		lj.rec.Job = lj.job()
		n.pending.putJob(lj.rec)
		return func(err error) { o.proceed <- err == nil }
	}
	delete(n.inflight, o.seq)
	n.noteQueued(o.seq, lj.pj.Estimate)
	lj.job().QuoteAnswers = append(lj.job().QuoteAnswers, o.answers...)
	if o.agreed != nil {
		a := o.agreed
		delete(n.live, o.seq)
		lj.job().Site = a.GetPeerSite()
		if off := a.GetOffer(); off != nil {
			lj.job().Reservation = &fedschedv1.Reservation{Start: off.GetStart(), End: off.GetEnd(), Procs: lj.job().GetSpec().GetProcs(), Site: a.GetPeerSite()}
			lj.job().Pof, lj.job().Overbooked = off.GetPof(), off.GetOverbooked()
		}
		lj.job().Route = append(lj.job().Route, &fedschedv1.RouteHop{Site: a.GetPeerSite(), PeerSite: n.cfg.Site, Reason: fedschedv1.Reason_REASON_RECEIVED_FROM_PEER,
			Message: "accepted as " + a.GetPeerJobId(), Time: toTime(now)})
		ag := &agreementRec{Role: roleOrigin, Seq: o.seq, Overbooked: a.GetOffer().GetOverbooked(), Agreement: delegation.Agreement{ID: a.GetId(), JobID: lj.job().GetId(),
			PeerJobID: a.GetPeerJobId(), Origin: n.cfg.Site, Peer: a.GetPeerSite(), State: delegation.Observed,
			Quote: delegation.Quote{Site: a.GetPeerSite(), HoldID: a.GetId(), Start: a.GetOffer().GetStart().AsTime().Unix(),
				End: a.GetOffer().GetEnd().AsTime().Unix(), PoF: a.GetOffer().GetPof(), Price: a.GetOffer().GetPrice()}}}
		n.putAgreement(ag, now)
		n.byOrigin[originKey(n.cfg.Site, ag.JobID)] = ag.ID
		msg := fmt.Sprintf("delegated to %s as %s (quotes asked of %v)", a.GetPeerSite(), a.GetPeerJobId(), o.asked)
		if fl.take {
			msg = fmt.Sprintf("delegated to %s as %s: it took the job from this site's queue to start it at once (RQF)", a.GetPeerSite(), a.GetPeerJobId())
		}
		lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_DELEGATED, fedschedv1.Reason_REASON_DELEGATED, msg, now)
	} else if fl.acf || fl.take {
		// The peer did not confirm: the job comes back to this site's plan.
		delete(n.live, o.seq)
		n.readmit(lj, now, " (after the peer it was offered to did not confirm)")
	} else {
		// No peer took a job the site had rejected: local admission
		// decides again, as the site agent's does (time has passed).
		msg := "; no peer offered a slot"
		if len(o.asked) == 0 {
			msg = "; no reachable peer could take the job"
		} else if len(o.refused) > 0 {
			msg += fmt.Sprintf(" (refused by %v)", o.refused)
		}
		if o.err != nil {
			msg += ": " + o.err.Error()
		}
		delete(n.live, o.seq)
		if !n.readmit(lj, now, msg) && lj.sla {
			n.pending.putSLA(store.SLARecord{JobID: lj.job().GetId(), Outcome: fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED, Fee: lj.pj.Fee, Penalty: lj.pj.Penalty})
		}
	}
	job := proto.Clone(lj.job()).(*fedschedv1.Job)
	return func(err error) {
		if fl.reply == nil {
			return
		}
		if err != nil {
			fl.reply(submitResult{err: fmt.Errorf("storing the delegation failed: %w: %w", ErrUnavailable, err)})
			return
		}
		fl.reply(submitResult{job: job})
	}
}

// candidates orders the reachable peers for a job into the rounds it asks
// them in (delegation.Rounds, as the site agent does).
func (n *Node) candidates(job *fedschedv1.Job, seq int64) [][]delegation.Candidate {
	cands := n.peerCandidates()
	route := routeOf(job.GetRoute())
	n.histMu.Lock()
	hist := maps2(n.history)
	n.histMu.Unlock()
	rng := rand.New(rand.NewPCG(uint64(seq), 0x5eed))
	return delegation.Rounds(cands, n.fed.Prefer, n.cfg.Site, int(job.GetSpec().GetProcs()), route, hist,
		delegation.LocationConfig{MaxCandidates: n.fed.MaxCandidates, Jitter: n.fed.Jitter}, rng)
}

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

func maps2(m map[string]delegation.History) map[string]delegation.History {
	out := make(map[string]delegation.History, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// rules are the site's settings as the shared decision rules of site/
// read them (site/rules.go): the node and the site agent decide offers,
// choices, holds and disclosures by the same functions.
func (n *Node) rules() *site.Rules {
	return &site.Rules{Name: n.cfg.Site, Procs: n.procs, Transfer: n.fed.Transfer, MaxHops: n.fed.MaxHops,
		CommunityShare: n.fed.CommunityShare, Pricing: n.fed.Pricing, Clear: n.clearOfStanding}
}

// mayDelegate applies delegation.max_hops to a job of this site: one
// whose route already holds MaxHops delegations is not delegated further
// (the rules of site/ apply it too, to offers, holds and disclosures).
func (n *Node) mayDelegate(route []*fedschedv1.RouteHop) bool {
	return routeOf(route).CanDelegate(n.fed.MaxHops)
}

// routeOf is a job's route as the shared rules read it: every site it has
// been at, and every site an origin was agreeing with (both count as
// visits: a job never goes back to a site it passed through); its
// delegations (Hops) are only the completed ones, where a site received
// it under an agreement. (An origin's DELEGATED hop may be an intent it
// abandoned in a crash; only the receiving hop proves the delegation
// happened.)
func routeOf(route []*fedschedv1.RouteHop) delegation.Route {
	r := make(delegation.Route, 0, len(route)+1)
	for _, h := range route {
		hop := delegation.Hop{Site: h.GetSite()}
		if h.GetReason() == fedschedv1.Reason_REASON_RECEIVED_FROM_PEER {
			hop.Action = delegation.ActionDelegated
		}
		r = append(r, hop)
		if h.GetReason() == fedschedv1.Reason_REASON_DELEGATED && h.GetPeerSite() != "" {
			r = append(r, delegation.Hop{Site: h.GetPeerSite()})
		}
	}
	return r
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

// delegate runs the protocol for one job off the loop: find an existing
// agreement (after a restart), else ask the ranked candidates for quotes in
// parallel, agree to the best, release the others. It reports back to the
// loop through ops.
func (n *Node) delegate(ctx context.Context, fl inflight) {
	job := fl.job
	res := &delegationResult{seq: fl.seq}
	defer func() { n.send(context.WithoutCancel(ctx), res) }() //nolint:errcheck // the loop stopping ends the delegation anyway
	if fl.take {
		res = n.settleTake(ctx, fl, res)
		return
	}
	// After a restart: a peer we were agreeing with is asked, and only it.
	if fl.peer != "" {
		a, err := n.findAgreement(ctx, fl.peer, job.GetId())
		switch {
		case err != nil:
			res.err = fmt.Errorf("cannot reach %s to settle a delegation in flight: %w", fl.peer, err)
			// Keep the job in flight; a later restart or retry settles it.
			n.retryDelegation(ctx, fl)
			res = &delegationResult{seq: -1}
			return
		case a != nil && agreedState(a.GetState()):
			res.agreed, res.peer = a, fl.peer
			return
		}
	}
	cands := n.candidates(job, fl.seq)
	if len(cands) == 0 && fl.reply == nil && !fl.offer.StartNow {
		// A delegation resumed after a restart, before gossip knows
		// any peer: wait for the membership rather than reject at once,
		// while the job can still make its deadline.
		if d := job.GetSpec().GetDeadline(); d == nil || n.now() < d.AsTime().Unix()-job.GetSpec().GetEstimateSeconds() {
			n.retryDelegation(ctx, fl)
			res = &delegationResult{seq: -1}
			return
		}
	}
	type quoted struct {
		site  string
		addr  string
		offer *fedschedv1.Offer
		rank  int // position in the location policy's order
	}
	var mu sync.Mutex
	var offers []quoted
	spec := job.GetSpec()
	ask := func(round []delegation.Candidate) {
		var wg sync.WaitGroup
		for rank, c := range round {
			res.asked = append(res.asked, c.Site)
			wg.Add(1)
			go func() {
				defer wg.Done()
				qctx, cancel := context.WithTimeout(ctx, n.fed.QuoteTimeout)
				defer cancel()
				var r *fedschedv1.QuoteResponse
				cl, err := n.client(qctx, c.Site, c.Addr)
				if err == nil {
					r, err = cl.Quote(qctx, &fedschedv1.QuoteRequest{OriginSite: n.cfg.Site, OriginJobId: job.GetId(), Spec: spec,
						Route: job.GetRoute(), HoldSeconds: n.fed.HoldSeconds, StartNow: fl.offer.StartNow})
				}
				n.metrics.quotesAsked.WithLabelValues(c.Site, quoteAnswer(r, err)).Inc()
				mu.Lock()
				defer mu.Unlock()
				res.answers = append(res.answers, answerOf(c.Site, r, err, n.now()))
				if err != nil {
					n.observeFailure(c.Site)
					return
				}
				if r.GetOffer() == nil {
					res.refused = append(res.refused, c.Site)
					return
				}
				offers = append(offers, quoted{site: c.Site, addr: c.Addr, offer: r.GetOffer(), rank: rank})
			}()
		}
		wg.Wait()
	}
	defer func() {
		slices.Sort(res.refused)
		slices.SortFunc(res.answers, func(a, b *fedschedv1.QuoteAnswer) int { return strings.Compare(a.GetPeerSite(), b.GetPeerSite()) })
	}()
	// release lets the peers of a round's offers idx go (holds expire by
	// themselves if this fails).
	release := func(round []quoted, idx []int) {
		for _, i := range idx {
			o := round[i]
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.fed.QuoteTimeout)
			if cl, err := n.client(rctx, o.site, o.addr); err == nil {
				cl.Release(rctx, &fedschedv1.ReleaseRequest{HoldId: o.offer.GetHoldId()}) //nolint:errcheck // holds expire by themselves
			}
			cancel()
		}
	}
	background := func(round []quoted, idx []int) {
		if len(idx) == 0 {
			return
		}
		n.bg.Add(1)
		go func() { defer n.bg.Done(); release(round, idx) }()
	}
	// Ordered spill-over: each preferred peer alone, in order, then the
	// location policy's ranking of the others. The site agent's choice
	// (site.Choose) decides each round; a round without a winner, or
	// whose winner does not confirm, is followed by the next (as the
	// site agent does), and only when none is left does the job fall
	// back to this site.
	for rounds := cands; len(rounds) > 0; {
		offers = offers[:0]
		ask(rounds[0])
		rounds = rounds[1:]
		// Rank order, whatever order the replies came in: Best breaks
		// ties by position.
		slices.SortFunc(offers, func(a, b quoted) int { return a.rank - b.rank })
		round := slices.Clone(offers)
		os := make([]*site.Offer, len(round))
		for i, o := range round {
			os[i] = &site.Offer{Quote: quoteOf(o.site, o.offer)}
		}
		best, losers := site.Choose(n.now(), fl.offer, spec.GetFee(), spec.GetPenalty(), os)
		if best < 0 {
			background(round, losers)
			continue
		}
		win := round[best]
		// Persist the choice before agreeing (write-ahead).
		intent := &delegationResult{seq: fl.seq, intent: true, peer: win.site, offer: win.offer, proceed: make(chan bool, 1)}
		if err := n.send(ctx, intent); err != nil {
			release(round, append(losers, best))
			res = &delegationResult{seq: -1}
			return
		}
		if ok, err := await(ctx, n, (<-chan bool)(intent.proceed)); err != nil || !ok {
			release(round, append(losers, best))
			res = &delegationResult{seq: -1}
			return
		}
		// The losers' holds are released off the critical path.
		background(round, losers)
		if res = n.agreeWith(ctx, fl, win.site, win.addr, win.offer.GetHoldId(), res); res.seq == -1 || res.agreed != nil {
			return
		}
		// A definite refusal (res.err): the next round, if any.
	}
}

// quoteOf is a peer's offer as the shared rules read it.
func quoteOf(peer string, o *fedschedv1.Offer) delegation.Quote {
	return delegation.Quote{Site: peer, HoldID: o.GetHoldId(), Start: o.GetStart().AsTime().Unix(), End: o.GetEnd().AsTime().Unix(),
		PoF: o.GetPof(), Price: o.GetPrice(), Expires: o.GetExpires().AsTime().Unix()}
}

// agreeWith agrees to a peer's hold for fl's job (a quote it chose, or the
// hold of a peer that takes the job under RQF): the agreement, a definite
// refusal (res.err), or, when the peer cannot be reached to tell whether
// it agreed, a later retry (a result with seq -1: nothing to settle yet).
func (n *Node) agreeWith(ctx context.Context, fl inflight, site, addr, hold string, res *delegationResult) *delegationResult {
	job := fl.job
	actx, cancel := context.WithTimeout(ctx, n.fed.QuoteTimeout)
	defer cancel()
	cl, err := n.client(actx, site, addr)
	if err == nil {
		var r *fedschedv1.AgreeResponse
		r, err = cl.Agree(actx, &fedschedv1.AgreeRequest{HoldId: hold, IdempotencyKey: job.GetId(),
			OriginSite: n.cfg.Site, OriginJobId: job.GetId()})
		if err == nil {
			res.agreed, res.peer = r.GetAgreement(), site
			return res
		}
	}
	// Agree failed. If the peer may have agreed (the reply was lost), ask;
	// only a definite answer lets the job go elsewhere or be rejected.
	a, ferr := n.findAgreement(ctx, site, job.GetId())
	switch {
	case ferr != nil:
		fl.peer, fl.hold = site, hold
		n.retryDelegation(ctx, fl)
		return &delegationResult{seq: -1}
	case a != nil && agreedState(a.GetState()):
		res.agreed, res.peer = a, site
	default:
		res.err = fmt.Errorf("%s did not confirm its quote: %v", site, err)
		n.observeFailure(site)
		if a != nil && a.GetState() == fedschedv1.AgreementState_AGREEMENT_STATE_PENDING {
			// It still holds the slot: let it go rather than keep it
			// held until it expires.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), n.fed.QuoteTimeout)
			if cl, cerr := n.client(rctx, site, addr); cerr == nil {
				cl.Release(rctx, &fedschedv1.ReleaseRequest{HoldId: hold}) //nolint:errcheck // holds expire by themselves
			}
			rcancel()
		}
	}
	return res
}

// findAgreement asks a peer for the agreement of an origin job: nil, nil if
// the peer has none.
func (n *Node) findAgreement(ctx context.Context, site, jobID string) (*fedschedv1.Agreement, error) {
	addr := n.addrOf(site)
	if addr == "" {
		return nil, fmt.Errorf("%s is not a known member: %w", site, ErrUnavailable)
	}
	gctx, cancel := context.WithTimeout(ctx, n.fed.QuoteTimeout)
	defer cancel()
	cl, err := n.client(gctx, site, addr)
	if err != nil {
		return nil, err
	}
	r, err := cl.GetAgreement(gctx, &fedschedv1.GetAgreementRequest{OriginSite: n.cfg.Site, OriginJobId: jobID})
	if CodeOf(FromStatus(err)) == 5 { // NotFound
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.GetAgreement(), nil
}

// retryDelegation schedules another attempt to settle an in-flight
// delegation whose peer was unreachable.
func (n *Node) retryDelegation(ctx context.Context, fl inflight) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.fed.ReportInterval):
		}
		n.delegate(ctx, fl)
	}()
}

func (n *Node) observeFailure(site string) {
	n.histMu.Lock()
	h := n.history[site]
	h.Failures++
	n.history[site] = h
	n.histMu.Unlock()
}

// ---------------------------------------------------------------------
// Peer side: quoting, agreeing, releasing.

type quoteOp struct {
	req   *fedschedv1.QuoteRequest
	reply chan quoteResult
}

type quoteResult struct {
	resp *fedschedv1.QuoteResponse
	err  error
}

func (o *quoteOp) run(n *Node, now int64) func(error) {
	resp, err := n.quote(o.req, now)
	if err == nil {
		n.metrics.quotesGiven.WithLabelValues(o.req.GetOriginSite(), quoteAnswer(resp, nil)).Inc()
	}
	return func(cerr error) {
		if cerr != nil && err == nil {
			err = fmt.Errorf("storing the hold failed: %w: %w", ErrUnavailable, cerr)
		}
		o.reply <- quoteResult{resp: resp, err: err}
	}
}

func refuse(reason fedschedv1.Reason, msg string) *fedschedv1.QuoteResponse {
	return &fedschedv1.QuoteResponse{Refusal: reason, Message: msg}
}

// quote answers a quote request (and an RQF pick) by the site agent's
// rule: site.MayHold, then site.HoldFor (start-now, standing
// reservations, community share, price); a refusal is mapped to its
// reason code (refusal).
func (n *Node) quote(req *fedschedv1.QuoteRequest, now int64) (*fedschedv1.QuoteResponse, error) {
	rules := n.rules()
	if r := site.MayHold(rules, routeOf(req.GetRoute())); r != nil {
		return refusal(r, plan.Job{}, now), nil
	}
	key := originKey(req.GetOriginSite(), req.GetOriginJobId())
	if id, ok := n.byOrigin[key]; ok {
		if a := n.agreements[id]; a != nil && a.State == delegation.Pending {
			return &fedschedv1.QuoteResponse{Offer: offerOf(a, n.cfg.Site)}, nil
		} else if a != nil && a.State == delegation.Observed {
			return refuse(fedschedv1.Reason_REASON_RECEIVED_FROM_PEER, "this site already runs the job under agreement "+a.ID), nil
		}
	}
	spec := req.GetSpec()
	if err := n.validateSpec(spec, now); err != nil {
		return nil, err
	}
	n.nextSeq++
	seq := int64(n.nextSeq)
	pj := planJob(spec, seq, now)
	until := site.HoldUntil(now, n.fed.HoldSeconds, req.GetHoldSeconds())
	pl, price, r := site.HoldFor(n.site, rules, now, pj, until, req.GetStartNow())
	if r != nil {
		return refusal(r, pj, now), nil
	}
	specB, _ := proto.Marshal(spec)
	routeB, _ := proto.Marshal(&fedschedv1.Job{Route: req.GetRoute()})
	a := &agreementRec{Role: rolePeer, Seq: seq, Spec: specB, Route: routeB, Overbooked: pl.Reason == plan.ReasonOverbooked, Agreement: delegation.Agreement{
		ID: jobID(n.cfg.Site, uint64(seq)), JobID: req.GetOriginJobId(), Origin: req.GetOriginSite(), Peer: n.cfg.Site, State: delegation.Pending,
		Quote: delegation.Quote{Site: n.cfg.Site, HoldID: jobID(n.cfg.Site, uint64(seq)), Start: pl.Start, End: pl.End, PoF: pl.PoF, Price: price, Expires: until}}}
	a.Updated = now
	n.agreements[a.ID] = a // a hold: memory only (see agreementRec.stored)
	n.addHold(a)
	n.byOrigin[key] = a.ID
	return &fedschedv1.QuoteResponse{Offer: offerOf(a, n.cfg.Site)}, nil
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

type agreeOp struct {
	req   *fedschedv1.AgreeRequest
	reply chan agreeResult
}

type agreeResult struct {
	a   *fedschedv1.Agreement
	err error
}

func (o *agreeOp) run(n *Node, now int64) func(error) {
	a, err := n.agree(o.req, now)
	return func(cerr error) {
		if cerr != nil && err == nil {
			err = fmt.Errorf("storing the agreement failed: %w: %w", ErrUnavailable, cerr)
		}
		o.reply <- agreeResult{a: a, err: err}
	}
}

func (n *Node) agree(req *fedschedv1.AgreeRequest, now int64) (*fedschedv1.Agreement, error) {
	a := n.agreements[req.GetHoldId()]
	// A hold is only this origin job's: after a restart a hold id may name
	// another job's hold, which must not be taken by mistake.
	if a == nil || a.Role != rolePeer || a.Origin != req.GetOriginSite() || a.JobID != req.GetOriginJobId() {
		return nil, fmt.Errorf("no hold %q for job %s of %s at %s: %w", req.GetHoldId(), req.GetOriginJobId(), req.GetOriginSite(), n.cfg.Site, ErrJobNotFound)
	}
	switch a.State {
	case delegation.Observed, delegation.Complete, delegation.ObservedAndTerminating, delegation.Terminated:
		if a.IdempotencyKey != req.GetIdempotencyKey() {
			return nil, fmt.Errorf("hold %s was agreed with another key: %w", a.ID, ErrIdempotencyConflict)
		}
		return n.agreementMsg(a), nil
	case delegation.Pending:
	default:
		return nil, fmt.Errorf("hold %s is %v (expired or released): %w", a.ID, a.State, ErrJobFinished)
	}
	pl, err := n.site.Confirm(now, a.Seq)
	if err != nil {
		a.Apply(delegation.EventExpire, now) //nolint:errcheck // pending -> rejected is always allowed
		n.dropHold(a, now)
		return nil, fmt.Errorf("hold %s expired before the agreement: %w", a.ID, ErrJobFinished)
	}
	if err := a.Apply(delegation.EventAgree, now); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJobFinished, err)
	}
	a.IdempotencyKey = req.GetIdempotencyKey()
	var spec fedschedv1.JobSpec
	var routeJob fedschedv1.Job
	if err := proto.Unmarshal(a.Spec, &spec); err != nil {
		return nil, fmt.Errorf("stored hold %s: %w: %w", a.ID, ErrUnavailable, err)
	}
	proto.Unmarshal(a.Route, &routeJob) //nolint:errcheck // a route is provenance only
	id := jobID(n.cfg.Site, uint64(a.Seq))
	a.PeerJobID = id
	job := &fedschedv1.Job{Id: id, Spec: &spec, Site: n.cfg.Site, OriginSite: a.Origin, SubmitTime: toTime(now), Route: routeJob.GetRoute()}
	job.Route = append(job.Route, &fedschedv1.RouteHop{Site: n.cfg.Site, PeerSite: a.Origin, Reason: fedschedv1.Reason_REASON_RECEIVED_FROM_PEER,
		Message: fmt.Sprintf("received from %s (its job %s) under agreement %s", a.Origin, a.JobID, a.ID), Time: toTime(now)})
	pj := planJob(&spec, a.Seq, now)
	lj := &liveJob{seq: a.Seq, j: job, pj: pj, sla: spec.GetDeadline() != nil}
	if pl.Reason != plan.ReasonQueued {
		api, over := n.reservationOf(pj.Procs, pl, pj.Estimate)
		job.Reservation, job.Pof, job.Overbooked = api, pl.PoF, over
	}
	if lj.sla {
		job.SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN
		n.pending.putSLA(store.SLARecord{JobID: id, Outcome: job.SlaOutcome, Fee: pj.Fee, Penalty: pj.Penalty, PoF: pl.PoF})
	}
	lj.rec = n.setState(job, store.JobRecord{Job: job}, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_RECEIVED_FROM_PEER,
		fmt.Sprintf("received from %s under agreement %s", a.Origin, a.ID), now)
	n.live[a.Seq] = lj
	n.putAgreement(a, now)
	return n.agreementMsg(a), nil
}

func (n *Node) agreementMsg(a *agreementRec) *fedschedv1.Agreement {
	out := &fedschedv1.Agreement{Id: a.ID, OriginSite: a.Origin, OriginJobId: a.JobID, PeerSite: a.Peer, PeerJobId: a.PeerJobID,
		State: fedschedv1.AgreementState(a.State), Offer: offerOf(a, a.Peer), UpdateTime: toTime(a.Updated), Undelivered: a.Undelivered}
	if lj := n.live[a.Seq]; lj != nil && a.Role == rolePeer {
		out.Job = proto.Clone(lj.job()).(*fedschedv1.Job)
	}
	return out
}

type releaseOp struct {
	id    string
	reply chan error
}

func (o *releaseOp) run(n *Node, now int64) func(error) {
	a := n.agreements[o.id]
	if a != nil && a.Role == rolePeer && a.State == delegation.Pending {
		n.site.Unhold(now, a.Seq)
		a.Apply(delegation.EventRelease, now) //nolint:errcheck // pending -> rejected is always allowed
		n.dropHold(a, now)
	}
	return func(err error) { o.reply <- err }
}

// dropHold records a rejected hold: a hold never written is forgotten; one
// written (restored state) is stored as rejected.
func (n *Node) dropHold(a *agreementRec, now int64) {
	if a.stored {
		n.putAgreement(a, now)
		return
	}
	delete(n.agreements, a.ID)
	if n.byOrigin[originKey(a.Origin, a.JobID)] == a.ID {
		delete(n.byOrigin, originKey(a.Origin, a.JobID))
	}
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
	case a == nil && n.agent != nil && o.req.GetAgreementId() == "" && n.heldAgreement(o.req.GetOriginSite(), o.req.GetOriginJobId(), now) != nil:
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
		n.kickReporter()
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

type reportOp struct {
	req   *fedschedv1.ReportOutcomeRequest
	reply chan error
}

func (o *reportOp) run(n *Node, now int64) func(error) {
	err := n.applyReport(o.req, now)
	return func(cerr error) {
		if err == nil {
			err = cerr
		}
		o.reply <- err
	}
}

// applyReport settles a delegated job at the origin from the peer's report.
func (n *Node) applyReport(req *fedschedv1.ReportOutcomeRequest, now int64) error {
	a := n.agreements[req.GetAgreementId()]
	if a == nil || a.Role != roleOrigin {
		if seq, ok := seqOf(n.cfg.Site, req.GetOriginJobId()); ok && n.inflight[int64(seq)] != nil {
			// The delegation has not recorded the agreement yet: retry.
			return fmt.Errorf("agreement %q of job %s is not recorded yet at %s: %w", req.GetAgreementId(), req.GetOriginJobId(), n.cfg.Site, ErrUnavailable)
		}
		return fmt.Errorf("no agreement %q at %s: %w", req.GetAgreementId(), n.cfg.Site, ErrJobNotFound)
	}
	if a.State == delegation.Complete || a.State == delegation.Terminated {
		return nil // a retried report
	}
	return n.settleReport(a, req.GetJob(), now, true)
}

// settleReport settles the delegated job of the origin agreement a from
// the executing site's final record of it, pj; learn: the peer's history
// learns from it here (a site agent learns by itself).
func (n *Node) settleReport(a *agreementRec, pj *fedschedv1.Job, now int64, learn bool) error {
	// This turn's writes first: the agreement may have been recorded
	// in this very turn, its job's record not yet committed.
	rec, ok := n.pending.jobs[a.JobID]
	if !ok {
		var err error
		if rec, err = n.deps.Store.GetJob(context.Background(), a.JobID); err != nil {
			return fmt.Errorf("job %s: %w: %w", a.JobID, ErrUnavailable, err)
		}
	}
	j := rec.Job
	j.StartTime, j.EndTime, j.ExitCode = pj.GetStartTime(), pj.GetEndTime(), pj.ExitCode
	if pj.GetReservation() != nil {
		j.Reservation = pj.GetReservation()
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
		if learn && pj.GetStartTime() != nil && pj.GetEndTime() != nil {
			n.histMu.Lock()
			h := n.history[a.Peer]
			site.ObserveOutcome(&h, int(j.GetSpec().GetProcs()), j.GetSpec().GetEstimateSeconds(), j.GetSubmitTime().AsTime().Unix(),
				pj.GetStartTime().AsTime().Unix(), pj.GetEndTime().AsTime().Unix())
			n.history[a.Peer] = h
			n.histMu.Unlock()
		}
		n.setState(j, rec, pj.GetState(), pj.GetReason(), fmt.Sprintf("at %s: %s", a.Peer, pj.GetMessage()), now)
	} else {
		rec.Job = j
		n.pending.putJob(rec)
	}
	return nil
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

// cancelDelegated cancels a job the site delegated: the job is CANCELLED at
// once and the peer is told (and retried) to terminate it.
func (n *Node) cancelDelegated(rec store.JobRecord, msg string, now int64) (*fedschedv1.Job, bool) {
	for _, a := range n.agreements {
		if a.Role != roleOrigin || a.JobID != rec.ID() || a.State != delegation.Observed {
			continue
		}
		a.Apply(delegation.EventTerminate, now) //nolint:errcheck // observed -> terminating is allowed
		a.Pending = "terminate"
		n.putAgreement(a, now)
		j := rec.Job
		if j.GetSpec().GetDeadline() != nil {
			j.SlaOutcome = fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED
			n.pending.putSLA(store.SLARecord{JobID: j.GetId(), Outcome: j.SlaOutcome, Fee: j.GetSpec().GetFee(), Penalty: j.GetSpec().GetPenalty(), DecidedAt: time.Unix(now, 0)})
		}
		rec = n.setState(j, rec, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER, msg+" (termination sent to "+a.Peer+")", now)
		n.kickReporter()
		return proto.Clone(rec.Job).(*fedschedv1.Job), true
	}
	return nil, false
}

type terminateOp struct {
	req   *fedschedv1.TerminateRequest
	reply chan agreeResult
}

func (o *terminateOp) run(n *Node, now int64) func(error) {
	a := n.agreements[o.req.GetAgreementId()]
	var res agreeResult
	switch {
	case a == nil || a.Role != rolePeer:
		res.err = fmt.Errorf("no agreement %q at %s: %w", o.req.GetAgreementId(), n.cfg.Site, ErrJobNotFound)
	case a.State == delegation.Observed:
		if lj := n.live[a.Seq]; lj != nil && !lj.cancelled {
			note := "terminated by the origin " + a.Origin
			if m := o.req.GetMessage(); m != "" {
				note += ": " + m
			}
			n.cancel(lj.job().GetId(), note, now)
		}
		res.a = n.agreementMsg(a)
	default:
		res.a = n.agreementMsg(a)
	}
	return func(err error) {
		if err != nil && res.err == nil {
			res.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		o.reply <- res
	}
}

// outboxItem is one message the reporter must deliver.
type outboxItem struct {
	id, kind, site string
	req            proto.Message
	absent         bool // the site was not an alive member at the last try
}

// outbox lists what must still be sent to other sites.
func (n *Node) outbox() []outboxItem {
	var out []outboxItem
	for _, a := range n.agreements {
		switch a.Pending {
		case "outcome":
			var j fedschedv1.Job
			proto.Unmarshal(a.PeerJob, &j) //nolint:errcheck // written by this node
			out = append(out, outboxItem{id: a.ID, kind: a.Pending, site: a.Origin, absent: a.AbsentSince != 0,
				req: &fedschedv1.ReportOutcomeRequest{AgreementId: a.ID, OriginJobId: a.JobID, Job: &j}})
		case "terminate":
			out = append(out, outboxItem{id: a.ID, kind: a.Pending, site: a.Peer, absent: a.AbsentSince != 0, req: &fedschedv1.TerminateRequest{AgreementId: a.ID}})
		}
	}
	slices.SortFunc(out, func(x, y outboxItem) int { return compareIDs(x.id, y.id) })
	return out
}

type deliveredOp struct{ id, kind string }

func (o *deliveredOp) run(n *Node, now int64) func(error) {
	if a := n.agreements[o.id]; a != nil && a.Pending == o.kind {
		a.Pending, a.AbsentSince = "", 0
		if o.kind == "terminate" {
			a.Apply(delegation.EventTerminated, now) //nolint:errcheck // terminating -> terminated is allowed
		}
		n.putAgreement(a, now)
	}
	return nil
}

type outboxOp struct{ reply chan []outboxItem }

func (o *outboxOp) run(n *Node, _ int64) func(error) {
	items := n.outbox()
	return func(error) { o.reply <- items }
}

func (n *Node) kickReporter() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// report delivers the outbox until ctx ends: outcomes to origins,
// terminations to peers, each retried until acknowledged.
func (n *Node) report(ctx context.Context) {
	t := time.NewTicker(n.fed.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
		o := &outboxOp{reply: make(chan []outboxItem, 1)}
		if n.send(ctx, o) != nil {
			continue
		}
		items, err := await(ctx, n, (<-chan []outboxItem)(o.reply))
		if err != nil {
			continue
		}
		for _, it := range items {
			addr := n.addrOf(it.site)
			if !n.aliveMember(it.site) {
				// Owed to a site that is not an alive member: counted
				// towards giving up; still tried while it has an address.
				n.send(ctx, &absentOp{id: it.id, kind: it.kind}) //nolint:errcheck // retried next round if lost
			} else if it.absent {
				n.send(ctx, &absentOp{id: it.id, kind: it.kind, back: true}) //nolint:errcheck // retried next round if lost
			}
			if addr == "" {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, n.fed.QuoteTimeout)
			cl, err := n.client(rctx, it.site, addr)
			if err == nil {
				switch r := it.req.(type) {
				case *fedschedv1.ReportOutcomeRequest:
					_, err = cl.ReportOutcome(rctx, r)
				case *fedschedv1.TerminateRequest:
					_, err = cl.Terminate(rctx, r)
				}
			}
			cancel()
			if err == nil || CodeOf(FromStatus(err)) == 5 { // delivered, or the other side forgot it
				n.send(ctx, &deliveredOp{id: it.id, kind: it.kind}) //nolint:errcheck // retried next round if lost
			}
		}
	}
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
