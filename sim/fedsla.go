package sim

import "github.com/fedsched/fedsched/plan"

// FedSLA is the SLA outcome of the jobs submitted at one site of a
// federated replay, wherever they ran.
type FedSLA struct {
	Accepted, Rejected, Overbooked, Met, Violated int
	Fees, Penalties, Gain                         float64
	// AcceptedByOverbookingPeer counts the delegated jobs a peer accepted
	// only by overbooking (into a gap shorter than their estimate);
	// GainByOverbookingPeer is what they earned (fees of the met minus
	// penalties of the violated).
	AcceptedByOverbookingPeer int
	GainByOverbookingPeer     float64
}

// SLA settles the jobs submitted at site k (overbook.Settle decides met or
// violated, as in the single-site experiments).
func (r *FedResult) SLA(k int) FedSLA {
	var own, byPeer []Record
	for i := range r.Records {
		f := &r.Records[i]
		if f.Origin != k {
			continue
		}
		own = append(own, f.Record)
		if f.Exec != k && f.Decision.Reason == plan.ReasonOverbooked {
			byPeer = append(byPeer, f.Record)
		}
	}
	s := Settle(own, r.Sites[k].Procs)
	p := Settle(byPeer, r.Sites[k].Procs)
	return FedSLA{Accepted: s.Accepted, Rejected: s.Rejected, Overbooked: s.Overbooked, Met: s.Met, Violated: s.Violated,
		Fees: s.Fees, Penalties: s.Penalties, Gain: s.Gain, AcceptedByOverbookingPeer: p.Accepted, GainByOverbookingPeer: p.Gain}
}

// Delegations counts the jobs submitted at site k that ran elsewhere (out)
// and the jobs submitted elsewhere that ran at k (in).
func (r *FedResult) Delegations(k int) (out, in int) {
	for i := range r.Records {
		x := &r.Records[i]
		if x.Origin == k && x.Exec != k {
			out++
		}
		if x.Exec == k && x.Origin != k {
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
