package overbook

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestSettle(t *testing.T) {
	terms := Terms{Procs: 2, Estimate: 3600, Fee: 10, Penalty: 20}
	tests := []struct {
		name        string
		got, actual int64
		failed      bool
		want        Settlement
	}{
		{"finished early", 1000, 900, false, Settlement{Met, Finished, 10, 0}},
		{"finished exactly", 3000, 3000, false, Settlement{Met, Finished, 10, 0}},
		{"user underestimated, killed at x", 3600, 5000, false, Settlement{Met, EstimateReached, 10, 0}},
		{"overbooked, cut before x", 3000, 3500, false, Settlement{Violated, CutShort, 0, 20}},
		{"node failure before x", 1000, 3500, true, Settlement{Violated, NodeFailed, 0, 20}},
		{"node failure after full x", 3600, 5000, true, Settlement{Met, EstimateReached, 10, 0}},
		{"finished before the failure", 4000, 3500, true, Settlement{Met, Finished, 10, 0}},
		{"negative got", -5, 0, false, Settlement{Met, Finished, 10, 0}},
		{"never ran", 0, 10, false, Settlement{Violated, CutShort, 0, 20}},
	}
	for _, tc := range tests {
		got := Settle(terms, tc.got, tc.actual, tc.failed)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if n := Settle(terms, 3000, 3500, false).Net(); n != -20 {
		t.Errorf("Net = %v", n)
	}
	if c := Cancel(terms); c.Outcome != Cancelled || c.Reason != Withdrawn || c.Net() != 0 {
		t.Errorf("Cancel = %+v", c)
	}
}

func TestStrings(t *testing.T) {
	for v, w := range map[Outcome]string{Met: "met", Violated: "violated", Cancelled: "cancelled", 0: "Outcome(0)"} {
		if v.String() != w {
			t.Errorf("%d: %q", int(v), v.String())
		}
	}
	for v, w := range map[Reason]string{Finished: "finished", EstimateReached: "estimate reached", CutShort: "cut short", NodeFailed: "node failed", Withdrawn: "withdrawn", 9: "Reason(9)"} {
		if v.String() != w {
			t.Errorf("%d: %q", int(v), v.String())
		}
	}
	for v, w := range map[Urgency]string{NoUrgency: "none", LowUrgency: "low", HighUrgency: "high", 7: "Urgency(7)"} {
		if v.String() != w {
			t.Errorf("%d: %q", int(v), v.String())
		}
	}
}

func TestFeeModel(t *testing.T) {
	j := JobInfo{Procs: 4, Estimate: 5400} // 4 nodes × 1.5 h = 6 node-hours
	// Default: fee 6 VC, penalty 1 × 6, deadline 100 + 2·5400 = 10900.
	terms, err := FeeModel{}.Terms(nil, j, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := Terms{Procs: 4, Release: 100, Deadline: 10900, Estimate: 5400, Fee: 6, Penalty: 6}
	if terms != want {
		t.Errorf("default terms %+v, want %+v", terms, want)
	}
	// Risk runs: penalty ratio 4 → 24; deadline factor 3 → 100 + 16200.
	terms, _ = FeeModel{PenaltyRatio: 4, DeadlineFactor: 3}.Terms(nil, j, 100)
	if terms.Penalty != 24 || terms.Deadline != 16300 {
		t.Errorf("ratio 4: %+v", terms)
	}
	if (FeeModel{PenaltyRatio: 0.5}).Penalty(4, 5400) != 3 || (FeeModel{}).Fee(4, 5400) != 6 {
		t.Error("Fee/Penalty")
	}
	if NodeHours(0, 3600) != 0 || NodeHours(3, -1) != 0 || NodeHours(3, 1200) != 1 {
		t.Error("NodeHours")
	}
	for _, bad := range []FeeModel{{PenaltyRatio: -1}, {DeadlineFactor: 0.5}, {PenaltyRatio: math.NaN()}} {
		if _, err := bad.Terms(nil, j, 0); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := (FeeModel{}).Terms(nil, JobInfo{Procs: 1}, 0); !errors.Is(err, ErrBadEstimate) {
		t.Error(err)
	}
	// The deadline saturates instead of overflowing.
	terms, _ = FeeModel{}.Terms(nil, JobInfo{Procs: 1, Estimate: MaxTime}, MaxTime)
	if terms.Deadline != MaxTime {
		t.Errorf("deadline %d", terms.Deadline)
	}
}

func TestUrgencyMeans(t *testing.T) {
	// Yeo Table 4.1: deadline low mean 3.5, ratio 7; budget 4, ratio 7;
	// penalty 4, ratio 4.
	//   high urgency: D/x 3.5,        B/f 4·7 = 28, P/g 4·4 = 16
	//   low urgency:  D/x 3.5·7 = 24.5, B/f 4,      P/g 4
	m := LibraSLAUrgency()
	if d, b, p := m.Means(HighUrgency); d != 3.5 || b != 28 || p != 16 {
		t.Errorf("high: %v %v %v", d, b, p)
	}
	if d, b, p := m.Means(LowUrgency); d != 24.5 || b != 4 || p != 4 {
		t.Errorf("low: %v %v %v", d, b, p)
	}
	// Table 6.6 defaults: all low means 4, ratios 4.
	if d, b, p := BidBasedUrgency().Means(HighUrgency); d != 4 || b != 16 || p != 16 {
		t.Errorf("bid-based high: %v %v %v", d, b, p)
	}
}

func TestUrgencyTerms(t *testing.T) {
	m := LibraSLAUrgency()
	m.RelStdDev = 0 // deterministic factors: exactly the class means
	r := rand.New(rand.NewPCG(31, 32))
	j := JobInfo{Procs: 2, Estimate: 7200} // f = g = 4 node-hours
	terms, err := m.Terms(r, j, 1000)
	if err != nil {
		t.Fatal(err)
	}
	switch terms.Urgency {
	case HighUrgency: // D = 3.5·7200 = 25200, fee 28·4, penalty 16·4
		if terms.Deadline != 26200 || terms.Fee != 112 || terms.Penalty != 64 || !terms.Hard {
			t.Errorf("high: %+v", terms)
		}
	case LowUrgency: // D = 24.5·7200 = 176400, fee 4·4, penalty 4·4
		if terms.Deadline != 177400 || terms.Fee != 16 || terms.Penalty != 16 || terms.Hard {
			t.Errorf("low: %+v", terms)
		}
	default:
		t.Errorf("urgency %v", terms.Urgency)
	}

	// With noise: class shares and mean factors match the model.
	m = LibraSLAUrgency()
	const n = 40000
	var high int
	var sumD [3]float64
	var cnt [3]int
	for range n {
		terms, err := m.Terms(r, j, 0)
		if err != nil {
			t.Fatal(err)
		}
		if terms.Deadline < terms.Estimate || terms.Fee <= 0 || terms.Penalty <= 0 {
			t.Fatalf("truncation failed: %+v", terms)
		}
		if terms.Urgency == HighUrgency {
			high++
		}
		sumD[terms.Urgency] += float64(terms.Deadline) / float64(j.Estimate)
		cnt[terms.Urgency]++
	}
	if f := float64(high) / n; !near(f, 0.2, 0.01) {
		t.Errorf("high-urgency share %v, want 0.2", f)
	}
	if d := sumD[HighUrgency] / float64(cnt[HighUrgency]); !near(d, 3.5, 0.05) {
		t.Errorf("high-urgency mean D/x %v, want 3.5", d)
	}
	if d := sumD[LowUrgency] / float64(cnt[LowUrgency]); !near(d, 24.5, 0.2) {
		t.Errorf("low-urgency mean D/x %v, want 24.5", d)
	}

	if _, err := m.Terms(nil, j, 0); !errors.Is(err, ErrNilRand) {
		t.Errorf("nil rand: %v", err)
	}
	bad := m
	bad.DeadlineLowMean = 0.5 // a deadline before the estimate
	if _, err := bad.Terms(r, j, 0); !errors.Is(err, ErrBadConfig) {
		t.Errorf("bad model: %v", err)
	}
	bad = m
	bad.HighFraction = 1.5
	if bad.Validate() == nil {
		t.Error("HighFraction 1.5 accepted")
	}
	// The interface is satisfied by both models.
	var _ TermsModel = FeeModel{}
	var _ TermsModel = m
}
