package main

import (
	"testing"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestRouteHumanPointsTheWayTheJobWent: the origin's hop reads origin →
// peer, the receiving peer's hop peer ← origin; both say the job went from
// the origin to the peer.
func TestRouteHumanPointsTheWayTheJobWent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route []*fedschedv1.RouteHop
		want  string
	}{
		{"submitted", []*fedschedv1.RouteHop{{Site: "a"}}, "a"},
		{"delegated and received", []*fedschedv1.RouteHop{
			{Site: "a"},
			{Site: "a", PeerSite: "b", Reason: fedschedv1.Reason_REASON_DELEGATED},
			{Site: "b", PeerSite: "a", Reason: fedschedv1.Reason_REASON_RECEIVED_FROM_PEER},
		}, "a; a → b (delegated); b ← a (received_from_peer)"},
		{"refused by a peer", []*fedschedv1.RouteHop{
			{Site: "a", PeerSite: "c", Reason: fedschedv1.Reason_REASON_REJECTED_NO_GAP},
		}, "a → c (rejected_no_gap)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := routeHuman(tc.route); got != tc.want {
				t.Errorf("routeHuman = %q, want %q", got, tc.want)
			}
		})
	}
}
