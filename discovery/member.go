package discovery

import "github.com/hashicorp/memberlist"

// MemberState is the state gossip gives a member. It is a hint: a member
// gossip marks Dead may still be serving gRPC (see Confirm).
type MemberState int

// Member states, in memberlist's terms. The zero MemberState is not a
// state.
const (
	// Alive: the member answers memberlist's probes, directly or through
	// other members.
	Alive MemberState = iota + 1
	// Suspect: a probe failed and the member has not yet refuted it. See
	// the Caveats in the package documentation: memberlist offers no
	// race-free way to read this state, so Members does not report it.
	Suspect
	// Dead: the member failed its probes for longer than the suspicion
	// timeout. Unconfirmed until Confirm's probe fails.
	Dead
	// Left: the member announced that it was leaving (Membership.Leave,
	// which sets Digest.Leaving) and then left. A member whose leaving
	// digest did not reach this site before its departure is seen Dead.
	Left
)

// String returns "alive", "suspect", "dead", "left" or "unknown".
func (s MemberState) String() string {
	switch s {
	case Alive:
		return "alive"
	case Suspect:
		return "suspect"
	case Dead:
		return "dead"
	case Left:
		return "left"
	default:
		return "unknown"
	}
}

// Member is one site of the federation as this site's gossip sees it. It is
// a copy: the caller owns it.
type Member struct {
	// Name is the member's node name, its site id.
	Name string
	// Addr is the member's gossip address, host:port. Its gRPC address is
	// Digest.Addr.
	Addr string
	// State is the member's gossip state.
	State MemberState
	// Digest is the member's capability digest, or the zero Digest if
	// DigestErr is not nil.
	Digest Digest
	// DigestErr is nil, or why the member's metadata could not be decoded:
	// an error wrapping ErrUnknownVersion for a digest from a newer
	// fedsched, ErrMalformed or ErrInvalidDigest otherwise.
	DigestErr error
	// Local is true for the member that is this site.
	Local bool
}

// memberFromNode copies n into a Member. It must be called only while n
// cannot change: inside a memberlist EventDelegate callback.
//
// The state comes from the event, not from n.State, which memberlist never
// sets (its node state lives in a field of its own that shadows it): a
// member that joined or was updated is Alive; one reported gone is Left if
// its last digest said it was leaving, Dead otherwise.
func memberFromNode(kind EventKind, n *memberlist.Node, local string) Member {
	m := Member{
		Name:  n.Name,
		Addr:  n.Address(),
		State: Alive,
		Local: n.Name == local,
	}
	if err := m.Digest.UnmarshalBinary(n.Meta); err != nil {
		m.DigestErr = err
	}
	if kind == SiteLeft {
		m.State = Dead
		if m.Digest.Leaving {
			m.State = Left
		}
	}
	return m
}

// EventKind says what happened to a member.
type EventKind int

// Event kinds. The zero EventKind is not a kind.
const (
	// SiteJoined: a member became Alive: it is new, or it was Dead or
	// Left and is back. The local site's own SiteJoined is the first event.
	SiteJoined EventKind = iota + 1
	// SiteLeft: gossip marks the member Dead or Left (Member.State says
	// which). A Dead member is unconfirmed: see Confirm.
	SiteLeft
	// SiteUpdated: an Alive member changed its digest.
	SiteUpdated
)

// String returns "joined", "left", "updated" or "unknown".
func (k EventKind) String() string {
	switch k {
	case SiteJoined:
		return "joined"
	case SiteLeft:
		return "left"
	case SiteUpdated:
		return "updated"
	default:
		return "unknown"
	}
}

// Event is a change in the membership, as delivered by Membership.Events.
type Event struct {
	Kind   EventKind
	Member Member
}
