package node_test

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestQuotePrice: a site with delegation.pricing libra+$ quotes Yeo's price
// over the job's window (delegation.QuotePrice), refuses a job whose fee
// is below it, and the origin shows each peer's price in the job's quote
// answers (what fedsched explain prints).
func TestQuotePrice(t *testing.T) {
	lp := delegation.LibraPlus{PBase: 1, Alpha: 1, Beta: 0.5}
	web := []string{freeAddr(t), freeAddr(t)}
	sites := startFederationSites(t, 100, node.FederationConfig{}, func(i int, c *config.Config) {
		c.Delegation.Pricing = config.Pricing{Model: "libra+$", PBase: lp.PBase, Alpha: lp.Alpha, Beta: lp.Beta}
		c.HTTP.Listen = web[i]
	}, 2, 8)
	ctx := context.Background()
	deadline := time.Now().Add(48 * time.Hour).Unix()
	sp := spec(2, 600)
	sp.Deadline, sp.Fee, sp.Penalty = timestamppb.New(time.Unix(deadline, 0)), 100, 1
	// Site 1 is idle: its only reservation in the window is the hold.
	q, err := sites[1].fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: "x.000000000001", Spec: sp})
	if err != nil || q.GetOffer() == nil {
		t.Fatalf("quote: %v %v", q, err)
	}
	now := q.GetOffer().GetStart().GetSeconds() // the hold starts when quoted
	w := deadline - now
	want := lp.Price(delegation.PriceInput{Procs: 2, Estimate: 600, Window: w, SiteProcs: 8, Free: 8*w - 2*600})
	if got := q.GetOffer().GetPrice(); want <= 0 || math.Abs(got-want) > 1e-9 {
		t.Fatalf("price %v, want %v", got, want)
	}
	// A second job sees the first one's hold in its window.
	q2, err := sites[1].fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: "x.000000000002", Spec: sp})
	if err != nil || q2.GetOffer() == nil {
		t.Fatalf("second quote: %v %v", q2, err)
	}
	now2 := q2.GetOffer().GetStart().GetSeconds()
	w2 := deadline - now2
	want2 := lp.Price(delegation.PriceInput{Procs: 2, Estimate: 600, Window: w2, SiteProcs: 8, Free: 8*w2 - 2*600 - 2*(now+600-now2)})
	if got := q2.GetOffer().GetPrice(); math.Abs(got-want2) > 1e-9 || got <= q.GetOffer().GetPrice() {
		t.Fatalf("second price %v, want %v (above the first's %v)", got, want2, q.GetOffer().GetPrice())
	}
	for _, o := range []*fedschedv1.Offer{q.GetOffer(), q2.GetOffer()} {
		sites[1].fed.Release(ctx, &fedschedv1.ReleaseRequest{HoldId: o.GetHoldId()}) //nolint:errcheck // expires anyway
	}
	// A fee below the price: refused, Libra+$'s budget check.
	cheap := spec(2, 600)
	cheap.Deadline, cheap.Fee, cheap.Penalty = sp.Deadline, want/2, 1
	q3, err := sites[1].fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: "x.000000000003", Spec: cheap})
	if err != nil || q3.GetOffer() != nil || q3.GetRefusal() != fedschedv1.Reason_REASON_REJECTED_BUDGET {
		t.Fatalf("quote over budget: %v %v, want a budget refusal", q3, err)
	}
	// A job too wide for site 0 goes to site 1; the origin keeps the
	// price each peer quoted.
	wide := spec(6, 600)
	wide.SimRuntimeSeconds = 60
	wide.Deadline, wide.Fee, wide.Penalty = sp.Deadline, 100, 1
	r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: wide})
	if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("submit: %v %v", r, err)
	}
	as := getJob(t, sites[0].client, r.GetJob().GetId()).GetQuoteAnswers()
	if len(as) != 1 || !as[0].GetOffered() || as[0].GetPrice() <= 0 {
		t.Fatalf("quote answers %v, want site 1's offer with its price", as)
	}
	ag, err := sites[1].fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "s0", OriginJobId: r.GetJob().GetId()})
	if err != nil || ag.GetAgreement().GetOffer().GetPrice() != as[0].GetPrice() {
		t.Fatalf("agreement %v %v: want the answer's price %v", ag, err, as[0].GetPrice())
	}
	// The ledger follows the agreement: once the SLA is met, the origin
	// has earned the user's fee and paid the price, the peer has earned
	// the price and no fee.
	if j := waitState(t, sites[0].client, r.GetJob().GetId(), fedschedv1.JobState_JOB_STATE_COMPLETED); j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
		t.Fatalf("outcome %v, want met", j.GetSlaOutcome())
	}
	price := as[0].GetPrice()
	ledger := []map[string]float64{
		{"fedsched_sla_fees_earned_total": 100, "fedsched_sla_prices_paid_total": price, "fedsched_sla_prices_earned_total": 0},
		{"fedsched_sla_fees_earned_total": 0, "fedsched_sla_prices_paid_total": 0, "fedsched_sla_prices_earned_total": price},
	}
	for i, want := range ledger {
		fams := scrape(t, "http://"+web[i])
		for name, v := range want {
			if got := value(fams, name); math.Abs(got-v) > 1e-9 {
				t.Errorf("site %d: %s = %v, want %v", i, name, got, v)
			}
		}
	}
}

// freeAddr is a loopback address nothing listens on (for a node's HTTP
// listener).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
