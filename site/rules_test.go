package site

import (
	"fmt"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// busySite is a conservative site of 8 processors with 6 of them running
// a job until t0+1000.
func busySite(t *testing.T, policy plan.Policy) *plan.Site {
	t.Helper()
	s, err := plan.NewSite(plan.Config{Procs: 8, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	if pl := s.Submit(0, plan.Job{ID: 1, Procs: 6, Estimate: 1000, Deadline: plan.Forever}); !pl.OK() {
		t.Fatal(pl)
	}
	s.Pass(0)
	return s
}

// TestHoldForRules: the hold rule of a quote and of an RQF take, as both
// drivers applied it before it existed once (node.quote, the agent's
// holdFor and quote): each refusal with its kind (a node maps it to its
// reason code) and nothing left held after a refusal.
func TestHoldForRules(t *testing.T) {
	libra := delegation.LibraPlus{PBase: 1, Alpha: 1}
	for _, c := range []struct {
		name     string
		rules    Rules
		job      plan.Job
		startNow bool
		want     RefusalKind // 0: held
		start    int64
		price    float64
	}{
		{name: "fits now", job: plan.Job{Procs: 2, Estimate: 100}, startNow: true, start: 10},
		{name: "start-now asked, own policy would not start it", job: plan.Job{Procs: 4, Estimate: 100}, startNow: true, want: RefuseNotStartNow},
		{name: "later slot without start-now", job: plan.Job{Procs: 4, Estimate: 100}, start: 1000},
		{name: "no slot in the window", job: plan.Job{Procs: 4, Estimate: 100, Deadline: 500}, want: RefuseNoPlacement},
		{name: "too wide", job: plan.Job{Procs: 9, Estimate: 100}, want: RefuseNoPlacement},
		{name: "community share", rules: Rules{CommunityShare: 0.25}, job: plan.Job{Procs: 1, Estimate: 100}, want: RefuseCommunityShare},
		{name: "community share after the busy job", rules: Rules{CommunityShare: 0.25}, job: plan.Job{Procs: 4, Estimate: 100}, start: 1000},
		{name: "budget", rules: Rules{Pricing: libra}, job: plan.Job{Procs: 2, Estimate: 3600, Fee: 1}, want: RefuseBudget},
		{name: "priced", rules: Rules{Pricing: libra}, job: plan.Job{Procs: 2, Estimate: 3600, Fee: 5}, start: 10, price: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := busySite(t, plan.Conservative)
			r := c.rules
			r.Name, r.Procs = "x", 8
			j := c.job
			j.ID, j.Release = 100, 10
			if j.Deadline == 0 {
				j.Deadline = plan.Forever
			}
			free := s.Plan().Profile().MinFree(10, 2000)
			pl, price, ref := HoldFor(s, &r, 10, j, 70, c.startNow)
			switch {
			case c.want == 0 && ref != nil:
				t.Fatalf("refused: %v (%v)", ref, ref.Kind)
			case c.want != 0 && (ref == nil || ref.Kind != c.want):
				t.Fatalf("got %v %v, want refusal kind %d", pl, ref, c.want)
			case c.want != 0:
				if s.Holds() != 0 || s.Plan().Profile().MinFree(10, 2000) != free {
					t.Fatalf("a refusal left %d holds, %d processors free (was %d)", s.Holds(), s.Plan().Profile().MinFree(10, 2000), free)
				}
				if ref.Error() == "" {
					t.Fatal("a refusal without a message")
				}
			case pl.Start != c.start || s.Holds() != 1 || price != c.price:
				t.Fatalf("held %v at price %g (%d holds), want start %d at price %g", pl, price, s.Holds(), c.start, c.price)
			}
		})
	}
}

// TestMayHold: a job never comes back to a site it passed through, and a
// site takes no job past its max_hops (the node's peer-side rule, which
// the agent now applies too).
func TestMayHold(t *testing.T) {
	r := &Rules{Name: "b", MaxHops: 1}
	fresh := delegation.Route{{Site: "a", Action: delegation.ActionSubmitted}}
	if ref := MayHold(r, fresh); ref != nil {
		t.Fatalf("fresh job: %v", ref)
	}
	if ref := MayHold(r, fresh.With(delegation.Hop{Site: "b", Action: delegation.ActionAccepted})); ref == nil || ref.Kind != RefuseVisited {
		t.Fatalf("visited: %v", ref)
	}
	if ref := MayHold(r, delegation.Route{{Site: "a", Action: delegation.ActionSubmitted}, {Site: "a"}, {Site: "b"}}); ref == nil || ref.Kind != RefuseVisited {
		t.Fatalf("visited, as a node's route names it: %v", ref)
	}
	// A peer that refused (or quoted) the job never held it: the node's
	// route keeps quote answers apart, the agent's records them.
	for _, a := range []delegation.Action{delegation.ActionRefused, delegation.ActionQuoted} {
		if ref := MayHold(r, fresh.With(delegation.Hop{Site: "b", Action: a})); ref != nil {
			t.Fatalf("%v the job's quote: %v", a, ref)
		}
	}
	moved := fresh.With(delegation.Hop{Site: "c", Action: delegation.ActionDelegated})
	if ref := MayHold(r, moved); ref == nil || ref.Kind != RefuseMaxHops || ref.Hops != 2 {
		t.Fatalf("past max_hops: %v", ref)
	}
	if ref := MayHold(&Rules{Name: "b", MaxHops: 2}, moved); ref != nil {
		t.Fatalf("within max_hops 2: %v", ref)
	}
}

func offer(site string, start, end, expires int64) *Offer {
	return &Offer{Quote: delegation.Quote{Site: site, Start: start, End: end, Expires: expires}}
}

// TestChoose: the choice among one round's offers, with cases where the
// node's old choice (node.delegate before this rule existed once) differed
// from the agent's: the node took quotes that did not beat its own
// placement and expired ones.
func TestChoose(t *testing.T) {
	const now, skew = 100, 30
	acf := OfferDecision{Offer: true, LocalEnd: 500, StartNow: true}
	reject := OfferDecision{Offer: true, LocalEnd: plan.Forever}
	for _, c := range []struct {
		name    string
		d       OfferDecision
		offers  []*Offer
		win     int
		release string
	}{
		{name: "nothing offered", d: reject, offers: []*Offer{nil, nil}, win: -1, release: "[]"},
		{name: "best end wins", d: reject, offers: []*Offer{offer("a", 100, 400, 160), nil, offer("c", 100, 300, 160)}, win: 2, release: "[0]"},
		// ACF: every quote starts now and ends alike: the rank decides,
		// never the name (c is ranked before a).
		{name: "tie by rank", d: acf, offers: []*Offer{offer("c", 100, 200, 160), offer("a", 100, 200, 160)}, win: 0, release: "[1]"},
		// Two peers read their clocks a moment apart: compared as
		// starting at the asker's now, they tie.
		{name: "start-now quotes compared from the asker's now", d: acf, offers: []*Offer{offer("c", 99, 199, 160), offer("a", 98, 198, 160)}, win: 0, release: "[1]"},
		// A peer's clock a second ahead of the asker's (a live
		// federation, a scaled clock): its start-now quote still starts
		// now, and the rank decides.
		{name: "a start-now quote from a clock ahead by less than the skew", d: acf, offers: []*Offer{offer("c", 101, 201, 160), offer("a", 100, 200, 160)}, win: 0, release: "[1]"},
		{name: "a start-now quote that starts later than the skew is dropped", d: acf, offers: []*Offer{offer("c", 100+skew+1, 201+skew, 160), offer("a", 100, 200, 160)}, win: 1, release: "[0]"},
		// The node used to take it: it does not end before the site's
		// own placement.
		{name: "a quote that does not beat the local end", d: acf, offers: []*Offer{offer("c", 100, 500, 160)}, win: -1, release: "[0]"},
		// The node used to call Best with now 0 and take it.
		{name: "an expired quote", d: reject, offers: []*Offer{offer("c", 100, 200, 100)}, win: -1, release: "[0]"},
		{name: "queued (EFS) offers promise no slot", d: acf, offers: []*Offer{{Quote: delegation.Quote{Site: "e", Start: now, End: plan.Forever, Expires: 160}, Queued: true}}, win: 0, release: "[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			win, release := Choose(now, skew, c.d, 0, 0, c.offers)
			if release == nil {
				release = []int{}
			}
			if win != c.win || fmt.Sprint(release) != c.release {
				t.Fatalf("win %d release %v, want %d %s", win, release, c.win, c.release)
			}
		})
	}
}

// TestOfferRules: the transfer policy before admission (OfferFirst) and
// after a rejection (OfferRejected).
func TestOfferRules(t *testing.T) {
	route := delegation.Route{{Site: "x", Action: delegation.ActionSubmitted}}
	acf := &Rules{Name: "x", Procs: 8, Transfer: delegation.ACF}
	onReject := &Rules{Name: "x", Procs: 8, Transfer: delegation.OnReject}
	rqf := &Rules{Name: "x", Procs: 8, Transfer: delegation.RQF}
	s := busySite(t, plan.Conservative)
	job := func(procs int, est, deadline int64) plan.Job {
		return plan.Job{ID: 50, Procs: procs, Estimate: est, Release: 10, Deadline: deadline}
	}
	if d := OfferFirst(s, acf, 10, job(2, 100, plan.Forever), route); d.Offer {
		t.Errorf("ACF offers a job that starts now: %+v", d)
	}
	if d := OfferFirst(s, acf, 10, job(4, 100, plan.Forever), route); !d.Offer || !d.StartNow || d.LocalEnd != 1100 {
		t.Errorf("ACF, a job that waits until 1000: %+v, want an offer for start-now quotes ending before 1100", d)
	}
	if d := OfferFirst(s, acf, 10, job(4, 100, plan.Forever), route.With(delegation.Hop{Site: "y", Action: delegation.ActionDelegated})); d.Offer {
		t.Errorf("ACF offers a job past max_hops: %+v", d)
	}
	if d := OfferFirst(s, acf, 10, job(4, 100, 500), route); d.Offer {
		t.Errorf("ACF offers before admission a job the site rejects (admission's rejection decides): %+v", d)
	}
	if d := OfferFirst(s, onReject, 10, job(4, 100, plan.Forever), route); d.Offer {
		t.Errorf("on-reject offers before admission: %+v", d)
	}
	noGap := plan.Placement{Reason: plan.ReasonRejectedNoGap}
	for _, r := range []*Rules{acf, onReject} {
		if d := OfferRejected(r, route, noGap); !d.Offer || d.StartNow || d.LocalEnd != plan.Forever {
			t.Errorf("%v, rejected for want of a gap: %+v, want an offer for any slot", r.Transfer, d)
		}
		if d := OfferRejected(r, route, plan.Placement{Reason: plan.ReasonRejectedInvalid}); d.Offer {
			t.Errorf("%v offers a malformed job: %+v", r.Transfer, d)
		}
	}
	if d := OfferRejected(rqf, route, noGap); d.Offer {
		t.Errorf("RQF pushes: %+v", d)
	}
}

// TestDisclosesRule: the jobs an RQF site lists to an asker.
func TestDisclosesRule(t *testing.T) {
	r := &Rules{Name: "a", MaxHops: 1}
	route := delegation.Route{{Site: "a", Action: delegation.ActionSubmitted}}
	for _, c := range []struct {
		name          string
		origin, asker string
		route         delegation.Route
		procs, free   int
		want          bool
	}{
		{"own waiting job that fits", "a", "b", route, 4, 4, true},
		{"wider than the asker's free processors", "a", "b", route, 5, 4, false},
		{"a peer's job", "c", "b", route, 1, 4, false},
		{"been at the asker", "a", "b", route.With(delegation.Hop{Site: "b", Action: delegation.ActionAccepted}), 1, 4, false},
		{"been at the asker, as a node's route names it", "a", "b", route.With(delegation.Hop{Site: "a"}).With(delegation.Hop{Site: "b"}), 1, 4, false},
		{"the asker refused its quote", "a", "b", route.With(delegation.Hop{Site: "b", Action: delegation.ActionRefused}), 1, 4, true},
		{"past max_hops", "a", "b", route.With(delegation.Hop{Site: "c", Action: delegation.ActionDelegated}), 1, 4, false},
	} {
		if got := Discloses(r, c.origin, c.route, c.procs, c.asker, c.free); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestObserveOutcome: what an origin learns of a peer from a delegated
// job's outcome, in both drivers: the response ratio from the job's
// submission (the node measured it so; the agent from the job's release,
// which differs for a job released later) and its area for EFS's AWRT.
func TestObserveOutcome(t *testing.T) {
	var h delegation.History
	// Submitted at 100 for release at 400; ran 500-900 on 4 processors,
	// estimate 400.
	ObserveOutcome(&h, 4, 400, 100, 500, 900)
	if h.Jobs != 1 || h.MeanResponseRatio != 2 {
		t.Fatalf("response ratio %g over %d jobs, want (900-100)/400 = 2", h.MeanResponseRatio, h.Jobs)
	}
	if awrt, ok := h.AWRT(); !ok || awrt != 800 {
		t.Fatalf("AWRT %g %v, want 800", awrt, ok)
	}
}

// TestPullRanking: an idle RQF site never asks itself (a, which would
// tie with the best and win by name), and asks at most MaxCandidates
// peers, those with a processor free (c, full, is left out).
func TestPullRanking(t *testing.T) {
	cands := []delegation.Candidate{{Site: "b", Procs: 8, FreeNow: 8}, {Site: "a", Procs: 64, FreeNow: 64}, {Site: "c", Procs: 32, FreeNow: 0},
		{Site: "d", Procs: 16, FreeNow: 16}}
	var got []string
	for _, c := range PullRanking(cands, "a", nil, delegation.LocationConfig{MaxCandidates: 2, Jitter: -1}, nil) {
		got = append(got, c.Site)
	}
	if fmt.Sprint(got) != "[b d]" {
		t.Fatalf("ranking %v, want [b d]", got)
	}
}

// TestPullTiming is RQF's timing rule, which the agent (Tick, NextWake)
// and the node (its loop's turn and timer) both call: at most once per
// interval when something happens, and by itself on the interval's grid
// at the site's offset while idle.
func TestPullTiming(t *testing.T) {
	for _, c := range []struct {
		idle             int
		last, now, every int64
		want             bool
	}{
		{0, NeverPulled, 100, 60, false}, // busy or with a queue: never
		{4, NeverPulled, 100, 60, true},  // never asked
		{4, 50, 100, 60, false},          // within the interval
		{4, 40, 100, 60, true},           // an interval since
	} {
		if got := PullDue(c.idle, c.last, c.now, c.every); got != c.want {
			t.Errorf("PullDue(%d, %d, %d, %d) = %v, want %v", c.idle, c.last, c.now, c.every, got, c.want)
		}
	}
	for _, c := range []struct {
		idle                     int
		last, now, every, offset int64
		want                     int64
	}{
		{0, NeverPulled, 100, 60, 0, plan.Forever}, // not idle: no wake
		{4, NeverPulled, 100, 60, 0, 120},          // the next multiple
		{4, NeverPulled, 120, 60, 0, 120},          // due now, not asked yet
		{4, NeverPulled, 100, 60, 47, 107},         // at the site's offset
		{4, 107, 107, 60, 47, 167},                 // asked at it
		{4, NeverPulled, -100, 60, 11, -49},        // before the clock's 0 (a replay's first interval)
		{4, 100, 110, 60, 47, 167},                 // 107 is within the interval of the last round
		{4, 90, 100, 60, 0, 180},                   // 120 is within the interval of the last round
		{4, 60, 100, 60, 0, 120},
	} {
		if got := NextPull(c.idle, c.last, c.now, c.every, c.offset); got != c.want {
			t.Errorf("NextPull(%d, %d, %d, %d, %d) = %d, want %d", c.idle, c.last, c.now, c.every, c.offset, got, c.want)
		}
	}
	// Sites of one federation ask at different seconds of the interval.
	seen := map[int64]bool{}
	for _, n := range []string{"alpha", "beta", "gamma"} {
		o := PullOffset(n, 60)
		if o < 0 || o >= 60 || seen[o] {
			t.Errorf("PullOffset(%q, 60) = %d: outside [0, 60) or shared", n, o)
		}
		seen[o] = true
	}
}
