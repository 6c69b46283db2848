package delegation

import (
	"fmt"
)

// State is the state of an agreement, after WS-Agreement as the AoR
// rendering uses it (Papaspyrou 2013, §9.2, Fig. 9.3).
type State int

// Agreement states.
const (
	StateUnspecified State = iota
	// Pending: a quote is held; the agreement is not in effect. Binding
	// for neither side until the origin agrees (the hold may expire).
	Pending
	// Observed: agreed; the peer owns execution.
	Observed
	// Rejected: the peer refused, or the hold expired or was released
	// before the origin agreed.
	Rejected
	// PendingAndTerminating: termination was asked for while pending.
	PendingAndTerminating
	// ObservedAndTerminating: termination (cancel) was asked for while in
	// effect and has not been carried out yet.
	ObservedAndTerminating
	// Terminated: ended before fulfilment with both sides' consent (the
	// user cancelled the job).
	Terminated
	// Complete: ended after fulfilment; the outcome (met or violated) is
	// recorded with it.
	Complete
)

var stateNames = [...]string{"UNSPECIFIED", "PENDING", "OBSERVED", "REJECTED", "PENDINGANDTERMINATING",
	"OBSERVEDANDTERMINATING", "TERMINATED", "COMPLETE"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s == Rejected || s == Terminated || s == Complete }

// Event is what happens to an agreement.
type Event int

// Events.
const (
	// EventAgree: the origin confirms the quote (Agree).
	EventAgree Event = iota + 1
	// EventRelease: the origin drops the hold (Release), or a loser of a
	// quote round is released.
	EventRelease
	// EventExpire: the hold ran out before the origin agreed.
	EventExpire
	// EventTerminate: the origin asks to cancel.
	EventTerminate
	// EventTerminated: the cancellation was carried out.
	EventTerminated
	// EventFinish: the job ended (met or violated) at the peer.
	EventFinish
)

var eventNames = [...]string{"", "agree", "release", "expire", "terminate", "terminated", "finish"}

func (e Event) String() string {
	if e > 0 && int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", int(e))
}

// transitions is the whole state machine: from state, on event, to state.
// Anything not listed is refused with ErrTransition.
var transitions = map[State]map[Event]State{
	Pending: {
		EventAgree:     Observed,
		EventRelease:   Rejected,
		EventExpire:    Rejected,
		EventTerminate: PendingAndTerminating,
	},
	PendingAndTerminating: {
		EventTerminated: Terminated,
		EventRelease:    Terminated,
		EventExpire:     Terminated,
	},
	Observed: {
		EventTerminate: ObservedAndTerminating,
		EventFinish:    Complete,
	},
	ObservedAndTerminating: {
		EventTerminated: Terminated,
		// The job ended before the cancel took effect: it completed.
		EventFinish: Complete,
	},
}

// Next returns the state an agreement in s moves to on e. Repeating the
// event that led into a state is idempotent: Observed on agree, Rejected on
// release or expire, Complete on finish, Terminated on terminated answer the
// same state without error, so that retried RPCs are harmless.
func Next(s State, e Event) (State, error) {
	if to, ok := transitions[s][e]; ok {
		return to, nil
	}
	switch {
	case s == Observed && e == EventAgree,
		s == Rejected && (e == EventRelease || e == EventExpire),
		s == Complete && e == EventFinish,
		s == Terminated && (e == EventTerminated || e == EventTerminate || e == EventRelease),
		s == ObservedAndTerminating && e == EventTerminate,
		s == PendingAndTerminating && e == EventTerminate:
		return s, nil
	}
	return s, fmt.Errorf("agreement in %v cannot %v: %w", s, e, ErrTransition)
}

// Outcome is how a complete agreement ended, as the peer reports it.
type Outcome int

// Outcomes.
const (
	OutcomeNone Outcome = iota
	// OutcomeMet: the SLA was met (finished, or ran its full estimate).
	OutcomeMet
	// OutcomeViolated: the peer failed the SLA (cut short, node failure).
	OutcomeViolated
	// OutcomeKilled: killed at the end of its full reservation (the user's
	// estimate was short): met for the SLA, reported apart for the user.
	OutcomeKilled
	// OutcomeCancelled: cancelled by the user.
	OutcomeCancelled
)

var outcomeNames = [...]string{"none", "met", "violated", "killed", "cancelled"}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Agreement is one delegation of one job from an origin site to a peer, as
// both sides store it. Times are Unix seconds.
type Agreement struct {
	// ID is the peer's hold id; it names the agreement on both sides.
	ID string `json:"id"`
	// JobID is the job's id at the origin; PeerJobID its id at the peer.
	JobID     string `json:"job_id"`
	PeerJobID string `json:"peer_job_id,omitempty"`
	Origin    string `json:"origin"`
	Peer      string `json:"peer"`
	State     State  `json:"state"`
	Quote     Quote  `json:"quote"`
	// IdempotencyKey is the origin's key for Agree; a retry with the same
	// key is answered from the stored agreement.
	IdempotencyKey string  `json:"idempotency_key,omitempty"`
	Outcome        Outcome `json:"outcome,omitempty"`
	// Settled is set at the origin once fee and penalty are booked.
	Settled bool  `json:"settled,omitempty"`
	Updated int64 `json:"updated"`
}

// Apply moves the agreement by e at time now.
func (a *Agreement) Apply(e Event, now int64) error {
	to, err := Next(a.State, e)
	if err != nil {
		return fmt.Errorf("agreement %s: %w", a.ID, err)
	}
	a.State, a.Updated = to, now
	return nil
}
