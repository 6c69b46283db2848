package node

import (
	"strings"
	"testing"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestExplainRouteNamesEachSiteOnce: the route in explain's summary (and
// the status page's) is the sites the job was at, not one entry per hop:
// a site that recorded the submission and then the delegation is named
// once.
func TestExplainRouteNamesEachSiteOnce(t *testing.T) {
	hop := func(site, peer string, r fedschedv1.Reason) *fedschedv1.RouteHop {
		return &fedschedv1.RouteHop{Site: site, PeerSite: peer, Reason: r}
	}
	const (
		sub  = fedschedv1.Reason_REASON_UNSPECIFIED
		del  = fedschedv1.Reason_REASON_DELEGATED
		recv = fedschedv1.Reason_REASON_RECEIVED_FROM_PEER
	)
	for _, tc := range []struct {
		name  string
		route []*fedschedv1.RouteHop
		want  string // "" when the summary names no route
	}{
		{"kept", []*fedschedv1.RouteHop{hop("oa", "", sub)}, ""},
		{"delegated", []*fedschedv1.RouteHop{hop("oa", "", sub), hop("oa", "ob", del), hop("ob", "oa", recv)}, "oa → ob"},
		{"a refused agree, then another peer", []*fedschedv1.RouteHop{hop("oa", "", sub), hop("oa", "ob", del), hop("oa", "oc", del), hop("oc", "oa", recv)}, "oa → oc"},
		{"forwarded", []*fedschedv1.RouteHop{hop("oa", "", sub), hop("oa", "ob", del), hop("ob", "oa", recv), hop("ob", "oc", del), hop("oc", "ob", recv)}, "oa → ob → oc"},
		{"back where it was", []*fedschedv1.RouteHop{hop("oa", "", sub), hop("oa", "ob", del), hop("ob", "oa", recv), hop("ob", "oa", del), hop("oa", "ob", recv)}, "oa → ob → oa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &fedschedv1.Job{Id: "oa.000000000001", Site: "oa", Route: tc.route}
			got := explainSummary(j, "oa", 0.2)
			_, route, named := strings.Cut(got, " Route: ")
			switch {
			case tc.want == "" && named:
				t.Fatalf("summary %q names a route; want none", got)
			case tc.want != "" && route != tc.want+".":
				t.Fatalf("summary %q: route %q, want %q", got, route, tc.want+".")
			}
			if v := jobView(j); tc.want != "" && v.Route != tc.want {
				t.Fatalf("status page route %q, want %q", v.Route, tc.want)
			}
		})
	}
}
