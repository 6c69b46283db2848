package site

import (
	"fmt"
	"strconv"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// JobKey names a job across the federation: the site it was submitted at
// and that site's id for it.
type JobKey struct {
	Site string
	ID   int64
}

func (k JobKey) String() string { return k.Site + "/" + strconv.FormatInt(k.ID, 10) }

// Kind is the kind of a message between two agents.
type Kind int

// Message kinds. Every exchange is two-phase (quote with a hold, then agree
// or release; under RQF, take with a hold, then agree or taken) and every
// message is idempotent, so a driver may retry.
const (
	// KindQuoteRequest asks a peer to quote for a job (origin to peer).
	KindQuoteRequest Kind = iota + 1
	// KindQuote answers a quote request: Offer set when the peer holds a
	// slot, nil with Reason when it refuses.
	KindQuote
	// KindAgree confirms the peer's hold HoldID names: a quote's (origin
	// to peer), or the one behind an RQF take (the origin hands the job
	// over); resent until answered.
	KindAgree
	// KindAgreed answers Agree: Offer set when the peer now owns the job,
	// Reason when it no longer holds a slot for it.
	KindAgreed
	// KindRelease drops a hold the origin will not use.
	KindRelease
	// KindReport tells the origin how a delegated job ended.
	KindReport
	// KindReportAck acknowledges a report; the executing site resends
	// until it gets one.
	KindReportAck
	// KindQueueRequest (RQF) asks a peer for the jobs waiting in its
	// queue that the asking site might start now (Spec.Procs is its free
	// processors).
	KindQueueRequest
	// KindQueue answers with the waiting jobs (Jobs), in queue order.
	KindQueue
	// KindTake (RQF) asks the peer to hand over one of its waiting jobs,
	// under a hold the asker made for it (HoldID).
	// The peer answers with an agree to that hold (the hand-over: the job
	// is the asker's once it answers agreed) or with KindTaken.
	KindTake
	// KindTaken refuses a Take (Reason): the job no longer waits there.
	KindTaken
	// KindTerminate asks the executing site to stop a job its origin
	// cancelled (origin to peer; the node's Terminate RPC). The origin
	// resends it until it gets a KindTerminated; the job's report follows
	// as for any end.
	KindTerminate
	// KindTerminated acknowledges a Terminate: the job no longer waits or
	// runs there, or is being killed (or had ended already).
	KindTerminated
)

// NumKinds is one more than the highest Kind: an array indexed by a Kind
// (a count per kind) has NumKinds elements.
const NumKinds = int(KindTerminated) + 1

var kindNames = [...]string{"", "quote-request", "quote", "agree", "agreed", "release", "report", "report-ack",
	"queue-request", "queue", "take", "taken", "terminate", "terminated"}

// A name for every kind, and NumKinds up to date: this does not compile
// otherwise.
var _ [NumKinds]string = kindNames

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Message is what one agent sends another. The driver delivers it (gRPC in
// the node, an in-memory network in the simulator) by calling Step on the
// agent named To.
type Message struct {
	Kind     Kind
	From, To string
	Job      JobKey
	// Spec is the job as the origin describes it (quote requests; a
	// queue request's Procs are the asker's free processors); its ID is
	// the sender's and means nothing to the receiver.
	Spec  plan.Job
	Route delegation.Route
	// StartNow asks for a quote only if the peer's own policy would start
	// the job now (ACF's acceptance rule).
	StartNow bool
	// HoldSeconds bounds the hold backing a quote.
	HoldSeconds int64
	// Offer is the peer's quote (Quote) or the accepted agreement (Agreed).
	Offer *Offer
	// Reason says why a peer refused.
	Reason string
	// Refusal is the shared rule's refusal behind Reason (a quote refused
	// by MayHold or HoldFor), nil for the others: a node maps its kind to
	// the refusal's reason code.
	Refusal *Refusal
	// Outcome is how a delegated job ended (Report).
	Outcome Outcome
	// Jobs are a peer's waiting jobs (Queue).
	Jobs []QueuedJob
	// HoldID names the hold an Agree confirms (the quote's Offer.HoldID,
	// or the one behind an RQF Take), and the Agreed or Taken that
	// answers: a peer may hold a slot for the same job again after an
	// agree failed (a quote request that came twice, late; a taker that
	// takes the job again), and an agree or a refusal of the earlier hold
	// that comes late must not settle the new one.
	HoldID string
}

// holdName is the id of a hold a site makes for the peer's job key (a
// quote's, or an RQF take's), the job's id at the site being id: new at
// every hold, across restarts too as long as the driver keeps Ready.Seq
// (the Journal does).
func holdName(key JobKey, id int64) string { return key.String() + "#" + strconv.FormatInt(id, 10) }

// Offer is a quote backed by a hold.
type Offer struct {
	delegation.Quote
	// Overbooked: the peer's admission test accepted the job only into a
	// gap shorter than its estimate.
	Overbooked bool
	// Queued: the peer's transfer policy (EFS) takes the job into its
	// queue, where its own policy will start it; no slot is held or
	// promised (Start is the time of the answer, End plan.Forever).
	Queued bool
}

// Outcome is how a job ended at the site that ran it.
type Outcome struct {
	Start, End int64
	// Completed: it ended by itself; otherwise it was killed (at the end
	// of its reservation), failed or was cancelled.
	Completed bool
	// Cancelled: its origin terminated it (or the executing site
	// cancelled it); if it never started, Start and End are both the
	// time of the cancel.
	Cancelled bool
	// Dropped: the peer dropped it before it started: its queue could not
	// start it within its window (DecideExpire), an operator's reservation
	// took its slot (DecideDisplaced), or it could not place it when
	// handed over after its hold had run out (DecideReject); Start and End
	// are the time it was dropped.
	Dropped bool
	// Failed: it stopped for a reason that says nothing of its runtime
	// (Agent.Fail).
	Failed bool
}

// QueuedJob is a job waiting at a peer, as RQF discloses it.
type QueuedJob struct {
	Job   JobKey
	Spec  plan.Job
	Route delegation.Route
}
