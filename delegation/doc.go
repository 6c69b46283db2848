// Package delegation is the DGSI-style delegation protocol of the
// federation, in terms of the core's messages rather than of a transport:
// quotes, agreements and their states, provenance routes, and the policies
// that decide when to delegate (transfer), to whom (location), which offer
// to take, and what a peer charges and accepts.
//
// # Basics
//
// A site that cannot (or, under ACF, should not) take a job asks a bounded
// number of peers for a Quote. Each peer runs its own admission test and
// answers with an offer backed by a tentative hold, or a refusal. The origin
// takes the Best offer (highest expected profit: fee − price − PoF ×
// penalty, ties to the earliest end), agrees to it, and releases the other
// holds. The Agreement then follows the WS-Agreement states of Next:
// PENDING → OBSERVED → COMPLETE, or REJECTED (released, expired), or
// TERMINATED (cancelled), through the …ANDTERMINATING states.
//
// Rank is the location policy: gossip digests (a hint) filter and order the
// candidates together with what past delegations to each peer achieved
// (History), with seeded jitter against herding. ShouldDelegate is the
// transfer policy. Free and LibraPlus are price models; CommunityShare is a
// peer's rule for keeping capacity for its own users.
//
// # Caveats
//
// Gossip is a hint and a quote is a promise: nothing here delegates on a
// digest alone. The package keeps no state; the node stores agreements and
// routes, and the simulator keeps them in memory.
package delegation
