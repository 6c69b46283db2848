package site

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// The decision rules of a site, once: the site agent (agent.go, rqf.go)
// and the node (node/ops.go, node/federation.go, node/rqf.go) both call
// these functions, so that a rule measured in the simulator is the rule a
// live site runs. They read a plan.Site and the site's settings and
// return a decision; none reads a clock or does I/O (time is an argument),
// and none knows how its answer travels. What the two drivers may still
// differ in is listed in docs/architecture.md.

// Rules are the settings of one site that its decision rules read: the
// same fields a node's configuration and a scenario's site block give.
type Rules struct {
	// Name is the site's name.
	Name string
	// Procs is the site's processor count (the community share's base).
	Procs int
	// Transfer is the transfer policy.
	Transfer delegation.TransferMode
	// MaxHops limits how often a job is delegated (0 means 1).
	MaxHops int
	// CommunityShare is the share of processors kept for local users:
	// remote jobs are not held in slots that would leave less free.
	CommunityShare float64
	// Pricing prices the site's quotes (nil: free).
	Pricing delegation.Pricing
	// Clear keeps a placement just made clear of the site's standing
	// reservations (plan.KeepClearOfStanding over the site's rules and
	// its way of laying them): undo takes the placement out, redo makes
	// it again. Nil: the site has none.
	Clear func(now int64, pj plan.Job, pl plan.Placement, undo func(), redo func() plan.Placement) plan.Placement
}

// ---------------------------------------------------------------------
// The origin's side: whether a job is offered, and to whom it goes.

// OfferDecision is the push transfer policy's answer for one job: whether
// peers are asked before the site keeps it, and what a peer's quote must
// beat to be taken.
type OfferDecision struct {
	// Offer: ask peers for quotes.
	Offer bool
	// LocalEnd is when the site itself would finish the job (plan.Forever
	// when it has no slot for it, or under a queue policy no planned
	// end): a quote must end earlier to be taken.
	LocalEnd int64
	// StartNow asks only for quotes that start now (ACF: the job goes
	// only to a peer whose own policy would start it now).
	StartNow bool
}

// OfferFirst is the transfer policy before admission: under ACF, a job
// the site would accept but its own policy would not start now is offered,
// out of the plan, to peers that would start it now, and comes back to
// the site if none does. A job the site would not accept at all is left
// to admission, whose rejection OfferRejected decides on (under
// on-reject every job is). The job must still be delegable (route,
// MaxHops).
func OfferFirst(s *plan.Site, r *Rules, now int64, pj plan.Job, route delegation.Route) OfferDecision {
	if r.Transfer != delegation.ACF || !route.CanDelegate(r.MaxHops) {
		return OfferDecision{}
	}
	local := s.Probe(now, pj)
	if !local.OK() || !delegation.ShouldDelegate(r.Transfer, true, s.CanStartNow(now, pj)) {
		return OfferDecision{}
	}
	d := OfferDecision{Offer: true, LocalEnd: plan.Forever, StartNow: true}
	if local.Start != plan.Forever {
		d.LocalEnd = local.End
	}
	return d
}

// OfferRejected is the transfer policy after admission rejected a job (pl
// is its answer): under on-reject and ACF it is offered to peers, for any
// slot they hold, unless it may not be delegated again or it is malformed
// (no processors or estimate, a deadline already past: no peer could run
// it either, and the user should learn that at once).
func OfferRejected(r *Rules, route delegation.Route, pl plan.Placement) OfferDecision {
	if pl.OK() || pl.Reason == plan.ReasonRejectedInvalid || !route.CanDelegate(r.MaxHops) ||
		!delegation.ShouldDelegate(r.Transfer, false, false) {
		return OfferDecision{}
	}
	return OfferDecision{Offer: true, LocalEnd: plan.Forever}
}

// Choose picks where a job goes among the answers of one round of quote
// requests. offers are in the order the peers were asked (the location
// policy's rank), nil for a peer that refused or did not answer. A quote
// is taken only if it ends before the site's own placement (d.LocalEnd)
// and, when the site asked for start-now quotes, starts by now + skew: a
// peer that holds a slot starting at its own now may read a clock a
// little ahead of the asker's (a live federation's clocks are read a
// network latency apart, and a scaled clock multiplies that), and the
// agent passes its reply period, the oldest an answer can be; a peer
// whose transfer policy takes the job into its queue (Queued) promises no
// slot, and its acceptance is the migration. Start-now quotes are
// compared as starting at the asker's now (delegation.Quote.StartingAt),
// so that two peers reading their clocks a moment apart tie, and
// delegation.Best breaks ties by rank, never by name. It returns the
// winner's index (-1: none; the next round is asked, or the site keeps
// the job) and the indices of every other offer, whose holds the origin
// releases.
func Choose(now, skew int64, d OfferDecision, fee, penalty float64, offers []*Offer) (win int, release []int) {
	var qbuf [4]delegation.Quote // the usual few on the stack
	var ibuf [4]int
	quotes, idx := qbuf[:0], ibuf[:0]
	for i, o := range offers {
		if o == nil {
			continue
		}
		if !o.Queued && (o.End >= d.LocalEnd || d.StartNow && o.Start > now+skew) {
			release = append(release, i)
			continue
		}
		q := o.Quote
		if d.StartNow && !o.Queued {
			q = q.StartingAt(now)
		}
		quotes = append(quotes, q)
		idx = append(idx, i)
	}
	b := delegation.Best(quotes, fee, penalty, now)
	win = -1
	for k, i := range idx {
		if k == b {
			win = i
		} else {
			release = append(release, i)
		}
	}
	return win, release
}

// ObserveOutcome folds the outcome of a job delegated to a peer into what
// the origin knows of that peer (h, the location policy's history): its
// response ratio, (end − submitted) / estimate, and its squashed area
// and response time (EFS ranks peers by their AWRT). submitted is when
// the job was submitted at the origin; start and end are when it ran at
// the peer.
func ObserveOutcome(h *delegation.History, procs int, estimate, submitted, start, end int64) {
	if estimate > 0 {
		h.Observe(float64(end-submitted) / float64(estimate))
	}
	h.ObserveArea(procs, end-start, end-submitted)
}

// ---------------------------------------------------------------------
// The peer's side: holding a slot for a job another site asks about.

// RefusalKind says why a site holds no slot for a peer's job.
type RefusalKind int

// Refusal kinds; a node maps each to a fedschedv1.Reason.
const (
	// RefuseVisited: the job has been at this site before.
	RefuseVisited RefusalKind = iota + 1
	// RefuseMaxHops: taking the job would exceed this site's max_hops.
	RefuseMaxHops
	// RefuseNotStartNow: start-now was asked and this site's own policy
	// would not start the job now.
	RefuseNotStartNow
	// RefuseNoPlacement: the site has no slot (Placement.Reason says why).
	RefuseNoPlacement
	// RefuseNotNow: start-now was asked and the slot found starts later.
	RefuseNotNow
	// RefuseCommunityShare: the slot would leave less than the community
	// share to local users.
	RefuseCommunityShare
	// RefuseBudget: the job's fee does not cover the site's price.
	RefuseBudget
)

// Refusal is why a site holds no slot for a peer's job. Its message is
// the one both drivers give; a node gives a fuller one for
// RefuseNoPlacement (the window it searched).
type Refusal struct {
	Kind RefusalKind
	// Site is the refusing site.
	Site string
	// Placement is the site's answer (RefuseNoPlacement).
	Placement plan.Placement
	// Hops and MaxHops: the delegation the job's would be, and the limit
	// (RefuseMaxHops).
	Hops, MaxHops int
	// Share is the community share (RefuseCommunityShare).
	Share float64
	// Price and Fee: the site's price and the job's fee (RefuseBudget).
	Price, Fee float64
}

func (r *Refusal) Error() string {
	switch r.Kind {
	case RefuseVisited:
		return "the job has been at " + r.Site + " before"
	case RefuseMaxHops:
		return fmt.Sprintf("taking the job would be its delegation number %d; %s allows at most delegation.max_hops = %d", r.Hops, r.Site, r.MaxHops)
	case RefuseNotStartNow:
		return "this site's own policy would not start the job now"
	case RefuseNoPlacement:
		return r.Placement.Reason.String()
	case RefuseNotNow:
		return "this site would not start the job now"
	case RefuseCommunityShare:
		return fmt.Sprintf("the slot would leave less than %.0f %% of the site to its own users", 100*r.Share)
	case RefuseBudget:
		return delegation.BudgetRefusal(r.Price, r.Fee)
	}
	return fmt.Sprintf("refused (%d)", int(r.Kind))
}

// MayHold is the test of a peer's job before any slot is looked for: it
// has not been here (a job never comes back to a site it passed through;
// delegation.Route.WasAt: a site that only answered a quote for it was not
// there) and taking it stays within this site's max_hops.
func MayHold(r *Rules, route delegation.Route) *Refusal {
	if route.WasAt(r.Name) {
		return &Refusal{Kind: RefuseVisited, Site: r.Name}
	}
	if !route.CanDelegate(r.MaxHops) {
		return &Refusal{Kind: RefuseMaxHops, Site: r.Name, Hops: route.Hops() + 1, MaxHops: max(r.MaxHops, 1)}
	}
	return nil
}

// HoldUntil is when a hold made at now for a requester that asked for at
// most asked seconds (0: no bound) ends: the shorter of the two, never
// longer than the site grants (own).
func HoldUntil(now, own, asked int64) int64 {
	if asked > 0 {
		own = min(own, asked)
	}
	return now + own
}

// HoldFor holds a slot for a peer's job until `until`: the rule of a quote
// and of an RQF take alike (a take is a quote with startNow). With
// startNow, only if this site's own policy would start the job now
// (plan.Site.CanStartNow, ACF's acceptance test) and the slot starts now;
// the slot is kept clear of standing reservations; it never leaves less
// than the community share to local users; and the job's fee must cover
// the site's price (delegation.QuotePrice, Libra+$'s budget check). It
// returns the held placement and its price, or why it holds none (nothing
// is then held). pj.ID is the hold's id in the site.
func HoldFor(s *plan.Site, r *Rules, now int64, pj plan.Job, until int64, startNow bool) (plan.Placement, float64, *Refusal) {
	if startNow && !s.CanStartNow(now, pj) {
		return plan.Placement{}, 0, &Refusal{Kind: RefuseNotStartNow, Site: r.Name}
	}
	pl := s.Hold(now, pj, until)
	if r.Clear != nil { // the closures only then: they escape, one allocation each per quote
		pl = r.Clear(now, pj, pl, func() { s.Unhold(now, pj.ID) }, func() plan.Placement { return s.Hold(now, pj, until) })
	}
	if !pl.OK() {
		return pl, 0, &Refusal{Kind: RefuseNoPlacement, Site: r.Name, Placement: pl}
	}
	if startNow && pl.Start != now {
		s.Unhold(now, pj.ID)
		return pl, 0, &Refusal{Kind: RefuseNotNow, Site: r.Name}
	}
	if share := (delegation.CommunityShare{Share: r.CommunityShare}); share.Share > 0 {
		free := s.Plan().Profile().MinFree(pl.Start, pl.End) + pj.Procs
		if !share.Allows(pj.Procs, free, r.Procs) {
			s.Unhold(now, pj.ID)
			return pl, 0, &Refusal{Kind: RefuseCommunityShare, Site: r.Name, Share: share.Share}
		}
	}
	price, affordable := delegation.QuotePrice(r.Pricing, s.Plan().Profile(), pj, pl, now)
	if !affordable {
		s.Unhold(now, pj.ID)
		return pl, price, &Refusal{Kind: RefuseBudget, Site: r.Name, Price: price, Fee: pj.Fee}
	}
	return pl, price, nil
}

// ---------------------------------------------------------------------
// RQF: which waiting jobs a site lists, and when it asks.

// MaxDisclosed bounds how many waiting jobs one queue answer lists.
const MaxDisclosed = 64

// Discloses reports whether a job waiting here may be listed to a peer
// (asker, with free processors free) that asks for work under RQF: only
// jobs submitted here (origin), that may still be delegated, have not
// been at the asker (delegation.Route.WasAt: a peer that refused a quote
// for it may take it now), and fit its free processors. The answer lists
// them in queue order, at most MaxDisclosed.
func Discloses(r *Rules, origin string, route delegation.Route, procs int, asker string, free int) bool {
	return origin == r.Name && procs <= free && route.CanDelegate(r.MaxHops) && !route.WasAt(asker)
}

// PullRanking is the peers an idle RQF site asks for work, in the order
// it asks them: the location policy's ranking (delegation.Rank) of the
// peers other than itself that can run anything at all, a one-processor
// job standing for "any job".
func PullRanking(cands []delegation.Candidate, self string, hist map[string]delegation.History, loc delegation.LocationConfig, rng *rand.Rand) []delegation.Candidate {
	others := make([]delegation.Candidate, 0, len(cands))
	for _, c := range cands {
		if c.Site != self {
			others = append(others, c)
		}
	}
	return delegation.Rank(others, 1, nil, hist, loc, rng)
}

// IdleProcs is RQF's trigger: the free processors of a site with nothing
// waiting (it asks peers for work), 0 when it is busy or has a queue.
func IdleProcs(s *plan.Site, now int64) int {
	if s.Waiting() > 0 {
		return 0
	}
	return s.Plan().Free(now)
}

// NeverPulled is the last round of an RQF site that has not asked its
// peers yet (PullDue, NextPull).
const NeverPulled = math.MinInt64

// PullDue is RQF's timing rule: a site with idle processors and nothing
// waiting (idle, IdleProcs) asks its peers for their queues at most once
// per interval (every, seconds of the site's clock) since its last round
// (last, NeverPulled if none). A site checks it whenever something
// happens to it (a submission, a job's end, a peer's message) and at the
// wake NextPull gives.
func PullDue(idle int, last, now, every int64) bool {
	return idle > 0 && (last == NeverPulled || now >= last+every)
}

// NextPull is when an idle site asks its peers by itself, with nothing
// happening to it: at the first second from now on that is its offset
// (PullOffset) past a whole multiple of the interval on its clock, not
// within an interval of its last round (now itself only when now is on
// that grid: a site that has never asked, which PullDue finds due at any
// time, still waits for the grid here); plan.Forever when it is not idle.
// The grid is the clock's, whenever the site started (a node asks at the
// same seconds as the simulator's agent of a replay aligned to the
// interval), and a site with no workload of its own still finds work in a
// peer's queue.
func NextPull(idle int, last, now, every, offset int64) int64 {
	if idle == 0 || every <= 0 {
		return plan.Forever
	}
	t := now + ((offset-now)%every+every)%every
	if last != NeverPulled && t < last+every {
		t += every
	}
	return t
}

// PullOffset is a site's place on the interval's grid, from its name, so
// that the idle sites of a federation do not all ask at one second (and
// race for the same waiting jobs).
func PullOffset(name string, every int64) int64 {
	if every <= 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(name)) //nolint:errcheck // a hash does not fail
	return int64(h.Sum32()) % every
}
