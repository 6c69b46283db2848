package node

import (
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
