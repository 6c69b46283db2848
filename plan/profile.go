package plan

import "math"

// Forever is the time that never comes: a deadline of Forever means no
// deadline. It is far from math.MaxInt64 so that Forever+duration never
// overflows.
const Forever int64 = math.MaxInt64 / 4

// Never is the time before everything: the key of a profile's first
// breakpoint.
const Never int64 = math.MinInt64 / 4

// Profile is the availability profile of a site: how many of its processors
// are free at every integer time. It is a step function stored as a treap of
// breakpoints keyed by time; each breakpoint holds the free count from its
// time up to the next breakpoint. Every node also carries the minimum and
// maximum free count of its subtree and a pending addition for its children
// (lazy propagation), so that adding a reservation, finding the first time at
// which at least (or fewer than) p processors are free, and therefore the
// earliest fit and the gap search, cost O(log n) per step instead of a scan of
// all reservations.
//
// A Profile is not safe for concurrent use. The zero value is not usable; use
// NewProfile.
type Profile struct {
	procs int
	nodes []tnode // nodes[0] is the nil node
	free  []int32 // recycled node indexes
	root  int32
	seed  uint64 // xorshift state for treap priorities; deterministic
	runs  runSums
	// version counts the calls of Add that changed something (Version).
	version uint64
}

type tnode struct {
	key         int64
	lo, hi      int64  // smallest and largest key of the subtree (keys never change under lazy additions)
	size        int32  // breakpoints in the subtree
	sumOK       uint64 // bit j: the run summary at level j (runs.go) is up to date
	slot        int32  // where the node's run summaries are kept; 0: none
	val, mn, mx int32  // val: free count from key to the next key; mn/mx over the subtree
	lz          int32  // pending addition for both children's subtrees
	prio        uint32
	left, right int32
}

// NewProfile returns the profile of a site with procs processors, all free
// at every time.
func NewProfile(procs int) *Profile {
	p := &Profile{procs: procs, nodes: make([]tnode, 1, 64), seed: 0x9E3779B97F4A7C15}
	p.runs.init(procs)
	p.root = p.newNode(Never, int32(procs))
	return p
}

// Procs is the number of processors of the site.
func (p *Profile) Procs() int { return p.procs }

// Len is the number of breakpoints, including the initial one at Never.
func (p *Profile) Len() int { return len(p.nodes) - 1 - len(p.free) }

func (p *Profile) rand() uint32 {
	p.seed ^= p.seed << 13
	p.seed ^= p.seed >> 7
	p.seed ^= p.seed << 17
	return uint32(p.seed >> 32)
}

func (p *Profile) newNode(key int64, val int32) int32 {
	n := tnode{key: key, lo: key, hi: key, size: 1, val: val, mn: val, mx: val, prio: p.rand()}
	if k := len(p.free); k > 0 {
		i := p.free[k-1]
		p.free = p.free[:k-1]
		p.nodes[i] = n
		return i
	}
	p.nodes = append(p.nodes, n)
	return int32(len(p.nodes) - 1)
}

func (p *Profile) apply(i, d int32) {
	if i == 0 {
		return
	}
	n := &p.nodes[i]
	n.val += d
	n.mn += d
	n.mx += d
	n.lz += d
}

func (p *Profile) push(i int32) {
	// Small enough to inline: most nodes have nothing pending.
	if p.nodes[i].lz != 0 {
		p.pushLazy(i)
	}
}

func (p *Profile) pushLazy(i int32) {
	n := &p.nodes[i]
	p.apply(n.left, n.lz)
	p.apply(n.right, n.lz)
	n.lz = 0
}

func (p *Profile) pull(i int32) {
	// Locals, not fields: written through n the compiler would store and
	// reload each field around every read of a child.
	nodes := p.nodes
	n := &nodes[i]
	mn, mx, lo, hi, size := n.val, n.val, n.key, n.key, int32(1)
	if l := n.left; l != 0 {
		c := &nodes[l]
		mn, mx, lo, size = min(mn, c.mn), max(mx, c.mx), c.lo, size+c.size
	}
	if r := n.right; r != 0 {
		c := &nodes[r]
		mn, mx, hi, size = min(mn, c.mn), max(mx, c.mx), c.hi, size+c.size
	}
	n.mn, n.mx, n.lo, n.hi, n.size, n.sumOK = mn, mx, lo, hi, size, 0
}

// split cuts the treap at key: keys < key go left, keys >= key go right.
func (p *Profile) split(i int32, key int64) (int32, int32) {
	if i == 0 {
		return 0, 0
	}
	p.push(i)
	if p.nodes[i].key < key {
		l, r := p.split(p.nodes[i].right, key)
		p.nodes[i].right = l
		p.pull(i)
		return i, r
	}
	l, r := p.split(p.nodes[i].left, key)
	p.nodes[i].left = r
	p.pull(i)
	return l, i
}

// merge joins two treaps where every key of a is below every key of b.
func (p *Profile) merge(a, b int32) int32 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	if p.nodes[a].prio > p.nodes[b].prio {
		p.push(a)
		p.nodes[a].right = p.merge(p.nodes[a].right, b)
		p.pull(a)
		return a
	}
	p.push(b)
	p.nodes[b].left = p.merge(a, p.nodes[b].left)
	p.pull(b)
	return b
}

// floor returns the node with the largest key <= t and its true value.
func (p *Profile) floor(t int64) (int32, int32) {
	var best, bestVal, acc int32
	i := p.root
	for i != 0 {
		n := &p.nodes[i]
		if n.key <= t {
			best, bestVal = i, n.val+acc
			acc += n.lz
			i = n.right
		} else {
			acc += n.lz
			i = n.left
		}
	}
	return best, bestVal
}

// floorAt returns the free count at t and just before t (at t-1), and
// whether t is a breakpoint, in one walk: the search paths of t and t-1
// part only at the node of key t, below which t-1's floor is the last node
// of its left subtree. With no breakpoint before t, before is meaningless.
func (p *Profile) floorAt(t int64) (has bool, at, before int32) {
	var acc int32
	for i := p.root; i != 0; {
		n := &p.nodes[i]
		switch {
		case n.key < t:
			at = n.val + acc
			before = at
			acc += n.lz
			i = n.right
		case n.key > t:
			acc += n.lz
			i = n.left
		default:
			at = n.val + acc
			acc += n.lz
			for i = n.left; i != 0; i = p.nodes[i].right {
				before = p.nodes[i].val + acc
				acc += p.nodes[i].lz
			}
			return true, at, before
		}
	}
	return false, at, before
}

// Free returns the number of processors free at time t.
func (p *Profile) Free(t int64) int {
	_, v := p.floor(t)
	return int(v)
}

// FreeSpan returns the number of processors free at time t and the time of
// the next breakpoint after t (Forever if none): until the profile changes
// (Version), Free is the same over [t, until). One walk, as Free.
func (p *Profile) FreeSpan(t int64) (free int, until int64) {
	until = Forever
	var val, acc int32
	for i := p.root; i != 0; {
		n := &p.nodes[i]
		if n.key <= t {
			val = n.val + acc
			acc += n.lz
			i = n.right
		} else {
			until = n.key
			acc += n.lz
			i = n.left
		}
	}
	return int(val), until
}

// Version changes whenever the free count changes anywhere: two reads
// under the same Version see the same profile.
func (p *Profile) Version() uint64 { return p.version }

// firstAfter returns the smallest breakpoint key > t whose free count is
// >= q (atLeast) or < q (!atLeast), or Forever if there is none.
func (p *Profile) firstAfter(t int64, q int32, atLeast bool) int64 {
	return p.findAfter(p.root, 0, t, q, atLeast)
}

func (p *Profile) findAfter(i, acc int32, t int64, q int32, atLeast bool) int64 {
	for i != 0 {
		n := &p.nodes[i]
		if atLeast && n.mx+acc < q || !atLeast && n.mn+acc >= q {
			return Forever
		}
		if n.key <= t {
			acc += n.lz
			i = n.right
			continue
		}
		if r := p.findAfter(n.left, acc+n.lz, t, q, atLeast); r != Forever {
			return r
		}
		if v := n.val + acc; atLeast && v >= q || !atLeast && v < q {
			return n.key
		}
		acc += n.lz
		i = n.right
	}
	return Forever
}

// lastBelowBefore returns the largest breakpoint key < t whose free count
// is < q, or Never if there is none.
func (p *Profile) lastBelowBefore(t int64, q int32) int64 {
	return p.findBefore(p.root, 0, t, q)
}

func (p *Profile) findBefore(i, acc int32, t int64, q int32) int64 {
	for i != 0 {
		n := &p.nodes[i]
		if n.mn+acc >= q {
			return Never
		}
		if n.key >= t {
			acc += n.lz
			i = n.left
			continue
		}
		if r := p.findBefore(n.right, acc+n.lz, t, q); r != Never {
			return r
		}
		if n.val+acc < q {
			return n.key
		}
		acc += n.lz
		i = n.left
	}
	return Never
}

// Add adds delta free processors over [start, end): negative to reserve,
// positive to release. It does not check capacity; Plan does.
//
// The boundaries are settled first, from the counts before the change: a
// missing breakpoint at start or end is inserted (insert), and an existing
// one that the change makes redundant (the count on both sides of it
// becomes equal) is marked for removal. A new boundary is never redundant:
// its count equals its predecessor's, and the change moves one side only.
// Then one descent (addRange) shifts the steps in [start, end) and drops the
// marked breakpoints, visiting only the nodes whose subtrees straddle a
// boundary. Cutting the treap at both ends and joining it again, as Add
// once did, touched about twice as many nodes.
func (p *Profile) Add(start, end int64, delta int) {
	if start >= end || delta == 0 {
		return
	}
	p.version++
	d := int32(delta)
	hasS, vs, ps := p.floorAt(start)
	hasE, ve, pe := p.floorAt(end)
	// A boundary the treap has is redundant after the change when the
	// count just before it equals the count from it on.
	op := addOp{s: start, e: end, ts: start - 1, te: end - 1, d: d, delS: hasS && start > Never && ps == vs+d, delE: hasE && pe+d == ve}
	if op.delS {
		op.ts = start
	}
	if op.delE {
		op.te = end
	}
	if !hasS {
		p.insert(start, vs)
	}
	if !hasE {
		p.insert(end, ve)
	}
	p.root = p.addRange(p.root, &op)
}

// addOp is the work of one Add: shift the steps in [s, e) by d, and remove
// the breakpoint at s (delS) or at e (delE). A subtree must be visited when
// it has keys on both sides of s (lo <= s-1 < s <= hi) or of e, or holds a
// breakpoint to remove (lo <= s <= hi): with ts = s-1, or s when s goes,
// and te likewise, both are lo <= ts && s <= hi (or te, e).
type addOp struct {
	s, e       int64
	ts, te     int64
	d          int32
	delS, delE bool
}

// insert adds a breakpoint at key, which the treap does not have, with
// free count v. The new node takes its place by priority: the walk goes
// down key's search path while the nodes there outrank it, telling each
// that its subtree gains the key (no child need be read), then cuts the
// subtree below in two to be the new node's children.
func (p *Profile) insert(key int64, v int32) {
	x := p.newNode(key, v) // may move p.nodes: no pointers into it before
	prio := p.nodes[x].prio
	link := &p.root
	for i := p.root; i != 0 && p.nodes[i].prio > prio; i = *link {
		p.push(i)
		n := &p.nodes[i]
		n.size++
		n.lo, n.hi = min(n.lo, key), max(n.hi, key)
		n.mn, n.mx = min(n.mn, v), max(n.mx, v)
		n.sumOK = 0
		if key < n.key {
			link = &n.left
		} else {
			link = &n.right
		}
	}
	l, r := p.split(*link, key)
	p.nodes[x].left, p.nodes[x].right = l, r
	p.pull(x)
	*link = x
}

// addRange applies op to subtree i (nothing pending above it) and returns
// the subtree's new root. A subtree wholly inside [s, e) is shifted lazily,
// one wholly outside is left alone, unless it holds a breakpoint to remove.
func (p *Profile) addRange(i int32, op *addOp) int32 {
	n := &p.nodes[i] // addRange allocates no node: n stays valid
	if !(n.lo <= op.ts && op.s <= n.hi || n.lo <= op.te && op.e <= n.hi) {
		if op.s <= n.lo && n.hi < op.e {
			p.apply(i, op.d)
		}
		return i
	}
	p.push(i)
	l, r := n.left, n.right
	if l != 0 {
		l = p.addRange(l, op)
	}
	if r != 0 {
		r = p.addRange(r, op)
	}
	if n.key == op.s && op.delS || n.key == op.e && op.delE {
		p.releaseSlot(i)
		p.free = append(p.free, i)
		return p.merge(l, r)
	}
	if op.s <= n.key && n.key < op.e {
		n.val += op.d
	}
	n.left, n.right = l, r
	p.pull(i)
	return i
}

// MinFree returns the smallest number of free processors over [start, end).
func (p *Profile) MinFree(start, end int64) int {
	_, v := p.floor(start)
	m := v
	for t := start; ; {
		// Walk down only through steps that lower the minimum: each step is a
		// search for the first breakpoint below the current minimum.
		k := p.firstAfter(t, m, false)
		if k >= end {
			return int(m)
		}
		_, v := p.floor(k)
		m, t = v, k
	}
}

// Fits reports whether procs processors are free throughout [start, end).
func (p *Profile) Fits(procs int, start, end int64) bool {
	if p.Free(start) < procs {
		return false
	}
	return p.fitsFrom(int32(procs), start, end)
}

// fitsFrom is Fits for a caller that knows at least procs are free at
// start: only the breakpoints after start need looking at.
func (p *Profile) fitsFrom(procs int32, start, end int64) bool {
	return p.firstAfter(start, procs, false) >= end
}

// EarliestFit returns the earliest start s >= onOrAfter such that procs
// processors are free throughout [s, s+duration) and s+duration <= deadline.
// ok is false when no such start exists.
//
// It is one in-order walk of the breakpoints after onOrAfter that tracks the
// current run of steps with at least procs free and stops at the first run
// that lasts duration. Whole subtrees are stepped over without being visited
// when all their steps are short of procs (the run ends at their first key),
// all have enough (the run goes on through them), or, on a saturated plan,
// their run summaries (runs.go) show that no run inside them lasts duration.
// The cost is therefore set by the subtrees that might hold the answer, not
// by the number of short gaps before it.
func (p *Profile) EarliestFit(procs int, duration, onOrAfter, deadline int64) (start int64, ok bool) {
	if procs > p.procs || duration <= 0 {
		return 0, false
	}
	f := fitWalk{p: p, q: int32(procs), d: duration, after: onOrAfter, run: Forever, last: deadline - duration}
	if onOrAfter > f.last {
		return 0, false
	}
	if _, v := p.floor(onOrAfter); v >= f.q {
		f.run = onOrAfter
	}
	if !f.walk(p.root, 0) {
		// The last step lasts for ever; a run still open there fits.
		f.resolve()
		f.found = f.run != Forever
	}
	if !f.found || f.run > f.last {
		return 0, false
	}
	return f.run, true
}

// fitWalk is the state of EarliestFit's walk: run is the start of the
// current run of steps with at least q free (Forever when the last step
// seen had fewer), last the latest start that still meets the deadline.
// When the run began inside a subtree the walk stepped over, run is only a
// lower bound and lazy that subtree (its pending addition lazyAcc): the
// exact start costs a descent, paid only when the run might be long enough.
// lazyNext is the first key after that subtree (Forever: none seen yet),
// where the run begins if the subtree's last step is short.
type fitWalk struct {
	p             *Profile
	q             int32
	lazy, lazyAcc int32
	lazyNext      int64
	d, after      int64
	run, last     int64
	found, fail   bool
}

// resolve makes run exact.
func (f *fitWalk) resolve() {
	if f.lazy != 0 {
		f.run = f.p.afterLastBelow(f.lazy, f.lazyAcc, f.q, f.lazyNext)
		f.lazy = 0
	}
}

// lasts reports whether the current run, if it goes on up to end, lasts d.
func (f *fitWalk) lasts(end int64) bool {
	if f.run == Forever || end-f.run < f.d {
		return false
	}
	f.resolve()
	return f.run != Forever && end-f.run >= f.d
}

// step handles a breakpoint at key (or a skipped subtree starting at key
// whose steps are all good or all short) and reports whether the walk is
// over.
func (f *fitWalk) step(key int64, good bool) bool {
	if f.lasts(key) {
		f.found = true
		return true
	}
	if !good {
		f.run, f.lazy = Forever, 0
		return false
	}
	if f.lazy != 0 && f.lazyNext == Forever {
		f.lazyNext = key
	}
	if f.run == Forever {
		if key > f.last {
			f.fail = true
			return true
		}
		f.run = key
	}
	return false
}

// walk visits, in order, the breakpoints of subtree i (lazy addition acc
// pending from above) with keys after f.after, and reports whether the walk
// is over (found or failed).
func (f *fitWalk) walk(i, acc int32) bool {
	for i != 0 {
		n := &f.p.nodes[i]
		if n.lo > f.after {
			// The whole subtree lies after the start: skip it if uniform.
			if n.mx+acc < f.q {
				return f.step(n.lo, false)
			}
			if n.mn+acc >= f.q {
				return f.step(n.lo, true)
			}
			if n.size >= f.p.runs.minSize {
				if rs, ok := f.p.runs.bound(f.p, i, f.q-(n.mn+acc)); ok && rs.long < f.d {
					return f.skip(i, acc, rs)
				}
			}
		}
		if n.key <= f.after {
			acc += n.lz
			i = n.right
			continue
		}
		if f.walk(n.left, acc+n.lz) {
			return true
		}
		if f.step(n.key, n.val+acc >= f.q) {
			return true
		}
		acc += n.lz
		i = n.right
	}
	return false
}

// skip steps over subtree i, which has both short and good steps and no
// run inside that lasts d (rs bounds its runs at q). Only the run coming in,
// up to the first short step, and the one going out, from after the last
// short step, matter.
func (f *fitWalk) skip(i, acc int32, rs runSum) bool {
	if f.run != Forever && rs.pre-f.run >= f.d {
		if f.lasts(f.p.firstBelow(i, acc, f.q)) {
			f.found = true
			return true
		}
	}
	f.run, f.lazy = Forever, 0
	if rs.suf == Forever {
		return false // the subtree ends short even at the lower level
	}
	f.run, f.lazy, f.lazyAcc, f.lazyNext = rs.suf, i, acc, Forever
	if f.last < Forever/2 {
		// A deadline: know the exact start to test it.
		f.resolve()
		if f.run != Forever && f.run > f.last {
			f.fail = true
			return true
		}
	}
	return false
}

// Gap is a maximal interval [Start, End) of a window during which at least
// the asked number of processors is free.
type Gap struct {
	Start, End int64
}

// Len is the length of the gap in seconds.
func (g Gap) Len() int64 { return g.End - g.Start }

// Gaps appends to dst every maximal gap inside [from, to) in which at least
// procs processors are free, in time order, and returns the extended slice.
// A gap is clipped to the window: one that goes on past to ends at to.
func (p *Profile) Gaps(dst []Gap, procs int, from, to int64) []Gap {
	if procs > p.procs || from >= to {
		return dst
	}
	q := int32(procs)
	s := from
	if _, v := p.floor(s); v < q {
		s = p.firstAfter(s, q, true)
	}
	for s < to {
		k := p.firstAfter(s, q, false)
		dst = append(dst, Gap{Start: s, End: min(k, to)})
		if k >= to {
			break
		}
		s = p.firstAfter(k, q, true)
	}
	return dst
}

// Step is one breakpoint of a profile: from At on, Free processors are free
// (until the next step).
type Step struct {
	At   int64
	Free int
}

// Steps returns the breakpoints with At in [from, to), preceded by the step
// in force at from. It is meant for inspection, tests and explanations, not
// for hot paths.
func (p *Profile) Steps(from, to int64) []Step {
	out := []Step{{At: from, Free: p.Free(from)}}
	p.walk(p.root, 0, func(key int64, v int32) {
		if key > from && key < to {
			out = append(out, Step{At: key, Free: int(v)})
		}
	})
	return out
}

func (p *Profile) walk(i, acc int32, f func(int64, int32)) {
	if i == 0 {
		return
	}
	n := &p.nodes[i]
	p.walk(n.left, acc+n.lz, f)
	f(n.key, n.val+acc)
	p.walk(n.right, acc+n.lz, f)
}

// FreeArea returns the processor-seconds free over [start, end): the
// integral of Free. It walks only the breakpoints inside the window.
func (p *Profile) FreeArea(start, end int64) int64 {
	if end <= start {
		return 0
	}
	at, free := start, int64(p.Free(start))
	var area int64
	p.walkRange(p.root, 0, start, end, func(key int64, v int32) {
		area += free * (key - at)
		at, free = key, int64(v)
	})
	return area + free*(end-at)
}

// walkRange is walk restricted to the keys in (from, to), in order.
func (p *Profile) walkRange(i, acc int32, from, to int64, f func(int64, int32)) {
	if i == 0 {
		return
	}
	n := &p.nodes[i]
	if n.hi <= from || n.lo >= to {
		return
	}
	p.walkRange(n.left, acc+n.lz, from, to, f)
	if n.key > from && n.key < to {
		f(n.key, n.val+acc)
	}
	p.walkRange(n.right, acc+n.lz, from, to, f)
}
