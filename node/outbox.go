package node

import (
	"fmt"
	"time"

	"github.com/fedsched/fedsched/discovery"
)

// An outcome (peer to origin) or a termination (origin to peer) is retried
// until the other site acknowledges it. A site that has left the
// federation, or died and never came back, would be retried for ever: so
// once the other site has not been an alive member for
// FederationConfig.OutboxGiveUp (in the site's clock) the site gives up.
// The agreement then records, durably, what was not delivered and why
// (Agreement.undelivered, and a warning in the log); nothing is retried
// after a restart. A member that is back alive resets the count.

// aliveMember reports whether gossip shows site as an alive member.
func (n *Node) aliveMember(site string) bool {
	for _, m := range n.fed.Peers.Members() {
		if m.Name == site {
			return m.State == discovery.Alive
		}
	}
	return false
}

// absentOp records that the site an outbox item is owed to is not an alive
// member (or, with back, that it is again), and gives up on the item when
// it has been absent long enough.
type absentOp struct {
	id, kind string
	back     bool
}

func (o *absentOp) run(n *Node, now int64) func(error) {
	a := n.agreements[o.id]
	if a == nil || a.Pending != o.kind {
		return nil
	}
	to := a.Origin
	if o.kind == "terminate" {
		to = a.Peer
	}
	switch {
	case o.back:
		if a.AbsentSince != 0 {
			a.AbsentSince = 0
			n.putAgreement(a, now)
		}
	case a.AbsentSince == 0:
		a.AbsentSince = now
		n.putAgreement(a, now)
	case now-a.AbsentSince >= int64(n.fed.OutboxGiveUp/time.Second):
		a.Undelivered = fmt.Sprintf("gave up delivering the %s to %s at %s: it has not been an alive member since %s",
			o.kind, to, time.Unix(now, 0).UTC().Format(time.RFC3339), time.Unix(a.AbsentSince, 0).UTC().Format(time.RFC3339))
		a.Pending, a.AbsentSince = "", 0
		n.log.Warn("outbox item given up", "agreement", a.ID, "kind", o.kind, "to", to, "why", a.Undelivered)
		n.putAgreement(a, now)
	}
	return nil
}
