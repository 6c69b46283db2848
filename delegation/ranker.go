package delegation

import (
	"math/bits"
	"slices"
)

// Ranker is Rounds for one origin site that ranks much the same peers, in
// much the same order, offer after offer (the site agent). It returns what
// Rounds returns for the same arguments and the jitter stream
// rand.New(rand.NewPCG(seed, stream)), but it keeps, by the candidate's
// position in the list (checked against its name), the peer's history and
// whether it is the site itself or a preferred peer, instead of looking
// them up by name on every offer; and it draws from the PCG stream in
// place, computing only the draws of the peers that may still make the
// top (the others' take their turn of the stream all the same).
//
// The history belongs to the Ranker: change it with SetHistory only.
type Ranker struct {
	self   string
	prefer []string
	cfg    LocationConfig
	hist   map[string]History
	// hs is hist again, one History per peer in the order the peers were
	// first seen (ids), updated in place: what the slots read.
	hs    []History
	ids   map[string]int32
	slots []rankSlot
	// pos is where a slot was last made for a peer; dup: a name was seen
	// at two positions, so a peer new to the history may be in more than
	// one slot, and every slot is checked again (gen).
	pos map[string]int
	dup bool
	gen uint64
}

// rankSlot is what the Ranker keeps of the candidate at one position.
type rankSlot struct {
	site     string
	excluded bool  // the site itself or a preferred peer
	hid      int32 // the peer's history is hs[hid−1]; 0: none (as of gen)
	gen      uint64
}

// NewRanker returns the Ranker of site self, with its preferred peers (asked
// one at a time first, as Rounds does) and location settings, and no
// history.
func NewRanker(self string, prefer []string, cfg LocationConfig) *Ranker {
	return &Ranker{self: self, prefer: slices.Clone(prefer), cfg: cfg,
		hist: make(map[string]History), ids: make(map[string]int32), pos: make(map[string]int),
		gen: 1} // a slot never made (gen 0) is never kept
}

// History is what delegations to each peer achieved, as the origin saw it.
// Callers must not change it (SetHistory does).
func (r *Ranker) History() map[string]History { return r.hist }

// SetHistory records the history of peer.
func (r *Ranker) SetHistory(peer string, h History) {
	r.hist[peer] = h
	if id, ok := r.ids[peer]; ok {
		r.hs[id] = h
		return
	}
	r.hs = append(r.hs, h)
	hid := int32(len(r.hs))
	r.ids[peer] = hid - 1
	// The slots that hold the peer with no history yet.
	if r.dup {
		r.gen++
	} else if i, ok := r.pos[peer]; ok && i < len(r.slots) && r.slots[i].site == peer {
		r.slots[i].hid = hid
	}
}

// remake makes the slot at position i (< len(r.slots)) for site, when
// the slot there names another peer or, naming a peer with no history, was
// made before a peer was added (gen): ranking keeps the others.
func (r *Ranker) remake(i int, site string) *rankSlot {
	sl := &r.slots[i]
	if j, ok := r.pos[site]; ok && j != i && j < len(r.slots) && r.slots[j].site == site {
		r.dup = true
	}
	*sl = rankSlot{site: site, excluded: site == r.self || slices.Contains(r.prefer, site), gen: r.gen}
	if id, ok := r.ids[site]; ok {
		sl.hid = id + 1
	}
	r.pos[site] = i
	return sl
}

// Rounds is Rounds(cands, prefer, self, procs, route, r.History(), cfg,
// rand.New(rand.NewPCG(seed, stream))) for the Ranker's self, prefer and
// cfg.
func (r *Ranker) Rounds(cands []Candidate, procs int, route Route, seed, stream uint64) [][]Candidate {
	if n := len(cands) - len(r.slots); n > 0 {
		r.slots = append(r.slots, make([]rankSlot, n)...) // gen 0: made at first use
	}
	k := ranking{procs: procs, route: route, cfg: r.cfg, r: r, p: pcg{hi: seed, lo: stream}}
	return appendPreferred(cands, r.prefer, r.self, procs, route, k.rank(cands))
}

// pcg is math/rand/v2's PCG (PCG-DXSM: a 128-bit LCG, state hi:lo, with
// the DXSM output) and rand.Rand's Float64 on it, called in place:
// rand.New(rand.NewPCG(hi, lo)) draws the same numbers
// (TestPCGIsRandPCG).
type pcg struct{ hi, lo uint64 }

// next steps the state, as PCG.next.
func (p *pcg) next() (hi, lo uint64) {
	const (
		mulHi = 2549297995355413924
		mulLo = 4865540595714422341
		incHi = 6364136223846793005
		incLo = 1442695040888963407
	)
	hi, lo = bits.Mul64(p.lo, mulLo)
	hi += p.hi*mulLo + p.lo*mulHi
	lo, c := bits.Add64(lo, incLo, 0)
	hi, _ = bits.Add64(hi, incHi, c)
	p.lo, p.hi = lo, hi
	return hi, lo
}

// uint64 is PCG.Uint64.
func (p *pcg) uint64() uint64 {
	hi, lo := p.next()
	const cheapMul = 0xda942042e4dd58b5
	hi ^= hi >> 32
	hi *= cheapMul
	hi ^= hi >> 48
	hi *= (lo | 1)
	return hi
}

// float64 is rand.Rand.Float64.
func (p *pcg) float64() float64 {
	return float64(p.uint64()<<11>>11) * (1.0 / (1 << 53)) // exact, as the division
}
