package delegation

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestStateMachine(t *testing.T) {
	tests := []struct {
		from State
		ev   Event
		to   State
		err  bool
	}{
		{Pending, EventAgree, Observed, false},
		{Pending, EventRelease, Rejected, false},
		{Pending, EventExpire, Rejected, false},
		{Pending, EventTerminate, PendingAndTerminating, false},
		{Pending, EventFinish, Pending, true},
		{Observed, EventFinish, Complete, false},
		{Observed, EventTerminate, ObservedAndTerminating, false},
		{Observed, EventAgree, Observed, false}, // retried agree is idempotent
		{Observed, EventRelease, Observed, true},
		{Observed, EventExpire, Observed, true}, // an agreed hold never expires
		{ObservedAndTerminating, EventTerminated, Terminated, false},
		{ObservedAndTerminating, EventFinish, Complete, false},
		{Rejected, EventAgree, Rejected, true}, // agreeing to a dead quote
		{Rejected, EventExpire, Rejected, false},
		{Complete, EventTerminate, Complete, true},
		{Complete, EventFinish, Complete, false},
		{Terminated, EventTerminate, Terminated, false},
		{PendingAndTerminating, EventExpire, Terminated, false},
	}
	for _, tc := range tests {
		t.Run(tc.from.String()+"/"+tc.ev.String(), func(t *testing.T) {
			got, err := Next(tc.from, tc.ev)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil && !errors.Is(err, ErrTransition) {
				t.Fatalf("err = %v, want ErrTransition", err)
			}
			if got != tc.to {
				t.Fatalf("Next(%v, %v) = %v, want %v", tc.from, tc.ev, got, tc.to)
			}
		})
	}
}

// TestTerminalStatesStay checks that no event leads out of a terminal state.
func TestTerminalStatesStay(t *testing.T) {
	for _, s := range []State{Rejected, Terminated, Complete} {
		for e := EventAgree; e <= EventFinish; e++ {
			if to, _ := Next(s, e); to != s {
				t.Fatalf("%v on %v -> %v", s, e, to)
			}
		}
	}
}

func TestBest(t *testing.T) {
	now := int64(100)
	tests := []struct {
		name   string
		quotes []Quote
		want   int
	}{
		{"empty", nil, -1},
		{"profit wins", []Quote{{Site: "a", PoF: 0.2, End: 10, Expires: 200}, {Site: "b", PoF: 0.1, End: 50, Expires: 200}}, 1},
		{"price counts", []Quote{{Site: "a", Price: 5, End: 10, Expires: 200}, {Site: "b", PoF: 0.01, End: 50, Expires: 200}}, 1},
		{"tie to earliest end", []Quote{{Site: "a", End: 50, Expires: 200}, {Site: "b", End: 10, Expires: 200}}, 1},
		{"tie to rank order, never the name", []Quote{{Site: "b", End: 10, Expires: 200}, {Site: "a", End: 10, Expires: 200}}, 0},
		{"expired skipped", []Quote{{Site: "a", End: 10, Expires: 100}, {Site: "b", PoF: 0.5, End: 10, Expires: 200}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Best(tc.quotes, 10, 10, now); got != tc.want {
				t.Fatalf("Best = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRank(t *testing.T) {
	cands := []Candidate{
		{Site: "small", Procs: 8, FreeNow: 8, Free1h: 8, Free4h: 8, Free24h: 8},
		{Site: "busy", Procs: 128, FreeNow: 0, Free1h: 0, Free4h: 16, Free24h: 128},
		{Site: "idle", Procs: 128, FreeNow: 128, Free1h: 128, Free4h: 128, Free24h: 128},
		{Site: "origin", Procs: 128, FreeNow: 128, Free1h: 128, Free4h: 128, Free24h: 128},
	}
	route := Route{{Site: "origin", Action: ActionSubmitted}}
	rng := rand.New(rand.NewPCG(1, 2))
	got := Rank(cands, 32, route, nil, LocationConfig{Jitter: -1}, rng)
	if len(got) != 2 || got[0].Site != "idle" || got[1].Site != "busy" {
		t.Fatalf("Rank = %+v, want idle then busy (small too small, origin on the route)", got)
	}
	// A peer whose delegations failed drops behind.
	hist := map[string]History{"idle": {Failures: 4}, "busy": {Jobs: 10, MeanResponseRatio: 1}}
	got = Rank(cands, 32, route, hist, LocationConfig{Jitter: -1}, rng)
	if got[0].Site != "busy" {
		t.Fatalf("Rank with history = %+v, want busy first", got)
	}
	// Jitter spreads ties across peers instead of herding on one.
	twins := []Candidate{{Site: "x", Procs: 64, FreeNow: 64}, {Site: "y", Procs: 64, FreeNow: 64}}
	first := map[string]int{}
	for i := 0; i < 200; i++ {
		first[Rank(twins, 8, nil, nil, LocationConfig{}, rng)[0].Site]++
	}
	if first["x"] < 50 || first["y"] < 50 {
		t.Fatalf("jitter did not spread: %v", first)
	}
}

func TestRouteLimits(t *testing.T) {
	r := Route{{Site: "a", Action: ActionSubmitted}}
	if !r.CanDelegate(1) {
		t.Fatal("fresh route cannot delegate")
	}
	r2 := r.With(Hop{Site: "b", Action: ActionDelegated})
	if r2.CanDelegate(1) || !r2.CanDelegate(2) || !r2.Visited("b") || len(r) != 1 {
		t.Fatalf("route %v: hop limits or copy semantics wrong", r2)
	}
}

func TestPricing(t *testing.T) {
	// Yeo's example (§3.4.1): PBase $1 per unit, 100 units an hour (100
	// processors), 90 units committed, a job of 10 units (10 processors
	// for an hour). A 2 h deadline leaves 200 − 90 − 10 = 100 of 200 free:
	// PUtil = $2 a unit; a 5 h one 400 of 500: $1.25.
	h := int64(3600)
	for _, c := range []struct {
		name string
		l    LibraPlus
		in   PriceInput
		want float64
	}{
		{"2 h deadline, PUtil alone", LibraPlus{PBase: 1, Beta: 1}, PriceInput{Procs: 10, Estimate: h, Window: 2 * h, SiteProcs: 100, Free: 100 * h}, 2 * 10},
		{"5 h deadline, PUtil alone", LibraPlus{PBase: 1, Beta: 1}, PriceInput{Procs: 10, Estimate: h, Window: 5 * h, SiteProcs: 100, Free: 400 * h}, 1.25 * 10},
		{"Table 3.1's α 1, β 0.1", LibraPlus{PBase: 1, Alpha: 1, Beta: 0.1}, PriceInput{Procs: 10, Estimate: h, Window: 2 * h, SiteProcs: 100, Free: 100 * h}, (1 + 0.1*2) * 10},
		{"PBase scales", LibraPlus{PBase: 0.5, Alpha: 1, Beta: 1}, PriceInput{Procs: 10, Estimate: h, Window: 2 * h, SiteProcs: 100, Free: 100 * h}, 0.5 * (1 + 2) * 10},
		{"a full window is priced as one processor free", LibraPlus{PBase: 1, Beta: 1}, PriceInput{Procs: 10, Estimate: h, Window: 2 * h, SiteProcs: 100, Free: 0}, 100 * 10},
	} {
		if got := c.l.Price(c.in); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: price %v, want %v", c.name, got, c.want)
		}
	}
	if (Free{}).Price(PriceInput{Procs: 10, Estimate: h, Window: h, SiteProcs: 100, Free: h}) != 0 {
		t.Fatal("Free is not free")
	}
	if !(CommunityShare{}).Allows(10, 10, 100) || (CommunityShare{Share: 0.2}).Allows(10, 25, 100) || !(CommunityShare{Share: 0.2}).Allows(10, 30, 100) {
		t.Fatal("community share rule wrong")
	}
	for _, c := range []struct {
		mode                TransferMode
		accepted, startsNow bool
		want                bool
	}{
		{OnReject, true, false, false}, {OnReject, false, false, true},
		{ACF, true, true, false}, {ACF, true, false, true}, {ACF, false, false, true},
		{RQF, false, false, false}, {RQF, true, false, false},
	} {
		if got := ShouldDelegate(c.mode, c.accepted, c.startsNow); got != c.want {
			t.Errorf("ShouldDelegate(%v, accepted %v, starts now %v) = %v", c.mode, c.accepted, c.startsNow, got)
		}
	}
	for _, m := range []TransferMode{OnReject, ACF, RQF} {
		if got, err := ParseTransfer(m.String()); err != nil || got != m {
			t.Errorf("ParseTransfer(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseTransfer("push"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseTransfer(push) = %v", err)
	}
}
