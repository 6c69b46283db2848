package delegation

import (
	"fmt"
	"math"
	"strings"

	"github.com/fedsched/fedsched/plan"
)

// PriceInput is what a quote's price depends on: the job, the window it is
// priced over and the processor time left free there.
type PriceInput struct {
	// Procs and Estimate are the job's processors and runtime estimate
	// (seconds): RE = Procs × Estimate processor-seconds.
	Procs    int
	Estimate int64
	// Window is the length, in seconds, of the job's window [TSU, TD):
	// from the quote to the job's deadline, or to the quoted end when the
	// job has none.
	Window int64
	// SiteProcs is the site's processors: RESMax = SiteProcs × Window.
	SiteProcs int
	// Free is RESFree: the processor-seconds left free in the window once
	// the job is held (every reservation, hold and standing reservation
	// counted, the job's own included).
	Free int64
}

// Pricing is the price model of a site that quotes for remote work.
type Pricing interface {
	// Price is what the site charges for the job, in virtual coins
	// (processor-hours at PBase 1).
	Price(PriceInput) float64
}

// Free is the default price between federation members: nothing.
type Free struct{}

// Price is 0.
func (Free) Price(PriceInput) float64 { return 0 }

// LibraPlus is the Libra+$ price of Yeo (2008, eqs. 3.3–3.6) on processor
// time, the only resource priced here: per processor-hour
//
//	P = α·PBase + β·PUtil,  PUtil = (RESMax / RESFree)·PBase
//
// with RESMax = SiteProcs × Window and RESFree the processor time left free
// in the window once the job is held (RESMax − Σ RE_k − RE_i). The charge
// is P × RE, RE the job's processor-hours at its estimate. A short deadline
// and a busy site cost more. A window left with less than one processor
// free is priced as if one were (RESFree >= Window), where Yeo would not
// allocate at all (RESMax > RE fails only for a full window).
type LibraPlus struct {
	PBase float64 `json:"pbase" yaml:"pbase"` // coins per processor-hour
	Alpha float64 `json:"alpha" yaml:"alpha"` // weight of the static part
	Beta  float64 `json:"beta" yaml:"beta"`   // weight of the utilisation part
}

// Price is the Libra+$ charge of the job.
func (l LibraPlus) Price(in PriceInput) float64 {
	if in.Procs <= 0 || in.Estimate <= 0 || in.Window <= 0 || in.SiteProcs <= 0 {
		return 0
	}
	resMax := float64(in.SiteProcs) * float64(in.Window)
	resFree := math.Max(float64(in.Free), float64(in.Window))
	perHour := l.Alpha*l.PBase + l.Beta*(resMax/resFree)*l.PBase
	return perHour * float64(in.Procs) * float64(in.Estimate) / 3600
}

// Validate refuses negative or non-finite parameters, and a price that is
// always 0 (PBase 0, or α and β both 0): set pricing to free instead.
func (l LibraPlus) Validate() error {
	ok := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
	if !ok(l.PBase) || !ok(l.Alpha) || !ok(l.Beta) || l.PBase == 0 || l.Alpha+l.Beta == 0 {
		return fmt.Errorf("libra+$ pricing %+v: want pbase > 0, alpha and beta >= 0, not both 0: %w", l, ErrInvalid)
	}
	return nil
}

// PricingModels are the names ParsePricing knows.
var PricingModels = []string{"free", "libra+$"}

// ParsePricing returns the price model named model ("free" or "" for
// Free, "libra+$" for LibraPlus with l's parameters), validated: free with
// parameters is refused (they would have no effect).
func ParsePricing(model string, l LibraPlus) (Pricing, error) {
	switch strings.ToLower(model) {
	case "", "free":
		if l != (LibraPlus{}) {
			return nil, fmt.Errorf("pricing parameters %+v have no effect with the free model; set model libra+$: %w", l, ErrInvalid)
		}
		return Free{}, nil
	case "libra+$":
		if err := l.Validate(); err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("pricing model %q: want one of %s: %w", model, strings.Join(PricingModels, ", "), ErrInvalid)
}

// QuotePrice is the price a site quotes for a job j it has just held, at
// now, in the slot pl; prof is the site's profile with the hold in it. The
// node and the simulator's site agent both call it where they make a
// quote, so that both quote the same price. The window runs from now to
// the job's deadline, or to the slot's end when it has none. affordable
// is Libra+$'s budget check (Fig. 3.2): the job's fee, its budget, covers
// the price; a job without a fee has no budget to check. A nil pr is Free.
func QuotePrice(pr Pricing, prof *plan.Profile, j plan.Job, pl plan.Placement, now int64) (price float64, affordable bool) {
	if pr == nil {
		return 0, true
	}
	if _, free := pr.(Free); free {
		return 0, true
	}
	to := j.Deadline
	if to == plan.Forever || to < pl.End {
		to = pl.End
	}
	in := PriceInput{Procs: j.Procs, Estimate: j.Estimate, Window: to - now, SiteProcs: prof.Procs(), Free: prof.FreeArea(now, to)}
	price = pr.Price(in)
	return price, j.Fee <= 0 || price <= j.Fee
}

// BudgetRefusal is the message of a quote refused because the job's fee
// does not cover the price.
func BudgetRefusal(price, fee float64) string {
	return fmt.Sprintf("the price %.2f exceeds the job's fee %.2f (its budget)", price, fee)
}
