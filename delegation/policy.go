package delegation

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Quote is a peer's binding-for-a-while offer to run a job, backed by a
// tentative hold in its plan. Times are Unix seconds (or replay seconds in
// the simulator).
type Quote struct {
	Site    string  `json:"site"`
	HoldID  string  `json:"hold_id"`
	Start   int64   `json:"start"`
	End     int64   `json:"end"`
	PoF     float64 `json:"pof"`
	Price   float64 `json:"price"`
	Expires int64   `json:"expires"`
}

// Profit is the origin's expected profit if the peer runs a job with the
// given fee and penalty: fee − price − PoF × penalty.
func (q Quote) Profit(fee, penalty float64) float64 {
	return fee - q.Price - q.PoF*penalty
}

// StartingAt is a quote for a job to start now (ACF) as the asking site
// compares it: starting at the asker's now, for as long as the peer
// offered. Peers read their clocks a moment apart, and a second boundary
// between two answers must not decide which of them wins.
func (q Quote) StartingAt(now int64) Quote {
	q.End, q.Start = now+q.End-q.Start, now
	return q
}

// Best returns the index of the quote with the highest expected profit for
// the origin, ties broken by the earliest end and then by position: callers
// pass quotes in the location policy's rank order, so the better-ranked
// peer wins a tie, never the alphabetically first (under ACF every quote
// ties on profit and end). It returns -1 if quotes is empty. Expired quotes
// (Expires <= now) are skipped.
func Best(quotes []Quote, fee, penalty float64, now int64) int {
	best := -1
	for i, q := range quotes {
		if q.Expires <= now {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := quotes[best]
		pq, pb := q.Profit(fee, penalty), b.Profit(fee, penalty)
		switch {
		case pq > pb+1e-9:
			best = i
		case math.Abs(pq-pb) <= 1e-9 && q.End < b.End:
			best = i
		}
	}
	return best
}

// Candidate is a peer the location policy may ask for a quote: what gossip
// says about it, which is a hint and never a promise.
type Candidate struct {
	Site    string
	Addr    string
	Procs   int
	FreeNow int
	Free1h  int
	Free4h  int
	Free24h int
}

// CoarseFree is a count of free processors as gossip carries it: rounded
// down to a sixteenth of the site's procs (to a processor on small sites),
// so that small changes do not flood the federation. The node's digest and
// the simulator's membership view both apply it, so that the two drivers'
// location policies rank peers by the same figures.
func CoarseFree(free, procs int) int {
	q := max(1, procs/16)
	return free / q * q
}

// History is what past delegations to a peer achieved, the origin's own
// observation (the digest's AWRT_{k,l} idea): no peer discloses it.
type History struct {
	// Jobs is the number of delegated jobs that finished at the peer.
	Jobs int
	// MeanResponseRatio is the mean of (end − submit) / estimate over
	// them, exponentially weighted; lower is better.
	MeanResponseRatio float64
	// Failures counts quotes or agreements that failed (unreachable,
	// refused at agree, violated).
	Failures int
	// Area and AreaResponse are Σ SA_j and Σ SA_j·(C_j − r_j) over the
	// delegated jobs that finished at the peer (SA_j = m_j·p_j): the
	// study's AWRT_{k,l} (Eq. 6.9), which EFS's location policy ranks by.
	Area, AreaResponse float64
}

// ObserveArea folds one finished delegated job of procs processors that
// ran ran seconds and responded in response seconds (end − submission)
// into AWRT_{k,l}.
func (h *History) ObserveArea(procs int, ran, response int64) {
	sa := float64(procs) * float64(ran)
	h.Area += sa
	h.AreaResponse += sa * float64(response)
}

// AWRT is the squashed-area-weighted response time of the delegated jobs
// observed so far; false before any job with a positive area.
func (h History) AWRT() (float64, bool) {
	if h.Area <= 0 {
		return 0, false
	}
	return h.AreaResponse / h.Area, true
}

// Observe folds one finished delegated job into the history.
func (h *History) Observe(responseRatio float64) {
	const w = 0.2
	if h.Jobs == 0 {
		h.MeanResponseRatio = responseRatio
	} else {
		h.MeanResponseRatio = (1-w)*h.MeanResponseRatio + w*responseRatio
	}
	h.Jobs++
}

// LocationConfig configures Rank.
type LocationConfig struct {
	// MaxCandidates bounds how many peers are asked for quotes in
	// parallel. 0 means 3.
	MaxCandidates int
	// Jitter is the spread, as a fraction of the score, added at random
	// so that many sites do not herd onto the same peer. 0 means 0.1;
	// negative means none.
	Jitter float64
}

// EffectiveMaxCandidates is how many peers are asked: MaxCandidates, or
// its default when unset.
func (c LocationConfig) EffectiveMaxCandidates() int { return c.maxCandidates() }

func (c LocationConfig) maxCandidates() int {
	if c.MaxCandidates <= 0 {
		return 3
	}
	return c.MaxCandidates
}

// Rank is the location policy: it filters candidates that cannot run a job
// of procs processors at all, or that are on the job's route already, and
// orders the rest, best first, by a score: the free-capacity outlook the
// peer gossips (a hint) weighed against what delegations to it actually
// achieved (the origin's own history), with seeded jitter. It returns at
// most MaxCandidates. rng must not be nil; derive its seed from the job so
// that a decision can be replayed.
func Rank(cands []Candidate, procs int, route Route, hist map[string]History, cfg LocationConfig, rng *rand.Rand) []Candidate {
	k := ranking{procs: procs, route: route, cfg: cfg, hist: hist, rng: rng}
	return k.rank(cands)
}

// exclusion is the candidates Rounds leaves out of the ranking: the site
// itself and its preferred peers (asked in rounds of their own).
type exclusion struct {
	on     bool
	self   string
	prefer []string
}

func (x exclusion) has(site string) bool {
	return x.on && (site == x.self || slices.Contains(x.prefer, site))
}

// outlookFrac is the share of a job's procs processors that free covers,
// at most 1.
func outlookFrac(free, procs int) float64 {
	if free >= procs && procs > 0 {
		return 1 // no division: the quotient is at least 1
	}
	f := float64(free) / float64(procs)
	if f >= 1 { // math.Min(1, f), NaN included, without its call
		return 1
	}
	return f
}

// withHistory is score s with what the history h of the peer adds (nil:
// the origin has none): up to 1 for a peer whose delegated jobs finished
// within their estimate, less for slower ones, a quarter off per failure
// (at most four), and 0.5 for a peer not known yet (a fair chance). It
// adds at most 1 whatever h.
func withHistory(s float64, h *History) float64 {
	if h == nil {
		return s + 0.5
	}
	if r := h.MeanResponseRatio; h.Jobs > 0 && r > 0 {
		s += 1 / max1(r)
	}
	return s - 0.25*float64(min(h.Failures, 4))
}

// max1 is math.Max(1, r) for r > 0 (+Inf included), without its call.
func max1(r float64) float64 {
	if r < 1 {
		return 1
	}
	return r
}

// outlook is the share of a job's procs processors the candidate has free
// soon, now counting most.
func outlook(c *Candidate, procs int) float64 {
	return 0.4*outlookFrac(c.FreeNow, procs) + 0.3*outlookFrac(c.Free1h, procs) + 0.2*outlookFrac(c.Free4h, procs) + 0.1*outlookFrac(c.Free24h, procs)
}

// ranking is one call of the location policy. The history is read by name
// (hist), or, with a Ranker (r), by the candidate's position; the jitter
// is drawn from rng, or, when rng is nil, from the PCG stream p in place.
type ranking struct {
	procs int
	route Route
	cfg   LocationConfig
	hist  map[string]History
	x     exclusion
	r     *Ranker
	rng   *rand.Rand
	p     pcg
}

// scored is a candidate kept, with its score.
type scored struct {
	c     Candidate
	score float64
}

// keep keeps c with score s among the best n candidates, top, in order, as
// the candidates go by (a federation of hundreds of sites asks a few of
// them, and sorting all of them on every offer cost more than the rest of
// the decision): if it beats the last one kept, after every kept candidate
// that is not worse (a stable order, as a stable sort of all of them
// would give). top has room for n (a slice in, a slice out: the caller's
// few stay on its stack).
func keep(top []scored, n int, c *Candidate, s float64) []scored {
	if len(top) == n && !beats(s, c.Site, &top[n-1]) {
		return top
	}
	i := len(top)
	if i == n {
		i--
	} else {
		top = top[:i+1]
	}
	for ; i > 0 && beats(s, c.Site, &top[i-1]); i-- {
		top[i] = top[i-1]
	}
	top[i] = scored{*c, s}
	return top
}

// beats orders the kept: the higher score first, then the site's name.
func beats(score float64, site string, b *scored) bool {
	if score != b.score {
		return score > b.score
	}
	return site < b.c.Site
}

// rank is Rank over the candidates the exclusion (x, or the Ranker's)
// does not leave out, in their order (as Rank of a copy without them,
// which Rounds need not make).
func (k *ranking) rank(cands []Candidate) []Candidate {
	procs := k.procs
	jit := k.cfg.Jitter
	if jit == 0 {
		jit = 0.1
	}
	// The route's sites but the site itself, when the exclusion leaves it
	// out already: a job submitted here has none to compare names with.
	visited := k.route
	if self, ok := k.self(); ok && slices.ContainsFunc(visited, func(h Hop) bool { return h.Site == self }) {
		var buf [4]Hop
		visited = buf[:0]
		for _, h := range k.route {
			if h.Site != self {
				visited = append(visited, h)
			}
		}
	}
	n := k.cfg.maxCandidates()
	var buf [4]scored // the usual few kept on the stack
	top := buf[:0]
	if n > len(buf) {
		top = make([]scored, 0, n)
	}
	if k.r != nil {
		return result(k.rankOwn(cands, visited, jit, n, top))
	}
	for i := range cands {
		c := &cands[i] // not a copy of every candidate
		if c.Procs < procs || k.x.has(c.Site) || len(visited) > 0 && visited.Visited(c.Site) {
			continue
		}
		s := outlook(c, procs)
		spread := 1.0
		if jit > 0 {
			spread = 1 + jit*(k.rng.Float64()-0.5)
		}
		// The history adds at most 1 (a count of failures only takes
		// away), so a peer that cannot beat the last one kept even so is
		// passed over without its history looked up: most of them, in a
		// large federation. (Rounding is monotone: the bound holds for
		// the computed score too.)
		if len(top) == n && spread > 0 && (s+1)*spread < top[n-1].score {
			continue
		}
		if h, ok := k.hist[c.Site]; ok {
			s = withHistory(s, &h)
		} else {
			s = withHistory(s, nil)
		}
		if jit > 0 {
			s *= spread
		}
		top = keep(top, n, c, s)
	}
	return result(top)
}

// result is the candidates kept, best first.
func result(top []scored) []Candidate {
	res := make([]Candidate, len(top))
	for i := range top {
		res[i] = top[i].c
	}
	return res
}

// rankOwn is rank's loop for a Ranker: the history and the exclusion are
// read by position, and a peer's draw is computed only if the peer may
// still make the top.
func (k *ranking) rankOwn(cands []Candidate, visited Route, jit float64, n int, top []scored) []scored {
	procs, r, p := k.procs, k.r, &k.p
	slots, hs, gen := r.slots, r.hs, r.gen
	// The outlook of a peer with the job's processors free at all four
	// times, computed as outlook computes it: most peers, in the grid.
	full := outlook(&Candidate{FreeNow: procs, Free1h: procs, Free4h: procs, Free24h: procs}, procs)
	// Bounds of the spread 1 + jit·(u − 0.5), u in [0, 1), as computed
	// (rounding is monotone).
	hiS, loS := 1.0, 1.0
	if jit > 0 {
		hiS, loS = 1+jit*0.5, 1+jit*-0.5
	}
	for i := range cands {
		c := &cands[i]
		if c.Procs < procs {
			continue
		}
		sl := &slots[i]
		if sl.site != c.Site || sl.hid == 0 && sl.gen != gen {
			sl = r.remake(i, c.Site)
		}
		if sl.excluded || len(visited) > 0 && visited.Visited(c.Site) {
			continue
		}
		var h *History
		if sl.hid != 0 {
			h = &hs[sl.hid-1]
		}
		o := full
		if c.FreeNow < procs || c.Free1h < procs || c.Free4h < procs || c.Free24h < procs || procs <= 0 {
			o = outlook(c, procs)
		}
		s := withHistory(o, h)
		if len(top) == n {
			// The score is s times the spread: a peer that cannot beat
			// the last one kept with the largest spread takes its draw
			// (every peer the filter keeps takes the next of the stream,
			// so that the others' stay the same) without computing it:
			// most of them, in a large federation.
			bound := s * hiS
			if s < 0 {
				bound = s * loS
			}
			if bound < top[n-1].score {
				if jit > 0 {
					p.next()
				}
				continue
			}
		}
		if jit > 0 {
			s *= 1 + jit*(p.float64()-0.5)
		}
		top = keep(top, n, c, s)
	}
	return top
}

// self is the site the exclusion leaves out, if any.
func (k *ranking) self() (string, bool) {
	if k.r != nil {
		return k.r.self, true
	}
	return k.x.self, k.x.on
}

// Rounds orders the peers a site asks for a job, one round after the
// other: each preferred peer (ordered spill-over: "our partner first, the
// others only when it cannot") alone, in the operator's order, if it has
// the processors and the job has not been there; then the location
// policy's ranking (Rank, at most MaxCandidates) of the others. self is
// never asked. The node and the site agent both order their rounds with
// it.
func Rounds(cands []Candidate, prefer []string, self string, procs int, route Route, hist map[string]History, cfg LocationConfig, rng *rand.Rand) [][]Candidate {
	k := ranking{procs: procs, route: route, cfg: cfg, hist: hist, x: exclusion{on: true, self: self, prefer: prefer}, rng: rng}
	return appendPreferred(cands, prefer, self, procs, route, k.rank(cands))
}

// appendPreferred is Rounds' rounds: each preferred peer alone, then the
// ranking of the others, if any.
func appendPreferred(cands []Candidate, prefer []string, self string, procs int, route Route, ranked []Candidate) [][]Candidate {
	var rounds [][]Candidate
	for _, p := range prefer {
		for _, c := range cands {
			if c.Site == p && p != self && c.Procs >= procs && !route.Visited(p) {
				rounds = append(rounds, []Candidate{c})
			}
		}
	}
	if len(ranked) > 0 {
		rounds = append(rounds, ranked)
	}
	return rounds
}

// TransferMode is the transfer policy: when a site tries to delegate.
type TransferMode int

const (
	// OnReject delegates a job only when local admission fails (the
	// default).
	OnReject TransferMode = iota
	// ACF (Accept Fitting, Grimme et al. 2008) also offers every job the
	// site's own policy would not start now; a peer takes it only if its
	// own policy would start it now (plan.Site.CanStartNow on both sides).
	ACF
	// RQF (Request Fitting) pulls: a site with processors its own queue
	// leaves idle asks peers for their waiting jobs and takes those its
	// own policy would start now. It discloses the queue to peers.
	RQF
	// EFS (the study's evolutionary fuzzy transfer policy, §6.2): a rule
	// base per partner decides from the site's own waiting parallelism and
	// the job's width whether a local job is offered to the partner the
	// location policy (RankAWRT) picked, and whether a partner's offer is
	// taken into the queue (RuleBase). Simulator only so far.
	EFS
)

var transferNames = [...]string{"on-reject", "acf", "rqf", "efs"}

func (m TransferMode) String() string {
	if m >= 0 && int(m) < len(transferNames) {
		return transferNames[m]
	}
	return fmt.Sprintf("TransferMode(%d)", int(m))
}

// ParseTransfer parses a transfer policy name as String writes it.
func ParseTransfer(name string) (TransferMode, error) {
	for i, n := range transferNames {
		if strings.EqualFold(name, n) {
			return TransferMode(i), nil
		}
	}
	return 0, fmt.Errorf("transfer policy %q: want one of %s: %w", name, strings.Join(transferNames[:], ", "), ErrInvalid)
}

// ShouldDelegate is the push transfer policy: whether a job is offered to
// peers at now, given whether local admission accepts it and whether the
// site's own policy would start it now. RQF never pushes.
func ShouldDelegate(mode TransferMode, accepted, startsNow bool) bool {
	switch mode {
	case OnReject:
		return !accepted
	case ACF:
		return !accepted || !startsNow
	}
	return false
}

// CommunityShare is the acceptance rule for remote work on top of the
// peer's own admission test: a site keeps Share of its processors for its
// own community, so a remote job is taken only if, over its slot, at least
// Share of the site stays free or local.
type CommunityShare struct {
	Share float64
}

// Allows reports whether a remote job of procs processors may take a slot
// where free processors are free (before the job), on a site of siteProcs.
func (c CommunityShare) Allows(procs, free, siteProcs int) bool {
	if c.Share <= 0 {
		return true
	}
	keep := int(math.Ceil(c.Share * float64(siteProcs)))
	return free-procs >= keep
}
