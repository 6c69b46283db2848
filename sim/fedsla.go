package sim

import "github.com/fedsched/fedsched/plan"

// FedSLA is the SLA outcome at one site of a federated replay, counted as
// a node counts it: accepted, overbooked, met, violated and the gain (fees
// of met SLAs minus penalties of violated ones) over the jobs the site ran
// (its own and those delegated in); rejected over the jobs submitted there
// that no site took.
type FedSLA struct {
	Accepted, Rejected, Overbooked, Met, Violated int
	Fees, Penalties, Gain                         float64
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

// SLA settles the jobs of site k (overbook.Settle decides met or violated,
// as in the single-site experiments).
func (r *FedResult) SLA(k int) FedSLA {
	var ran, byPeer []Record
	rejected, failed := 0, 0
	for i := range r.Records {
		f := &r.Records[i]
		switch {
		case f.Origin == k && !f.Decision.OK():
			rejected++
		case f.Exec == k && f.Decision.OK():
			ran = append(ran, f.Record)
			if f.NodeFailed {
				failed++
			}
		}
		if f.Origin == k && f.Exec != k && f.Decision.Reason == plan.ReasonOverbooked {
			byPeer = append(byPeer, f.Record)
		}
	}
	s := Settle(ran, r.Sites[k].Procs)
	p := Settle(byPeer, r.Sites[k].Procs)
	return FedSLA{Accepted: s.Accepted, Rejected: rejected, Overbooked: s.Overbooked, Met: s.Met, Violated: s.Violated,
		Fees: s.Fees, Penalties: s.Penalties, Gain: s.Gain, AcceptedByOverbookingPeer: p.Accepted, GainByOverbookingPeer: p.Gain,
		Failed: failed, FailureViolations: s.FailureViolations}
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
