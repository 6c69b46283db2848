package node_test

import (
	"context"
	"testing"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestACFKeepsAJobNoQuoteBeats: under ACF a quote is taken only if it
// ends before the origin's own placement (site.Choose, the site agent's
// rule). s0 (one processor, overbooking from a history of jobs that used
// 10 % of their estimate) can place an SLA job only overbooked, into the
// 299 s before a job released then, ending long before the idle peer's
// start-now quote for the full estimate: the job stays home, overbooked.
// The node used to take any start-now quote and delegated it.
func TestACFKeepsAJobNoQuoteBeats(t *testing.T) {
	history := writeHistory(t, 120, 100)
	sites := startFederationSites(t, 100, node.FederationConfig{}, func(i int, c *config.Config) {
		c.Delegation.Transfer = "acf"
		if i == 0 {
			c.Overbooking.Enabled, c.Overbooking.History, c.Overbooking.AgeFactor = true, history, 1
		}
	}, 1, 1)
	ctx := context.Background()
	cl := sites[0].client
	j := overbookScenario(t, cl, 100)
	if j.GetSite() != "s0" || !j.GetOverbooked() || j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("SLA job: %v at %s, overbooked %v: %s", j.GetState(), j.GetSite(), j.GetOverbooked(), j.GetMessage())
	}
	ex, err := cl.Explain(ctx, &fedschedv1.ExplainRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.GetJob().GetQuoteAnswers()) == 0 || !ex.GetJob().GetQuoteAnswers()[0].GetOffered() {
		t.Fatalf("the peer was not asked or made no offer: %v", ex.GetJob().GetQuoteAnswers())
	}
}
