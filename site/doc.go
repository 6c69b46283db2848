// Package site is the site agent: one deterministic state machine per site
// that owns everything a site decides. It wraps the site's plan.Site, its
// SLA admission test and the statistics it learns (overbook), the transfer
// policy (on-reject, ACF, RQF), the location policy and its history of
// peers, quoting with holds and the community share, agreements on both
// sides, outcome reports and fixed reservations (delegation).
//
// Events go in (Submit, End, Fail, Cancel, GiveUp, Reserve and
// Unreserve, Step for a peer message, Tick for time passing, NodeDown and
// NodeUp); decisions and messages to peers come out of Ready, one batch
// at a time, in the order they were made. A driver that persists each
// batch (Journal, or its own store) rebuilds the agent after a crash with
// Restore. The agent reads no clock (time is the now every call passes),
// does no I/O, and knows nothing of gRPC,
// bbolt or memberlist: the node and the simulator are its two drivers
// (etcd raft's RawNode shape). What the drivers may differ in is written
// down once, in docs/architecture.md.
//
// The decision rules themselves (rules.go: OfferFirst, OfferRejected,
// Choose, MayHold, HoldFor, Discloses, PullRanking, ObserveOutcome, ...)
// are exported functions over a plan.Site and the site's Rules: the agent
// calls them, and so does a federating node, which does not drive an
// Agent yet (a node that does not federate does: node/agentdrive.go).
//
// An Agent is not safe for concurrent use: one goroutine owns it.
package site
