package site

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// PeerView is the driver's membership view: the peers that may be asked
// for quotes now, with what they gossip (a hint, never a promise). The node
// reads it from memberlist digests, the simulator from the other agents'
// exact outlook; that difference is one of the drivers' (docs/architecture.md).
// The agent reads the slice Candidates returns before it calls again and
// keeps nothing of it, so a view may reuse it.
type PeerView interface {
	Candidates(now int64) []delegation.Candidate
}

// Overbooking configures the SLA admission test; nil in Config means every
// accepted job gets its full estimate. The names mirror the node's
// `overbooking:` block. The runtime-ratio statistics are the node's: by
// runtime band, empty at the start, learning from every job that
// completes here.
type Overbooking struct {
	Mode overbook.Mode
	// Test is the acceptance test of an overbooked placement (default
	// PoF < 0.1).
	Test overbook.Test
	// History are past jobs, in the order they ended, that train the
	// runtime statistics before the first submission (the node's
	// overbooking.history).
	History []PastJob
	// Failures is the node-failure model the PoF counts (availability at
	// the start, survival while running); the zero value: nodes never
	// fail. A driver that injects failures (NodeDown) sets the same rates.
	Failures overbook.FailureModel
	// AgeFactor and AgeEvery age the runtime statistics as the node's
	// overbooking.age_factor and age_every do (overbook.StatsConfig):
	// after every AgeEvery learnt jobs (0: 100) every sample's weight is
	// multiplied by AgeFactor; 0 or 1 never forgets. (The node's config
	// turns its own 0 into 0.9; a scenario does the same.)
	AgeFactor float64
	AgeEvery  int
	// MinSamples is the (aged) weight of samples a job's histogram must
	// hold before the job may be overbooked (overbooking.min_samples; 0:
	// overbook.DefaultAdmissionMinSamples).
	MinSamples float64
	// LearnOnly learns the statistics but does not overbook: a node with
	// overbooking.enabled false, whose statistics are ready when it
	// starts to. Mode, Test, Failures and MinSamples are then unused.
	LearnOnly bool
}

// PastJob is a job that ran before the site's first submission.
type PastJob struct {
	Job overbook.JobInfo
	Ran int64 // seconds it ran
	// Censored: it was cut short of its estimate (a trace's cancelled
	// job): it needed more than Ran.
	Censored bool
}

// Config configures an Agent. Zero values mean the defaults given.
type Config struct {
	// Name is the site's name, unique in the federation. Required.
	Name string
	// Procs is the number of processors. Required.
	Procs int
	// Policy is the queue policy. Overbooking requires Conservative.
	Policy plan.Policy
	// Overbooking, if not nil, lets admission overbook.
	Overbooking *Overbooking
	// Fixed are fixed reservations held from the start.
	Fixed []plan.FixedSpec
	// Standing are standing reservations held from the start: their
	// instances are laid as placements need them, every placement clear
	// of them, as a node does (standing.go).
	Standing []plan.Standing
	// StandingHorizon is how far ahead, in seconds, the instances of the
	// standing reservations are laid at least (a node's standing horizon;
	// 0: 7 days). Placements are clear of every instance whatever it is;
	// it sets which instances are in the plan (and the outlook) already.
	StandingHorizon int64
	// TrackMoves and NoGrowBack are passed to plan.Config (the node sets
	// both: it stores moved reservations and cannot move a kill time).
	TrackMoves, NoGrowBack bool

	// Peers is the membership view; nil runs the site alone.
	Peers PeerView
	// Transfer is the transfer policy (default on-reject).
	Transfer delegation.TransferMode
	// Rules are the EFS rule bases, one per partner (transfer EFS only,
	// where at least one is required).
	Rules delegation.RuleBases
	// Prefer lists peers in preference order (ordered spill-over): each is
	// asked alone, in turn, before the location policy ranks the others.
	Prefer []string
	// Location bounds and spreads the peers asked per round.
	Location delegation.LocationConfig
	// MaxHops limits how often a job is delegated (default 1).
	MaxHops int
	// HoldSeconds is the longest hold this site grants a quote (default 60).
	HoldSeconds int64
	// ReplySeconds is how long the agent waits for a peer's answer before
	// it decides without it, and how often it resends an unacknowledged
	// report or Terminate (default 60).
	ReplySeconds int64
	// PullSeconds is RQF's interval: an idle site asks its peers for work
	// at most once per interval, when something happens to it, and by
	// itself at every whole multiple of the interval on its clock while it
	// stays idle (PullDue, NextPull; default 60, a node's
	// delegation.pull_interval).
	PullSeconds int64
	// CommunityShare is the share of processors kept for local users:
	// remote jobs are not quoted into slots that would leave less free.
	CommunityShare float64
	// Pricing prices this site's quotes (nil: free); a job whose fee
	// does not cover the price is refused (Libra+$'s budget check).
	Pricing delegation.Pricing
	// Seed seeds the location policy's jitter; each job draws from its
	// own stream (Seed, job id), so a decision can be replayed.
	Seed uint64
}

// DecisionKind is what a Decision tells the driver.
type DecisionKind int

// Decision kinds.
const (
	// DecideAccept: the site accepted a job it will run (submitted here,
	// agreed with an origin, or taken from a peer's queue).
	DecideAccept DecisionKind = iota + 1
	// DecideReject: no site takes the job.
	DecideReject
	// DecideDelegate: a peer owns the job now (origin side).
	DecideDelegate
	// DecideStart: start the job now; kill it at End.
	DecideStart
	// DecideExtend: move a running job's kill time to End.
	DecideExtend
	// DecideOutcome: the origin learnt how its delegated job ended.
	DecideOutcome
	// DecideFailed: a node failure stopped the job (if it was running) or
	// took its reservation away (NodeDown). With Placement.OK() the job
	// was placed again inside its window, to run from the start (a
	// DecideStart follows); otherwise it is lost: the site runs it no
	// more, and the driver settles its SLA as the provider's failure.
	DecideFailed
	// DecideCancel: the job is cancelled (Cancel at this site, or a
	// Terminate from its origin, then Peer is the origin). A waiting job
	// has left the plan; a running one is killed (a DecideKill follows)
	// and keeps its processors until the driver calls End.
	DecideCancel
	// DecideKill: kill the running job now (it was cancelled); End
	// follows when its process has stopped.
	DecideKill
	// DecideTerminate (origin side): a Terminate for the job is owed to
	// Peer, the site that runs it, until a DecideAcked; a driver keeps it
	// across a restart.
	DecideTerminate
	// DecideReport (executing side): the outcome report of a job run for
	// Peer, its origin, is owed until a DecideAcked (Outcome).
	DecideReport
	// DecideAcked: Peer acknowledged what was owed for the job (a report,
	// a Terminate), or refused the agree of a job cancelled while it was
	// agreeing: nothing is owed to it any more.
	DecideAcked
	// DecideEnd: a job that ran here stopped (End): Outcome says how.
	// The runtime statistics have learnt from it (Ready.Learnt).
	DecideEnd
	// DecideOffer (origin side): the transfer policy offers the job to
	// peers (Spec, Route, Offer); it is out of the plan until a peer
	// takes it (DecideDelegate) or it comes back (DecideAccept,
	// DecideReject). After a restart it is offered again.
	DecideOffer
	// DecideAgree (origin side): the origin agrees to Peer's quote
	// (Placement, Price), or, with HandOver, to the hold of Peer, which
	// takes the job from this site's queue (RQF): the job has left the
	// plan. It is written ahead of the agree, so that after a restart the
	// origin asks that peer again and no other (the node's intent record).
	// If the peer's answer is lost and the job's report comes first, the
	// report settles the agreement as this quote.
	DecideAgree
	// DecideMove: a waiting job's reservation moved to Placement (the
	// scheduling pass or a failure, NodeDown, re-planned it; only with
	// Config.TrackMoves).
	DecideMove
	// DecideExpire: the queue (FCFS, EASY, LIST) could not start the job
	// before the last start that runs its estimate by its deadline: it is
	// dropped (a node rejects it, deadline unreachable, SLA violated); the
	// origin of a peer's job gets a report.
	DecideExpire
	// DecideReserve: an operator's fixed reservation (Fixed) is in the
	// plan (Reserve).
	DecideReserve
	// DecideUnreserve: the operator's reservation Fixed.ID is gone
	// (Unreserve).
	DecideUnreserve
	// DecideDisplaced: the reservation Fixed took the waiting job's slot:
	// with Placement.OK() it was placed again there, otherwise it is
	// dropped (a node rejects it, its SLA violated: the provider broke
	// it); the origin of a peer's job gets a report.
	DecideDisplaced
	// DecideGaveUp: the driver gave up on Peer for the job (GiveUp): what
	// was owed to it is no longer sent, and a delegated job's report, or
	// the answer to an agreeing job's agree, is no longer awaited (its
	// outcome stays unknown).
	DecideGaveUp
	// DecideStanding: the standing reservation Standing was added
	// (AddStanding).
	DecideStanding
	// DecideUnstanding: the standing reservation Standing was removed
	// (RemoveStanding).
	DecideUnstanding
)

var decisionNames = [...]string{"", "accept", "reject", "delegate", "start", "extend", "outcome", "failed",
	"cancel", "kill", "terminate", "report", "acked", "end", "offer", "agree", "move", "expire", "reserve", "unreserve", "displaced", "gave-up", "standing", "unstanding"}

func (k DecisionKind) String() string {
	if k > 0 && int(k) < len(decisionNames) {
		return decisionNames[k]
	}
	return fmt.Sprintf("DecisionKind(%d)", int(k))
}

// Decision is one thing the agent decided, for its driver to persist and
// carry out.
type Decision struct {
	Kind DecisionKind
	Job  JobKey
	// Placement is the admission answer (Accept, Reject), or the peer's
	// slot agreed to (Agree) or accepted (Delegate).
	Placement plan.Placement
	// Start and End are the reservation of Start and Extend.
	Start, End int64
	// Peer is the executing site (Delegate), the site a peer's job came
	// from (Accept: it asked for the quote or handed the job over), or the
	// peer the decision concerns (Agree, Terminate, Report, Acked,
	// Outcome, GaveUp; Cancel: the origin that terminated the job).
	Peer string
	// Route is the job's provenance so far.
	Route delegation.Route
	// Outcome is how a delegated job ended (Outcome).
	Outcome Outcome
	// Price is the price agreed with Peer (Agree, Delegate, and Accept of
	// a peer's job): the peer's quote (delegation.QuotePrice), 0 when the
	// peer does not price.
	Price float64
	// Spec is the job as this site knows it (Accept, Delegate, Offer, a
	// Failed that placed it again); Spec.ID is the agent's own id for it,
	// which Restore takes back.
	Spec plan.Job
	// Offer is what a peer's quote has to beat (DecideOffer).
	Offer OfferDecision
	// Fixed is an operator's reservation (Reserve, Unreserve, Displaced:
	// or an instance of a standing reservation, named by the rule).
	Fixed plan.FixedSpec
	// Standing is a standing reservation (Standing, Unstanding).
	Standing *plan.Standing
	// HandOver (Agree): the agree hands a job waiting here over to Peer,
	// which took it from the queue (RQF) under its hold; Peer refusing it
	// brings the job back here, to be placed again.
	HandOver bool
	// HoldID is Peer's hold the agree confirms (Agree), or the hold this
	// site accepted Peer's job under (Accept).
	HoldID string
}

// Ready is everything the agent decided since the last call to Ready: the
// driver persists the decisions, then sends the messages.
type Ready struct {
	Decisions []Decision
	Messages  []Message
	// Seq is the agent's id counter and PulledAt its last RQF round (or
	// NeverPulled) after the batch; a driver persists them with it, for
	// Restore.
	Seq, PulledAt int64
	// Learnt: the runtime statistics changed (Agent.Stats); Observed: the
	// peer histories changed (Agent.History). A driver that restores
	// persists them with the batch.
	Learnt, Observed bool
}

// Empty reports whether there is nothing to do.
func (r Ready) Empty() bool { return len(r.Decisions) == 0 && len(r.Messages) == 0 }

type state int

const (
	stateAsking    state = iota + 1 // origin: quote requests out
	stateAgreeing                   // origin: agree out
	stateLocal                      // accepted here: waiting or running
	stateDelegated                  // origin: a peer owns it
	stateHeld                       // peer: a hold backs a quote
	stateTaking                     // RQF: a hold backs a take request
)

type job struct {
	key   JobKey
	pj    plan.Job // pj.ID is this agent's id
	route delegation.Route
	state state
	// origin side
	offered bool          // the transfer policy has offered it to peers
	offer   OfferDecision // what a quote must beat (Choose)
	rounds  [][]string    // candidate rounds still to ask
	asked   []string      // this round, in rank order
	// waiting and offers are by position in asked: whether the peer's
	// answer is still awaited, and its offer. A name asked twice is one
	// peer: its answer settles both positions.
	waiting  []bool
	offers   []*Offer
	deadline int64 // answers are waited for until here
	peer     string
	// executing side
	from    string // the site that asked for the quote (or handed the job over)
	started bool
	start   int64
	place   plan.Placement
	expires int64   // hold expiry
	price   float64 // the quote's price (delegation.QuotePrice)
	// holdID: the hold's (held, taking; holdName), or, at an origin
	// whose agree is out, the peer's hold it agrees to.
	holdID string
	// cancelled: cancelled while running (killed, its End to come),
	// agreeing (the agree's answer to come) or delegated (a Terminate
	// owed or sent, the report to come).
	cancelled bool
	queued    bool  // EFS: taken into the queue at agree, no hold
	at        int64 // EFS: when the peer's transfer policy took it
	// handOver (origin, agreeing): the agree hands the job over to peer,
	// which took it from this site's queue (RQF).
	handOver bool
}

// awaits reports whether peer's answer to the job's quote requests is
// still awaited.
func (jb *job) awaits(peer string) bool {
	for i, p := range jb.asked {
		if p == peer && jb.waiting[i] {
			return true
		}
	}
	return false
}

// answered records peer's answer (offer nil: a refusal, or none in time).
func (jb *job) answered(peer string, offer *Offer) {
	for i, p := range jb.asked {
		if p == peer {
			jb.waiting[i] = false
			if offer != nil {
				jb.offers[i] = offer
			}
		}
	}
}

// Agent is one site's decision core.
type Agent struct {
	cfg Config
	// rank is the location policy (Rounds) and the history of the peers
	// it reads.
	rank *delegation.Ranker
	// rules are the site's settings as the shared decision rules read
	// them (rules.go).
	rules Rules
	site  *plan.Site
	adm   *overbook.Admission
	stats *overbook.Stats // what admission reads, or what a LearnOnly site learns
	seq   int64
	jobs  map[JobKey]*job
	byID  map[int64]*job
	// waits holds the jobs in a state with a time limit (asking, agreeing,
	// held, taking): NextWake and Tick look only at them.
	waits map[JobKey]*job
	// owed are the messages resent until acknowledged: the reports of jobs
	// run for peers, and the Terminates of this site's cancelled jobs
	// (their keys never collide: a report's job is a peer's, a
	// Terminate's this site's).
	owed    map[JobKey]*owedMsg
	ready   Ready
	spare   Ready // a batch the driver handed back (Recycle), for the next one
	dirty   bool  // an event since the last Tick: a pass is due
	rqfAt   int64 // last time RQF asked peers (NeverPulled: never)
	ids     []int64
	waitBuf []int64 // EFS: the waiting jobs' ids
	// laidTo: every instance of the standing rules that starts before it
	// is in the plan; fixedID is the last core id given to one, or to an
	// operator's reservation (Reserve).
	laidTo, fixedID int64
	// laid are the standing rules' instances in the plan, by rule name.
	laid map[string]*standingRule
	// reserved are the operators' reservations Reserve made.
	reserved map[int64]plan.FixedSpec
}

// owedMsg is a message owed until acknowledged, and when it is next sent.
type owedMsg struct {
	msg  Message
	next int64
}

// New returns the agent of an empty site.
func New(cfg Config) (*Agent, error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("site agent: no name: %w", ErrInvalid)
	}
	if cfg.MaxHops > 1 {
		// No rule offers on a job a site received, so a higher limit
		// would change nothing.
		return nil, fmt.Errorf("site agent %s: max hops %d: a job is delegated at most once (0 or 1): %w", cfg.Name, cfg.MaxHops, ErrInvalid)
	}
	if cfg.MaxHops < 0 || cfg.HoldSeconds < 0 || cfg.ReplySeconds < 0 || cfg.PullSeconds < 0 || cfg.StandingHorizon < 0 || !(cfg.CommunityShare >= 0 && cfg.CommunityShare < 1) ||
		cfg.Location.MaxCandidates < 0 || math.IsNaN(cfg.Location.Jitter) || math.IsInf(cfg.Location.Jitter, 0) {
		return nil, fmt.Errorf("site agent %s: negative or non-finite setting: %w", cfg.Name, ErrInvalid)
	}
	if cfg.Transfer < delegation.OnReject || cfg.Transfer > delegation.EFS {
		return nil, fmt.Errorf("site agent %s: transfer policy %v: %w", cfg.Name, cfg.Transfer, ErrInvalid)
	}
	if (cfg.Transfer == delegation.EFS) != (len(cfg.Rules) > 0) {
		return nil, fmt.Errorf("site agent %s: transfer %v with %d EFS rule bases (efs needs them, the others use none): %w",
			cfg.Name, cfg.Transfer, len(cfg.Rules), ErrInvalid)
	}
	if cfg.MaxHops == 0 {
		cfg.MaxHops = 1
	}
	if cfg.HoldSeconds == 0 {
		cfg.HoldSeconds = 60
	}
	if cfg.ReplySeconds == 0 {
		cfg.ReplySeconds = 60
	}
	if cfg.PullSeconds == 0 {
		cfg.PullSeconds = 60
	}
	pc := plan.Config{Procs: cfg.Procs, Policy: cfg.Policy, Fixed: cfg.Fixed, TrackMoves: cfg.TrackMoves, NoGrowBack: cfg.NoGrowBack}
	a := &Agent{cfg: cfg, jobs: make(map[JobKey]*job), byID: make(map[int64]*job), waits: make(map[JobKey]*job),
		rank: delegation.NewRanker(cfg.Name, cfg.Prefer, cfg.Location),
		owed: make(map[JobKey]*owedMsg), reserved: make(map[int64]plan.FixedSpec), rqfAt: NeverPulled, laidTo: plan.Never,
		laid: make(map[string]*standingRule)}
	cfg.Standing = slices.Clone(cfg.Standing) // AddStanding and RemoveStanding change it
	a.cfg.Standing = cfg.Standing
	for i := range cfg.Standing {
		a.laid[cfg.Standing[i].Name] = &standingRule{inst: map[int64]plan.Window{}}
		if err := cfg.Standing[i].Validate(); err != nil {
			return nil, fmt.Errorf("site agent %s: %w: %w", cfg.Name, err, ErrInvalid)
		}
		if cfg.Standing[i].Procs > cfg.Procs {
			return nil, fmt.Errorf("site agent %s: standing reservation %q holds %d processors of %d: %w", cfg.Name, cfg.Standing[i].Name, cfg.Standing[i].Procs, cfg.Procs, ErrInvalid)
		}
	}
	for _, f := range cfg.Fixed {
		a.fixedID = min(a.fixedID, f.ID)
	}
	if o := cfg.Overbooking; o != nil {
		if o.MinSamples < 0 || math.IsNaN(o.MinSamples) {
			return nil, fmt.Errorf("site agent %s: overbooking min samples %v: %w", cfg.Name, o.MinSamples, ErrInvalid)
		}
		if cfg.Policy != plan.Conservative && !o.LearnOnly {
			return nil, fmt.Errorf("site agent %s: overbooking needs the conservative policy (the queue policies keep no reservations to overbook), not %v: %w", cfg.Name, cfg.Policy, ErrInvalid)
		}
		st, err := overbook.NewStats(overbook.StatsConfig{Classifier: overbook.ByRuntime, AgeFactor: o.AgeFactor, AgeEvery: o.AgeEvery})
		if err != nil {
			return nil, fmt.Errorf("site agent %s: %w", cfg.Name, err)
		}
		for _, h := range o.History {
			if err := st.Record(h.Job, overbook.Observation{Ran: h.Ran, Censored: h.Censored}); err != nil {
				return nil, fmt.Errorf("site agent %s: overbooking history: %w", cfg.Name, err)
			}
		}
		a.stats = st
		if !o.LearnOnly {
			a.adm = &overbook.Admission{Stats: st, Mode: o.Mode, Test: o.Test, Failures: o.Failures, Learn: true, MinSamples: o.MinSamples}
			pc.Admission = a.adm
		}
	}
	s, err := plan.NewSite(pc)
	if err != nil {
		return nil, fmt.Errorf("site agent %s: %w", cfg.Name, err)
	}
	a.site = s
	a.rules = Rules{Name: cfg.Name, Procs: cfg.Procs, Transfer: cfg.Transfer, MaxHops: cfg.MaxHops, CommunityShare: cfg.CommunityShare,
		Pricing: cfg.Pricing}
	if len(cfg.Standing) > 0 {
		a.rules.Clear = a.clearOfStanding
	}
	return a, nil
}

// Name is the site's name.
func (a *Agent) Name() string { return a.cfg.Name }

// Site is the agent's scheduling core, for reading (outlook, plan, status).
// Callers must not change it.
func (a *Agent) Site() *plan.Site { return a.site }

// History is what delegations to each peer achieved, as this site saw it.
// Callers must not change it.
func (a *Agent) History() map[string]delegation.History { return a.rank.History() }

// Stats are the runtime statistics the site learns, nil without
// Config.Overbooking. Callers must not change them.
func (a *Agent) Stats() *overbook.Stats { return a.stats }

// Ready returns the batch decided since the last call and starts a new one.
func (a *Agent) Ready() Ready {
	r := a.ready
	r.Seq, r.PulledAt = a.seq, a.rqfAt
	a.ready = Ready{Decisions: a.spare.Decisions, Messages: a.spare.Messages}
	a.spare = Ready{}
	return r
}

// Recycle hands back a batch Ready returned, once the driver is done with
// it (it keeps nothing of its slices): the agent fills the same arrays
// again after the next call to Ready, instead of growing new ones for
// every batch. A driver that keeps its batches need not call it.
func (a *Agent) Recycle(r Ready) {
	clear(r.Decisions)
	clear(r.Messages)
	a.spare = Ready{Decisions: r.Decisions[:0], Messages: r.Messages[:0]}
}

func (a *Agent) decide(d Decision) { a.ready.Decisions = append(a.ready.Decisions, d) }

func (a *Agent) send(m Message) {
	m.From = a.cfg.Name
	a.ready.Messages = append(a.ready.Messages, m)
}

func (a *Agent) add(j *job) {
	a.jobs[j.key] = j
	a.byID[j.pj.ID] = j
}

func (a *Agent) forget(j *job) {
	delete(a.jobs, j.key)
	delete(a.byID, j.pj.ID)
	delete(a.waits, j.key)
}

// set moves j to state st, keeping waits up to date.
func (a *Agent) set(j *job, st state) {
	j.state = st
	switch st {
	case stateAsking, stateAgreeing, stateHeld, stateTaking:
		a.waits[j.key] = j
	default:
		delete(a.waits, j.key)
	}
}

func (a *Agent) nextID() int64 {
	a.seq++
	return a.seq
}

// Submit takes a job a local user submitted at now, under the site's id for
// it (unique at this site). The transfer policy decides whether peers are
// asked first; otherwise, or when none takes it, local admission decides.
func (a *Agent) Submit(now int64, id int64, j plan.Job) {
	a.dirty = true
	j.ID = a.nextID()
	jb := &job{key: JobKey{Site: a.cfg.Name, ID: id}, pj: j,
		route: delegation.Route{{Site: a.cfg.Name, Action: delegation.ActionSubmitted, At: now}}}
	if _, dup := a.jobs[jb.key]; dup {
		a.decide(Decision{Kind: DecideReject, Job: jb.key, Placement: plan.Placement{Reason: plan.ReasonRejectedInvalid}, Route: jb.route})
		return
	}
	a.add(jb)
	if !a.offer(now, jb) {
		a.admit(now, jb)
	}
}

// offer runs the push transfer policy for jb before admission
// (OfferFirst) and starts asking peers; it reports false when the job
// goes to admission, whose rejection may still offer it (admit).
func (a *Agent) offer(now int64, jb *job) bool {
	if a.cfg.Peers == nil || !jb.route.CanDelegate(a.cfg.MaxHops) {
		return false
	}
	if a.cfg.Transfer == delegation.EFS {
		return a.offerEFS(now, jb)
	}
	d := OfferFirst(a.site, &a.rules, now, jb.pj, jb.route)
	return d.Offer && a.offerTo(now, jb, d)
}

// offerTo starts asking the peers for quotes that beat d; false when no
// peer may be asked.
func (a *Agent) offerTo(now int64, jb *job, d OfferDecision) bool {
	jb.offered, jb.offer = true, d
	jb.rounds = a.rounds(now, jb)
	return a.asking(now, jb)
}

// asking sends the first round's quote requests of an offer, and records
// the offer (DecideOffer); false when no peer may be asked.
func (a *Agent) asking(now int64, jb *job) bool {
	if !a.ask(now, jb) {
		return false
	}
	a.decide(Decision{Kind: DecideOffer, Job: jb.key, Route: jb.route, Spec: jb.pj, Offer: jb.offer})
	return true
}

// rounds orders the peers to ask: each preferred peer alone, in the
// operator's order, then the location policy's ranking of the others.
func (a *Agent) rounds(now int64, jb *job) [][]string {
	// The jitter is drawn from the stream (Seed, the job's id here), so
	// that a decision can be replayed.
	rs := a.rank.Rounds(a.cfg.Peers.Candidates(now), jb.pj.Procs, jb.route, a.cfg.Seed, uint64(jb.pj.ID))
	rounds := make([][]string, len(rs))
	for i, r := range rs {
		rounds[i] = make([]string, len(r))
		for k, c := range r {
			rounds[i][k] = c.Site
		}
	}
	return rounds
}

// ask sends the next round's quote requests; false when no round is left.
func (a *Agent) ask(now int64, jb *job) bool {
	if len(jb.rounds) == 0 {
		return false
	}
	jb.asked, jb.rounds = jb.rounds[0], jb.rounds[1:]
	a.set(jb, stateAsking)
	jb.waiting = make([]bool, len(jb.asked))
	jb.offers = make([]*Offer, len(jb.asked))
	jb.deadline = now + a.cfg.ReplySeconds
	spec := jb.pj
	spec.ID = 0
	for i, p := range jb.asked {
		jb.waiting[i] = true
		a.send(Message{Kind: KindQuoteRequest, To: p, Job: jb.key, Spec: spec, Route: jb.route, StartNow: jb.offer.StartNow, HoldSeconds: a.cfg.HoldSeconds})
	}
	return true
}

// admit runs local admission for jb; a job it rejects that has not been
// offered yet goes to the peers if the transfer policy says so
// (OfferRejected).
func (a *Agent) admit(now int64, jb *job) {
	pl := a.site.Submit(now, jb.pj)
	pl = a.clearOfStanding(now, jb.pj, pl, func() { a.site.Cancel(now, jb.pj.ID) }, func() plan.Placement { return a.site.Submit(now, jb.pj) })
	if !pl.OK() {
		if !jb.offered && a.cfg.Peers != nil && jb.key.Site == a.cfg.Name {
			if d := OfferRejected(&a.rules, jb.route, pl); d.Offer && a.offerTo(now, jb, d) {
				return
			}
		}
		// Only this site's own jobs come here (a peer's is accepted by
		// agree, under its hold); settle reports none.
		a.settle(now, jb, Decision{Kind: DecideReject, Job: jb.key, Placement: pl, Route: jb.route}, dropped(now))
		return
	}
	a.set(jb, stateLocal)
	jb.place = pl
	a.decide(Decision{Kind: DecideAccept, Job: jb.key, Placement: pl, Peer: jb.from, Route: jb.route, Spec: jb.pj})
}

// choose picks among the offers of the round that has ended (Choose):
// the winner is asked to agree, the others are released; with no winner
// the next round is asked, or the site admits the job itself.
func (a *Agent) choose(now int64, jb *job) {
	// jb.offers is in rank order: Best breaks ties by position.
	win, release := Choose(now, a.cfg.ReplySeconds, jb.offer, jb.pj.Fee, jb.pj.Penalty, jb.offers)
	for _, i := range release {
		a.send(Message{Kind: KindRelease, To: jb.asked[i], Job: jb.key})
	}
	if win < 0 {
		if !a.ask(now, jb) {
			a.admit(now, jb)
		}
		return
	}
	a.set(jb, stateAgreeing)
	jb.peer, jb.holdID = jb.asked[win], jb.offers[win].HoldID
	jb.place, jb.price = offerPlacement(jb.offers[win]), jb.offers[win].Price // what is agreed to
	jb.deadline = now + a.cfg.ReplySeconds
	a.decide(Decision{Kind: DecideAgree, Job: jb.key, Peer: jb.peer, Placement: jb.place, Price: jb.price, HoldID: jb.holdID})
	a.send(Message{Kind: KindAgree, To: jb.peer, Job: jb.key, HoldID: jb.holdID})
}

// offerPlacement is the slot a peer's offer promises.
func offerPlacement(o *Offer) plan.Placement {
	pl := plan.Placement{Start: o.Start, End: o.End, PoF: o.PoF, Reason: plan.ReasonPlacedInFull}
	if o.Overbooked {
		pl.Reason = plan.ReasonOverbooked
	}
	return pl
}

// delegated records that jb's peer took it, in slot pl at price.
func (a *Agent) delegated(now int64, jb *job, pl plan.Placement, price float64) {
	why := "the peer's quote ends earlier than the local placement"
	if jb.handOver {
		why = reasonTaken
	}
	jb.route = jb.route.With(delegation.Hop{Site: jb.peer, Action: delegation.ActionDelegated, At: now, Reason: why})
	a.decide(Decision{Kind: DecideDelegate, Job: jb.key, Placement: pl, Peer: jb.peer, Route: jb.route, Price: price, Spec: jb.pj})
}

// End tells the agent that a job it started stopped at now: completed by
// itself, or killed at the end of its reservation. Unknown jobs are
// ignored and reported false.
func (a *Agent) End(now int64, key JobKey, completed bool) bool {
	return a.end(now, key, completed, false)
}

// Fail tells the agent that a job it started stopped at now for a reason
// that says nothing of how long it needed: its process could not be
// started, was lost, or the site failed it (a node's FAILED jobs). The
// statistics learn nothing from it; its origin's report says it failed.
// Unknown jobs are ignored and reported false.
func (a *Agent) Fail(now int64, key JobKey) bool { return a.end(now, key, false, true) }

func (a *Agent) end(now int64, key JobKey, completed, failed bool) bool {
	jb := a.jobs[key]
	if jb == nil || jb.state != stateLocal || !jb.started {
		return false
	}
	a.dirty = true
	a.site.End(now, jb.pj.ID)
	ran := now - jb.start
	if a.stats != nil && !failed {
		// The node's rule: a job that ended by itself shows its runtime; a
		// killed one only that it needed more than it ran (censored), never
		// how much more, which would be an oracle no live site has. A job
		// cancelled while it ran was cut too, whatever its exit.
		cut := !completed || jb.cancelled
		o := overbook.Observation{Ran: ran, Censored: cut && ran < jb.pj.Estimate}
		if a.adm != nil {
			a.adm.Record(&jb.pj, o) //nolint:errcheck // a job without a usable estimate is not learnt from
		} else {
			pj := &jb.pj
			a.stats.Record(overbook.JobInfo{ID: pj.ID, Procs: pj.Procs, Estimate: pj.Estimate, User: pj.User, App: pj.App}, o) //nolint:errcheck // as above
		}
		a.ready.Learnt = true
	}
	out := Outcome{Start: jb.start, End: now, Completed: completed, Cancelled: jb.cancelled, Failed: failed}
	a.settle(now, jb, Decision{Kind: DecideEnd, Job: key, Outcome: out}, out)
	return true
}

// settle forgets jb, which leaves the site by decision d (none if
// d.Kind is 0: decided already), with its admission entry; the origin of
// a peer's job is owed its outcome (out). Every way a job accepted here
// ends or is dropped goes through it.
func (a *Agent) settle(now int64, jb *job, d Decision, out Outcome) {
	if a.adm != nil {
		a.adm.Forget(jb.pj.ID)
	}
	a.forget(jb)
	if d.Kind != 0 {
		a.decide(d)
	}
	if jb.key.Site != a.cfg.Name {
		a.report(now, jb.key, out)
	}
}

// dropped is the outcome of a job dropped at now before it started.
func dropped(now int64) Outcome { return Outcome{Start: now, End: now, Dropped: true} }

// report owes the origin of a job run here its outcome, until it
// acknowledges (DecideReport).
func (a *Agent) report(now int64, key JobKey, o Outcome) {
	a.owe(now, Message{Kind: KindReport, To: key.Site, Job: key, Outcome: o})
	a.decide(Decision{Kind: DecideReport, Job: key, Peer: key.Site, Outcome: o})
}

// owe sends m, and again every ReplySeconds until its acknowledgement.
func (a *Agent) owe(now int64, m Message) {
	a.owed[m.Job] = &owedMsg{msg: m, next: now + a.cfg.ReplySeconds}
	a.send(m)
}

// NextID is the id the agent gives the next job it takes (a submission,
// a peer's quote request or a take): a driver that names its jobs by the
// agent's ids calls Submit with it, so that one number names a local job
// for both (a node's job ids).
func (a *Agent) NextID() int64 { return a.seq + 1 }

// GiveUp tells the agent that its driver gives up on the peer it owes a
// report or a Terminate for key, whose report of the delegated job key it
// awaits, or whose answer to the agree for key it awaits (its quote's, or
// the hold of an RQF taker the job is handed over to): a node gives up on
// a peer that has not been an alive member for outbox_give_up. Nothing
// more is sent about the job, and a delegated or agreeing job is
// forgotten, its outcome unknown (DecideGaveUp): an agreeing job may have
// been accepted and run by the peer, so it is not placed here (that could
// run it twice), as a delegated job's is not. It reports false if nothing
// is owed or awaited for key.
func (a *Agent) GiveUp(now int64, key JobKey) bool {
	r, owed := a.owed[key]
	jb := a.jobs[key]
	// awaited: jb.peer's report (delegated) or its answer to the agree
	// (agreeing) is awaited.
	awaited := jb != nil && (jb.state == stateDelegated || jb.state == stateAgreeing)
	if !owed && !awaited {
		return false
	}
	peer := ""
	if owed {
		peer = r.msg.To
		delete(a.owed, key)
	}
	if awaited {
		peer = jb.peer
		a.forget(jb)
	}
	a.decide(Decision{Kind: DecideGaveUp, Job: key, Peer: peer})
	return true
}

// Cancel takes a user's cancel of a job at this site: its own job in any
// state, or one it runs for a peer (the node lets a site's operator cancel
// those too; their origin gets a report). A waiting job leaves the plan.
// A running one is killed (DecideKill); it keeps its processors until the
// driver calls End, and the statistics learn from it as censored. A job
// being offered to peers stops being offered: the holds its peers granted
// are released (a quote still to come is released when it comes). A job
// whose agree is out stays until the peer answers: if it took the job, a
// Terminate is sent. A delegated job gets a Terminate (DecideTerminate),
// resent until acknowledged; its report still comes. Cancel reports false
// for a job this site does not own (unknown, or only held for a peer);
// cancelling a job again changes nothing and reports true.
func (a *Agent) Cancel(now int64, key JobKey) bool {
	jb := a.jobs[key]
	if jb == nil || jb.state == stateHeld || jb.state == stateTaking {
		return false
	}
	if !jb.cancelled {
		a.dirty = true
		a.cancel(now, jb, "")
	}
	return true
}

// cancel cancels jb; by is the origin that terminated it, "" for a cancel
// at this site.
func (a *Agent) cancel(now int64, jb *job, by string) {
	a.decide(Decision{Kind: DecideCancel, Job: jb.key, Peer: by, Route: jb.route})
	switch jb.state {
	case stateLocal:
		if jb.started {
			jb.cancelled = true
			a.decide(Decision{Kind: DecideKill, Job: jb.key})
			return
		}
		a.site.Cancel(now, jb.pj.ID)
		a.settle(now, jb, Decision{}, Outcome{Start: now, End: now, Cancelled: true})
	case stateAsking:
		for i, o := range jb.offers {
			if o != nil {
				a.send(Message{Kind: KindRelease, To: jb.asked[i], Job: jb.key})
			}
		}
		a.forget(jb)
	case stateAgreeing:
		// Only the agree's answer settles where the job is (Step,
		// KindAgreed).
		jb.cancelled = true
	case stateDelegated:
		jb.cancelled = true
		a.terminate(now, jb)
	}
}

// terminate owes jb's executing peer a Terminate.
func (a *Agent) terminate(now int64, jb *job) {
	a.owe(now, Message{Kind: KindTerminate, To: jb.peer, Job: jb.key})
	a.decide(Decision{Kind: DecideTerminate, Job: jb.key, Peer: jb.peer})
}

// Step takes a message from a peer.
func (a *Agent) Step(now int64, m Message) {
	// A peer asking for the queue changes nothing here (disclose passes
	// first): no Tick, so that an idle site does not ask for work because
	// a peer does (every idle site would ask whenever one does).
	a.dirty = a.dirty || m.Kind != KindQueueRequest
	switch m.Kind {
	case KindQuoteRequest:
		a.quote(now, m)
	case KindQuote:
		jb := a.jobs[m.Job]
		if jb == nil || jb.state != stateAsking || !jb.awaits(m.From) {
			if m.Offer != nil { // late: the origin has moved on
				a.send(Message{Kind: KindRelease, To: m.From, Job: m.Job})
			}
			return
		}
		jb.answered(m.From, m.Offer)
		if m.Offer != nil {
			jb.route = jb.route.With(delegation.Hop{Site: m.From, Action: delegation.ActionQuoted, At: now})
		} else {
			jb.route = jb.route.With(delegation.Hop{Site: m.From, Action: delegation.ActionRefused, Reason: m.Reason, At: now})
		}
		if !slices.Contains(jb.waiting, true) {
			a.choose(now, jb)
		}
	case KindAgree:
		a.agree(now, m)
	case KindAgreed:
		jb := a.jobs[m.Job]
		if jb == nil || jb.state != stateAgreeing || jb.peer != m.From {
			return
		}
		if m.Offer == nil && m.HoldID != jb.holdID {
			return // the refusal of an agree to an earlier hold, late
		}
		if m.Offer == nil {
			a.failed(m.From)
			if jb.cancelled {
				a.forget(jb)
				a.decide(Decision{Kind: DecideAcked, Job: jb.key, Peer: m.From})
				return
			}
			jb.route = jb.route.With(delegation.Hop{Site: m.From, Action: delegation.ActionRefused, Reason: m.Reason, At: now})
			// A job handed over (RQF) has no round left: it comes back
			// to this site's plan.
			jb.handOver, jb.holdID = false, ""
			if !a.ask(now, jb) {
				a.admit(now, jb)
			}
			return
		}
		a.set(jb, stateDelegated)
		if jb.cancelled {
			// Cancelled while the agree was out: the peer owns the job
			// now, and is told to stop it.
			a.terminate(now, jb)
			return
		}
		// The price is the one agreed to (the peer's answer repeats its
		// quote's; one that answers for a job it ran already has none).
		a.delegated(now, jb, offerPlacement(m.Offer), jb.price)
	case KindRelease:
		if jb := a.jobs[m.Job]; jb != nil && jb.state == stateHeld && m.From == jb.from {
			a.site.Unhold(now, jb.pj.ID)
			a.forget(jb)
		}
	case KindReport:
		a.send(Message{Kind: KindReportAck, To: m.From, Job: m.Job})
		jb := a.jobs[m.Job]
		if jb != nil && jb.state == stateAgreeing && jb.peer == m.From {
			// The peer took the job and it ended there before the answer
			// to the agree came (lost): the report says so. (A retried
			// agree would find no hold, and the job would run again.)
			a.set(jb, stateDelegated)
			if !jb.cancelled {
				a.delegated(now, jb, jb.place, jb.price)
			}
		}
		if jb == nil || jb.state != stateDelegated || jb.peer != m.From {
			return // a repeated report
		}
		a.forget(jb)
		if jb.cancelled || m.Outcome.Cancelled || m.Outcome.Dropped {
			// Cancelled, or never started: the outcome says nothing of
			// the peer's service (the node learns no history from it
			// either). A Terminate still owed is settled by the report.
			delete(a.owed, m.Job)
		} else {
			h := a.rank.History()[m.From]
			ObserveOutcome(&h, jb.pj.Procs, jb.pj.Estimate, jb.route[0].At, m.Outcome.Start, m.Outcome.End)
			a.observe(m.From, h)
		}
		a.decide(Decision{Kind: DecideOutcome, Job: jb.key, Peer: m.From, Outcome: m.Outcome, Route: jb.route})
	case KindReportAck, KindTerminated:
		want := KindReport
		if m.Kind == KindTerminated {
			want = KindTerminate
		}
		if r := a.owed[m.Job]; r != nil && r.msg.Kind == want && r.msg.To == m.From {
			delete(a.owed, m.Job)
			a.decide(Decision{Kind: DecideAcked, Job: m.Job, Peer: m.From})
		}
	case KindTerminate:
		if jb := a.jobs[m.Job]; jb != nil && jb.state == stateLocal && jb.from == m.From && !jb.cancelled {
			a.cancel(now, jb, m.From)
		}
		a.send(Message{Kind: KindTerminated, To: m.From, Job: m.Job})
	case KindQueueRequest:
		a.disclose(now, m)
	case KindQueue:
		a.pick(now, m)
	case KindTake:
		a.handOver(now, m)
	case KindTaken:
		a.taken(now, m)
	}
}

func (a *Agent) failed(peer string) {
	h := a.rank.History()[peer]
	h.Failures++
	a.observe(peer, h)
}

// observe sets what this site knows of peer (Ready.Observed).
func (a *Agent) observe(peer string, h delegation.History) {
	a.rank.SetHistory(peer, h)
	a.ready.Observed = true
}

// quote answers a quote request with a hold, or refuses.
func (a *Agent) quote(now int64, m Message) {
	refuse := func(why string, r *Refusal) {
		a.send(Message{Kind: KindQuote, To: m.From, Job: m.Job, Reason: why, Refusal: r})
	}
	if jb := a.jobs[m.Job]; jb != nil {
		if jb.state == stateHeld { // a repeated request: the same offer
			a.send(Message{Kind: KindQuote, To: m.From, Job: m.Job, Offer: a.offerOf(jb)})
		} else {
			refuse("this site already has the job", nil)
		}
		return
	}
	if r := MayHold(&a.rules, m.Route); r != nil {
		refuse(r.Error(), r)
		return
	}
	pj := m.Spec
	pj.ID = a.nextID()
	if a.cfg.Transfer == delegation.EFS {
		a.quoteEFS(now, m, pj)
		return
	}
	until := HoldUntil(now, a.cfg.HoldSeconds, m.HoldSeconds)
	pl, price, r := HoldFor(a.site, &a.rules, now, pj, until, m.StartNow)
	if r != nil {
		refuse(r.Error(), r)
		return
	}
	jb := &job{key: m.Job, pj: pj, route: m.Route, place: pl, expires: until, from: m.From, price: price, holdID: holdName(m.Job, pj.ID)}
	a.add(jb)
	a.set(jb, stateHeld)
	a.send(Message{Kind: KindQuote, To: m.From, Job: m.Job, Offer: a.offerOf(jb)})
}

func (a *Agent) offerOf(jb *job) *Offer {
	if jb.holdID == "" {
		jb.holdID = jb.key.String() // restored from a journal that did not keep it
	}
	if jb.queued {
		return &Offer{Quote: delegation.Quote{Site: a.cfg.Name, HoldID: jb.holdID, Start: jb.at, End: plan.Forever,
			Expires: jb.expires}, Queued: true}
	}
	return &Offer{Quote: delegation.Quote{Site: a.cfg.Name, HoldID: jb.holdID, Start: jb.place.Start, End: jb.place.End,
		PoF: jb.place.PoF, Price: jb.price, Expires: jb.expires}, Overbooked: jb.place.Reason == plan.ReasonOverbooked}
}

// agree confirms a hold: the hold backing a quote, or the one backing an
// RQF take (the origin hands the job over); the job is accepted here.
func (a *Agent) agree(now int64, m Message) {
	agreed := func(o *Offer, reason string) {
		a.send(Message{Kind: KindAgreed, To: m.From, Job: m.Job, Offer: o, Reason: reason, HoldID: m.HoldID})
	}
	jb := a.jobs[m.Job]
	switch {
	case jb != nil && jb.state == stateLocal && m.From == jb.from:
		agreed(a.offerOf(jb), "") // a repeated agree
		return
	case jb == nil && a.ranFor(m.From, m.Job):
		// The job was agreed, ran here and ended, and its report is on
		// its way: the answer to the first agree was lost. The origin
		// settles it as delegated, and the report follows (a refusal
		// would run the job a second time).
		o := a.owed[m.Job].msg.Outcome
		agreed(&Offer{Quote: delegation.Quote{Site: a.cfg.Name, HoldID: m.Job.String(), Start: o.Start, End: o.End, Expires: now}}, "")
		return
	case jb == nil || jb.state != stateHeld && jb.state != stateTaking || m.HoldID != jb.holdID:
		// (An agree to an earlier hold, late, does not confirm this one:
		// the origin may have placed the job since.)
		agreed(nil, "no hold for the job (expired or released)")
		return
	}
	taken := jb.state == stateTaking
	if jb.queued {
		// EFS took the job into the queue: the site's policy places it
		// now, as a local submission.
		pl := a.site.Submit(now, jb.pj)
		pl = a.clearOfStanding(now, jb.pj, pl, func() { a.site.Cancel(now, jb.pj.ID) }, func() plan.Placement { return a.site.Submit(now, jb.pj) })
		if !pl.OK() {
			a.forget(jb)
			agreed(nil, pl.Reason.String())
			return
		}
		jb.place = pl
	} else if _, err := a.site.Confirm(now, jb.pj.ID); err != nil {
		a.forget(jb)
		agreed(nil, err.Error())
		return
	}
	a.set(jb, stateLocal)
	if taken {
		jb.route = jb.route.With(delegation.Hop{Site: a.cfg.Name, Action: delegation.ActionDelegated, At: now,
			Reason: reasonTaken})
	}
	jb.route = jb.route.With(delegation.Hop{Site: a.cfg.Name, Action: delegation.ActionAccepted, At: now})
	a.decide(Decision{Kind: DecideAccept, Job: jb.key, Placement: jb.place, Peer: m.From, Route: jb.route, Spec: jb.pj, Price: jb.price, HoldID: jb.holdID})
	agreed(a.offerOf(jb), "")
}

// ranFor reports whether the job key, agreed with origin, ran here and
// ended and its outcome report is owed to origin still.
func (a *Agent) ranFor(origin string, key JobKey) bool {
	r := a.owed[key]
	return r != nil && r.msg.Kind == KindReport && r.msg.To == origin
}

// Busy reports whether the agent has anything to do but ask peers for
// work: a job it holds, runs, plans or negotiates, or a report or
// Terminate to resend.
// A replay whose sites are none of them busy, with no submission, end or
// message to come, is over (an idle RQF site would ask forever).
func (a *Agent) Busy() bool { return len(a.jobs) > 0 || len(a.owed) > 0 }

// Stepped reports whether an event since the last Tick calls for one now.
func (a *Agent) Stepped() bool { return a.dirty }

// NextWake is the earliest time after now at which Tick has work without a
// new event, now itself if an event since the last Tick calls for a pass,
// or plan.Forever.
func (a *Agent) NextWake(now int64) int64 {
	if a.dirty {
		return now
	}
	t := a.site.NextWake(now)
	for _, jb := range a.waits {
		switch jb.state {
		case stateAsking, stateAgreeing:
			t = min(t, max(jb.deadline, now)) // Tick settles what is due
		case stateHeld, stateTaking:
			t = min(t, max(jb.expires, now))
		}
	}
	for _, r := range a.owed {
		t = min(t, max(r.next, now))
	}
	if a.cfg.Transfer == delegation.RQF && a.cfg.Peers != nil {
		// An idle site asks by itself on the interval's grid; a driver
		// ends a replay when no site has anything but that left (Busy).
		t = min(t, NextPull(IdleProcs(a.site, now), a.rqfAt, now, a.cfg.PullSeconds, PullOffset(a.cfg.Name, a.cfg.PullSeconds)))
	}
	return t
}

// Tick lets time pass to now: holds expire, peers that did not answer in
// time are given up on (an agree is asked again: only its answer settles
// where the job is), unacknowledged reports and Terminates are resent,
// RQF asks for work if processors stay idle, and the scheduling pass runs.
func (a *Agent) Tick(now int64) {
	a.dirty = false
	keys := make([]JobKey, 0, len(a.waits))
	for k := range a.waits {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmpKey) // map order must not decide anything
	for _, k := range keys {
		jb := a.jobs[k]
		switch {
		case (jb.state == stateHeld || jb.state == stateTaking) && jb.expires <= now:
			a.site.Unhold(now, jb.pj.ID)
			a.forget(jb)
		case jb.state == stateAsking && jb.deadline <= now:
			for i, p := range jb.asked {
				if jb.waiting[i] {
					a.failed(p)
					jb.answered(p, nil)
				}
			}
			a.choose(now, jb)
		case jb.state == stateAgreeing && jb.deadline <= now:
			jb.deadline = now + a.cfg.ReplySeconds
			if len(jb.rounds) == 0 && a.cfg.Peers != nil {
				// The agree's answer did not come: if the peer refuses
				// the agree asked again (it lost its hold in a crash),
				// the peers are asked again, as after a restart, whose
				// route keeps no quote answers (Restore).
				route := jb.route
				jb.route = slices.DeleteFunc(slices.Clone(route), func(h delegation.Hop) bool {
					return h.Action == delegation.ActionQuoted || h.Action == delegation.ActionRefused
				})
				jb.rounds = a.rounds(now, jb)
				jb.route = route
			}
			a.send(Message{Kind: KindAgree, To: jb.peer, Job: jb.key, HoldID: jb.holdID})
		}
	}
	rkeys := make([]JobKey, 0, len(a.owed))
	for k, r := range a.owed {
		if r.next <= now {
			rkeys = append(rkeys, k)
		}
	}
	slices.SortFunc(rkeys, cmpKey)
	for _, k := range rkeys {
		r := a.owed[k]
		r.next = now + a.cfg.ReplySeconds
		a.send(r.msg)
	}
	if len(a.cfg.Standing) > 0 {
		a.forgetOver(now)
		a.layTo(now, now) // the outlook peers see holds the instances of the horizon
	}
	a.layForQueue(now)
	a.pass(now)
	if a.cfg.Transfer == delegation.RQF && a.cfg.Peers != nil {
		a.pull(now)
	}
}

// pass runs the scheduling pass: the jobs due start. Tick runs it, and so
// do an RQF queue request and take before they look at what waits: a
// job a pass would start now does not wait (a node's turn, which passes at
// once, has started it).
func (a *Agent) pass(now int64) {
	for _, d := range a.site.Pass(now) {
		jb := a.byID[d.JobID]
		if jb == nil {
			continue
		}
		switch d.Kind {
		case plan.DecideStart:
			jb.started, jb.start = true, d.Start
			a.decide(Decision{Kind: DecideStart, Job: jb.key, Start: d.Start, End: d.End})
		case plan.DecideExtend:
			a.decide(Decision{Kind: DecideExtend, Job: jb.key, Start: d.Start, End: d.End})
		case plan.DecideExpire:
			a.settle(now, jb, Decision{Kind: DecideExpire, Job: jb.key, Route: jb.route}, dropped(now))
		}
	}
	a.moves()
}

// moves tells the driver of the waiting reservations re-planning moved
// (TrackMoves; the plan tracks none otherwise).
func (a *Agent) moves() {
	for _, id := range a.site.Moved() {
		jb := a.byID[id]
		if jb == nil || jb.started || jb.state != stateLocal {
			continue
		}
		if pl, ok := a.site.Placement(id); ok {
			jb.place = pl
			a.decide(Decision{Kind: DecideMove, Job: jb.key, Placement: pl})
		}
	}
}

// newRand is the location policy's jitter stream for one decision.
func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

func cmpKey(x, y JobKey) int {
	if x.Site != y.Site {
		if x.Site < y.Site {
			return -1
		}
		return 1
	}
	return int(min(max(x.ID-y.ID, -1), 1))
}

// offerEFS is EFS's side of a local job: the location policy orders the
// peers by the AWRT of the jobs delegated to each (RankAWRT), and for each
// in turn the rule base for that peer decides from the site's own NWP and
// the job's NJP whether the job is kept (accept) or offered to it
// (decline); the peers it is offered to are asked one at a time, in that
// order, and the job stays home when none takes it. It reports false when
// the job stays home at once.
func (a *Agent) offerEFS(now int64, jb *job) bool {
	nwp, njp := a.features(jb.pj.Procs)
	var rounds [][]string
	for _, c := range delegation.RankAWRT(a.cfg.Peers.Candidates(now), jb.pj.Procs, jb.route, a.rank.History()) {
		if rb := a.cfg.Rules.For(c.Site, c.Procs); rb != nil && !rb.Accepts(nwp, njp) {
			rounds = append(rounds, []string{c.Site})
		}
	}
	// StartNow: a peer on ACF takes the job only if it would start it now
	// (ACF's acceptance rule, as the study's partner applies it); a peer
	// on EFS decides by its rule base and ignores it.
	jb.offered, jb.offer, jb.rounds = true, OfferDecision{Offer: true, LocalEnd: plan.Forever, StartNow: true}, rounds
	return a.asking(now, jb)
}

// quoteEFS is EFS's side of a peer's offer: the rule base for that peer
// decides from this site's NWP and the job's NJP whether it joins the
// queue (the origin's StartNow, which an EFS origin sets for peers on
// ACF, does not apply). An accepted job holds no slot: the agree that
// follows submits it to the site's own policy, as a local job.
func (a *Agent) quoteEFS(now int64, m Message, pj plan.Job) {
	var procs int
	for _, c := range a.cfg.Peers.Candidates(now) {
		if c.Site == m.From {
			procs = c.Procs
		}
	}
	nwp, njp := a.features(pj.Procs)
	switch rb := a.cfg.Rules.For(m.From, procs); {
	case pj.Procs > a.cfg.Procs:
		a.send(Message{Kind: KindQuote, To: m.From, Job: m.Job, Reason: plan.ReasonRejectedTooWide.String()})
		return
	case !rb.Accepts(nwp, njp):
		a.send(Message{Kind: KindQuote, To: m.From, Job: m.Job,
			Reason: fmt.Sprintf("the fuzzy transfer policy declines it (NWP %.3g, NJP %.3g)", nwp, njp)})
		return
	}
	jb := &job{key: m.Job, pj: pj, route: m.Route, expires: HoldUntil(now, a.cfg.HoldSeconds, m.HoldSeconds), from: m.From, queued: true, at: now,
		holdID: holdName(m.Job, pj.ID)}
	a.add(jb)
	a.set(jb, stateHeld)
	a.send(Message{Kind: KindQuote, To: m.From, Job: m.Job, Offer: a.offerOf(jb)})
}

// features are EFS's inputs at this site for a job of procs processors:
// NWP over the jobs waiting in the queue, NJP of the job.
func (a *Agent) features(procs int) (nwp, njp float64) {
	a.waitBuf = a.site.WaitingIDs(a.waitBuf[:0])
	waiting := 0
	for _, id := range a.waitBuf {
		if jb := a.byID[id]; jb != nil {
			waiting += jb.pj.Procs
		}
	}
	return delegation.NWP(waiting, a.cfg.Procs), delegation.NJP(procs, a.cfg.Procs)
}
