package plan

// Run summaries let EarliestFit step over a part of a saturated plan in one
// move: for every treap node and a few levels above the subtree's minimum
// free count, the longest run of consecutive steps at or above the level.
// If even at a level no higher than the query's the longest run is shorter
// than the duration asked for, no start inside the subtree can fit, and the
// walk only needs the run that enters the subtree and the one that leaves it
// (two O(log n) descents) instead of visiting every short gap inside.
//
// Levels are offsets above the subtree's minimum, so adding a constant to a
// whole subtree (the lazy additions of the profile) leaves its summaries
// valid. A summary is computed only when a query asks for it and kept until
// the node's subtree changes shape or content (pull clears sumOK), so plans
// too small to need it, and updates between queries, pay nothing.

// runSums holds the summaries of the nodes whose subtrees have at least
// minSize breakpoints (a few per cent of them): sums[s*len(levels)+j] is the
// summary at level mn+levels[j] of the node whose slot is s.
type runSums struct {
	freeSlots []int32
	levels    []int32 // increasing offsets above the subtree minimum, from 1
	index     []int8  // index[off]: the level for an offset off (small offsets)
	sums      []runSum
	minSize   int32 // subtrees with fewer breakpoints are walked, not summarised
}

// runSum describes the steps of a subtree, each either good (free count at
// or above the level) or short. pre is the key of the first short step
// (Forever: none), suf the key where the last run of good steps begins
// (Forever: the last step is short), long the longest run of good steps,
// each measured from its first key to the short step that ends it or, for
// the last run, to the subtree's last key.
type runSum struct {
	long, pre, suf int64
}

// defaultRunMinSize is the smallest subtree worth summarising: smaller ones
// are walked, which costs about what a summary lookup and a descent cost,
// and keeping summaries only for the larger ones keeps their memory to a
// few per cent of the treap's.
const defaultRunMinSize = 32

func (r *runSums) init(procs int) {
	r.minSize = defaultRunMinSize
	// Offsets grow by half so that the level used for a query is at least
	// two thirds of the query's; at most 64 of them (one bit each in sumOK).
	grow := 3
	for {
		r.levels = r.levels[:0]
		for c := 1; c < procs; c = max(c+1, c*grow/2) {
			r.levels = append(r.levels, int32(c))
		}
		if len(r.levels) <= 64 {
			break
		}
		grow++
	}
	r.index = make([]int8, min(procs, 1<<16)+1)
	r.index[0] = -1
	for off := 1; off < len(r.index); off++ {
		j := &r.index[off]
		*j = r.index[off-1]
		if n := int(*j) + 1; n < len(r.levels) && int(r.levels[n]) <= off {
			*j = int8(n)
		}
	}
}

// level returns the index of the largest offset <= off, or -1.
func (r *runSums) level(off int32) int {
	if off <= 0 {
		return -1
	}
	if int(off) < len(r.index) {
		return int(r.index[off])
	}
	return len(r.levels) - 1 // -1 when there are none
}

// bound returns a summary of subtree i at level mn+off (mn is the
// subtree's minimum, off > 0) that never under-states its runs: its summary
// at the highest stored level <= mn+off. ok is false when there is none.
func (r *runSums) bound(p *Profile, i, off int32) (rs runSum, ok bool) {
	j := r.level(off)
	if j < 0 {
		return runSum{}, false
	}
	return p.runAt(i, j), true
}

// runAt returns node i's summary at level j, computing it (and the ones of
// its descendants it rests on) if it is stale.
func (p *Profile) runAt(i int32, j int) runSum {
	n := &p.nodes[i]
	if n.slot == 0 {
		n.slot = p.runs.alloc()
	}
	k := int(n.slot)*len(p.runs.levels) + j
	if n.sumOK&(1<<j) != 0 {
		return p.runs.sums[k]
	}
	lv := n.mn + p.runs.levels[j] // in the node's frame; children's is lz lower
	key, good, left, right, lz := n.key, n.val >= lv, n.left, n.right, n.lz
	l := p.childRun(left, lv-lz)
	r := p.childRun(right, lv-lz)
	out := joinRuns(l, left != 0, key, good, r, right != 0)
	p.runs.sums[k] = out
	p.nodes[i].sumOK |= 1 << j
	return out
}

// childRun returns a summary of child c at level lv (in the child's frame)
// that never under-states its runs: exact when the child is all good or all
// short, otherwise the child's summary at the highest stored level <= lv.
func (p *Profile) childRun(c int32, lv int32) runSum {
	if c == 0 {
		return runSum{pre: Forever, suf: Forever}
	}
	n := &p.nodes[c]
	switch {
	case n.mn >= lv:
		return runSum{long: n.hi - n.lo, pre: Forever, suf: n.lo}
	case n.mx < lv:
		return runSum{pre: n.lo, suf: Forever}
	}
	if n.size < p.runs.minSize {
		// Small subtrees are not summarised: walk them at the exact level.
		return joinRuns(p.childRun(n.left, lv-n.lz), n.left != 0, n.key, n.val >= lv, p.childRun(n.right, lv-n.lz), n.right != 0)
	}
	return p.runAt(c, p.runs.level(lv-n.mn))
}

// alloc returns a free slot of summaries (slot 0 is never used).
func (r *runSums) alloc() int32 {
	if k := len(r.freeSlots); k > 0 {
		s := r.freeSlots[k-1]
		r.freeSlots = r.freeSlots[:k-1]
		return s
	}
	if len(r.sums) == 0 {
		r.sums = make([]runSum, len(r.levels), 64*len(r.levels))
	}
	r.sums = append(r.sums, make([]runSum, len(r.levels))...)
	return int32(len(r.sums)/len(r.levels) - 1)
}

// release gives node i's slot back when the node leaves the treap.
func (p *Profile) releaseSlot(i int32) {
	if s := p.nodes[i].slot; s != 0 {
		p.runs.freeSlots = append(p.runs.freeSlots, s)
		p.nodes[i].slot = 0
	}
}

// joinRuns combines the summaries of a left subtree, a node at key (good or
// short) and a right subtree, all at one level.
func joinRuns(l runSum, hasL bool, key int64, good bool, r runSum, hasR bool) runSum {
	out := runSum{long: max(l.long, r.long)}
	// First short step.
	switch {
	case hasL && l.pre != Forever:
		out.pre = l.pre
	case !good:
		out.pre = key
	case hasR:
		out.pre = r.pre
	default:
		out.pre = Forever
	}
	// Last run and the run through key.
	rAllGood := !hasR || r.pre == Forever
	if !good {
		if hasL && l.suf != Forever {
			out.long = max(out.long, key-l.suf)
		}
		if hasR {
			out.suf = r.suf
		} else {
			out.suf = Forever
		}
		return out
	}
	start := key
	if hasL && l.suf != Forever {
		start = l.suf
	}
	end := key
	if hasR {
		end = r.pre
		if rAllGood {
			end = r.suf + r.long // r all good: its one run spans r.lo..r.hi
		}
	}
	out.long = max(out.long, end-start)
	if rAllGood {
		out.suf = start
	} else {
		out.suf = r.suf
	}
	return out
}

// firstBelow returns the first key of subtree i (lazy addition acc pending
// from above) whose free count is below q; the subtree must have one.
func (p *Profile) firstBelow(i, acc, q int32) int64 {
	for i != 0 {
		n := &p.nodes[i]
		a := acc + n.lz
		if l := n.left; l != 0 && p.nodes[l].mn+a < q {
			i, acc = l, a
			continue
		}
		if n.val+acc < q {
			return n.key
		}
		i, acc = n.right, a
	}
	return Forever
}

// afterLastBelow returns the key after the last step of subtree i whose
// free count is below q, that is where the subtree's last run of steps with
// at least q free begins: next if the last short step is the subtree's last
// key (next is the key after the subtree, or Forever for none).
func (p *Profile) afterLastBelow(i, acc, q int32, next int64) int64 {
	for i != 0 {
		n := &p.nodes[i]
		a := acc + n.lz
		if r := n.right; r != 0 && p.nodes[r].mn+a < q {
			i, acc = r, a
			continue
		}
		if n.val+acc < q {
			if n.right != 0 {
				return p.nodes[n.right].lo
			}
			return next
		}
		next = n.key
		i, acc = n.left, a
	}
	return next
}
