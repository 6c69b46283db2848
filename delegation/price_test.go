package delegation

import (
	"errors"
	"math"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// TestQuotePrice prices Yeo's example from a plan: 45 of 100 processors
// reserved for the next two hours (90 processor-hours committed) and the
// job's hold of 10 processors for an hour.
func TestQuotePrice(t *testing.T) {
	p := plan.New(100)
	for _, r := range []plan.Reservation{
		{ID: 1, Procs: 45, Start: 0, End: 7200, Deadline: plan.Forever},
		{ID: 2, Procs: 10, Start: 0, End: 3600, Deadline: plan.Forever}, // the hold
	} {
		if err := p.Reserve(r); err != nil {
			t.Fatal(err)
		}
	}
	pl := plan.Placement{Start: 0, End: 3600, Reason: plan.ReasonPlacedInFull}
	l := LibraPlus{PBase: 1, Beta: 1}
	for _, c := range []struct {
		name       string
		pr         Pricing
		job        plan.Job
		want       float64
		affordable bool
	}{
		{"2 h deadline", l, plan.Job{Procs: 10, Estimate: 3600, Deadline: 7200, Fee: 25}, 20, true},
		{"over budget", l, plan.Job{Procs: 10, Estimate: 3600, Deadline: 7200, Fee: 19}, 20, false},
		// Without a deadline the window is the slot: 100 of 100
		// processor-hours, 45 + 10 taken: PUtil = 100/45.
		{"no deadline: the slot", l, plan.Job{Procs: 10, Estimate: 3600, Deadline: plan.Forever}, 10 * 100.0 / 45, true},
		{"free", Free{}, plan.Job{Procs: 10, Estimate: 3600, Deadline: 7200, Fee: 1}, 0, true},
		{"nil is free", nil, plan.Job{Procs: 10, Estimate: 3600, Deadline: 7200, Fee: 1}, 0, true},
	} {
		price, ok := QuotePrice(c.pr, p.Profile(), c.job, pl, 0)
		if math.Abs(price-c.want) > 1e-9 || ok != c.affordable {
			t.Errorf("%s: price %v affordable %v, want %v %v", c.name, price, ok, c.want, c.affordable)
		}
	}
}

func TestParsePricing(t *testing.T) {
	if pr, err := ParsePricing("libra+$", LibraPlus{PBase: 1, Alpha: 1, Beta: 0.1}); err != nil || pr != (LibraPlus{PBase: 1, Alpha: 1, Beta: 0.1}) {
		t.Fatalf("libra+$: %v %v", pr, err)
	}
	if pr, err := ParsePricing("", LibraPlus{}); err != nil || pr != (Free{}) {
		t.Fatalf("default: %v %v", pr, err)
	}
	for _, c := range []struct {
		model string
		l     LibraPlus
	}{{"libra+$", LibraPlus{}}, {"libra+$", LibraPlus{PBase: 1, Alpha: -1, Beta: 1}}, {"libra+$", LibraPlus{PBase: 1}}, {"auction", LibraPlus{PBase: 1, Alpha: 1}}, {"free", LibraPlus{Beta: 0.1}}} {
		if _, err := ParsePricing(c.model, c.l); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s %+v: %v, want ErrInvalid", c.model, c.l, err)
		}
	}
}
