package node

import (
	"strings"
	"testing"

	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// TestRefusalReasons: every refusal of the shared hold rule (site.HoldFor,
// site.MayHold) reaches the origin with the reason code and message a
// node gave before the rule was shared: explain and the quote metrics
// read them.
func TestRefusalReasons(t *testing.T) {
	pj := plan.Job{Procs: 12, Estimate: 3600, Release: 1000, Deadline: plan.Forever}
	for _, c := range []struct {
		r      site.Refusal
		reason fedschedv1.Reason
		msg    string
	}{
		{site.Refusal{Kind: site.RefuseVisited, Site: "b"}, fedschedv1.Reason_REASON_REJECTED_NO_GAP, "the job has been at b before"},
		{site.Refusal{Kind: site.RefuseMaxHops, Site: "b", Hops: 2, MaxHops: 1}, fedschedv1.Reason_REASON_REJECTED_NO_GAP,
			"taking the job would be its delegation number 2; b allows at most delegation.max_hops = 1"},
		{site.Refusal{Kind: site.RefuseNotStartNow, Site: "b"}, fedschedv1.Reason_REASON_REJECTED_NO_GAP, "this site's own policy would not start the job now"},
		{site.Refusal{Kind: site.RefuseNotNow, Site: "b"}, fedschedv1.Reason_REASON_REJECTED_NO_GAP, "this site would not start the job now"},
		{site.Refusal{Kind: site.RefuseNoPlacement, Site: "b", Placement: plan.Placement{Reason: plan.ReasonRejectedTooWide}},
			fedschedv1.Reason_REASON_REJECTED_TOO_WIDE, "the job needs 12 processors; site b has fewer"},
		{site.Refusal{Kind: site.RefuseNoPlacement, Site: "b", Placement: plan.Placement{Reason: plan.ReasonRejectedNoGap}},
			fedschedv1.Reason_REASON_REJECTED_NO_GAP, "no slot of 12 processors for 3600 s between"},
		{site.Refusal{Kind: site.RefuseCommunityShare, Site: "b", Share: 0.25}, fedschedv1.Reason_REASON_REJECTED_COMMUNITY_SHARE,
			"the slot would leave less than 25 % of the site to its own users"},
		{site.Refusal{Kind: site.RefuseBudget, Site: "b", Price: 3, Fee: 2}, fedschedv1.Reason_REASON_REJECTED_BUDGET,
			"the price 3.00 exceeds the job's fee 2.00 (its budget)"},
	} {
		got := refusal(&c.r, pj, 1000)
		if got.GetOffer() != nil || got.GetRefusal() != c.reason || !strings.HasPrefix(got.GetMessage(), c.msg) {
			t.Errorf("refusal %d: %v %q, want %v %q", c.r.Kind, got.GetRefusal(), got.GetMessage(), c.reason, c.msg)
		}
	}
}
