package sim

import (
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// FedSLA is the SLA outcome at one site of a federated replay, counted as
// a node's ledger counts it: accepted, overbooked, met and violated over the
// jobs the site ran (its own and those delegated in); rejected over the jobs
// submitted there that no site took.
//
// Money follows the agreements. A job delegated to a peer that does not
// price (no agreed price) is taken on the user's terms: the peer earns the
// fee if the SLA is met and owes the penalty if it is violated. A job
// delegated under an agreed price is a back-to-back contract: the peer
// earns the price (PriceEarned) if the SLA is met and owes the penalty if
// it is violated; the origin earns the user's fee and pays the peer the
// price (PricePaid) if it is met, and passes the penalty on if it is
// violated (nothing is left at the origin). Prices move money between
// sites: the federation's total gain does not depend on them.
type FedSLA struct {
	Accepted, Rejected, Overbooked, Met, Violated int
	// Fees are the user fees the site earned (met SLAs of jobs it ran on
	// the user's terms, and of jobs it delegated under an agreed price);
	// Penalties those it owed (violated SLAs of jobs it ran).
	Fees, Penalties float64
	// PriceEarned and PricePaid are the agreed prices of the met SLAs the
	// site ran for a peer, and paid to a peer.
	PriceEarned, PricePaid float64
	// Gain is Fees + PriceEarned − PricePaid − Penalties.
	Gain float64
	// AcceptedByOverbookingPeer counts the jobs submitted at the site that
	// a peer accepted only by overbooking (into a gap shorter than their
	// estimate); GainByOverbookingPeer is what they earned the peer.
	AcceptedByOverbookingPeer int
	GainByOverbookingPeer     float64
	// Failed counts the jobs the site ran that a node failure hit while
	// running or whose reservation it took away (Record.NodeFailed);
	// FailureViolations those of them whose SLA it violated.
	Failed, FailureViolations int
}

// priced reports whether f ran under an agreed price.
func (f *FedRecord) priced() bool { return f.Price > 0 && f.Payer != f.Exec }

// SLA settles the jobs of site k (overbook.Settle decides met or violated,
// as in the single-site experiments; FedSLA says who earns and owes what).
func (r *FedResult) SLA(k int) FedSLA {
	var ran, byPeer []Record
	rejected, failed := 0, 0
	var earned, paid, fees float64
	for i := range r.Records {
		f := &r.Records[i]
		if !f.Decision.OK() {
			if f.Origin == k {
				rejected++
			}
			continue
		}
		rec := f.Record
		if f.priced() {
			// The executing site settles the agreement: the price takes
			// the fee's place.
			rec.Fee = f.Price
			if settle(&f.Record).Outcome == overbook.Met {
				if f.Exec == k {
					earned += f.Price
				}
				if f.Payer == k {
					fees += f.Fee
					paid += f.Price
				}
			}
		}
		if f.Exec == k {
			ran = append(ran, rec)
			if f.NodeFailed {
				failed++
			}
		}
		if f.Origin == k && f.Exec != k && f.Decision.Reason == plan.ReasonOverbooked {
			byPeer = append(byPeer, rec)
		}
	}
	s := Settle(ran, r.Sites[k].Procs)
	p := Settle(byPeer, r.Sites[k].Procs)
	return FedSLA{Accepted: s.Accepted, Rejected: rejected, Overbooked: s.Overbooked, Met: s.Met, Violated: s.Violated,
		Fees: s.Fees - earned + fees, Penalties: s.Penalties, PriceEarned: earned, PricePaid: paid,
		Gain: s.Gain + fees - paid, AcceptedByOverbookingPeer: p.Accepted, GainByOverbookingPeer: p.Gain,
		Failed: failed, FailureViolations: s.FailureViolations}
}

// Delegations counts the jobs submitted at site k that ran elsewhere (out)
// and the jobs submitted elsewhere that ran at k (in).
func (r *FedResult) Delegations(k int) (out, in int) {
	r.index()
	for _, i := range r.byOrigin[k] {
		if r.Records[i].Exec != k {
			out++
		}
	}
	for _, i := range r.byExec[k] {
		if r.Records[i].Origin != k {
			in++
		}
	}
	return out, in
}

// ReplicationSeed is the seed of replication i (from 0) of a scenario
// with the given seed: the seed itself for the first, then independent
// draws from it.
func ReplicationSeed(seed uint64, i int) uint64 {
	if i == 0 {
		return seed
	}
	return splitmix(seed + uint64(i)*0x9e3779b97f4a7c15)
}

// splitmix is SplitMix64's finaliser: distinct inputs give well-spread,
// distinct outputs.
func splitmix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
