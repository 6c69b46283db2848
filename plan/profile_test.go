package plan

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refProfile is the deliberately simple reference: a list of reservations,
// every query answered by scanning all of them.
type refProfile struct {
	procs int
	res   map[int64]Reservation
}

func newRef(procs int) *refProfile { return &refProfile{procs: procs, res: map[int64]Reservation{}} }

func (r *refProfile) free(t int64) int {
	f := r.procs
	for _, x := range r.res {
		if x.Start <= t && t < x.End {
			f -= x.Procs
		}
	}
	return f
}

// events returns every reservation boundary, sorted.
func (r *refProfile) events() []int64 {
	var ts []int64
	for _, x := range r.res {
		ts = append(ts, x.Start, x.End)
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

func (r *refProfile) fits(procs int, s, e int64) bool {
	if r.free(s) < procs {
		return false
	}
	for _, t := range r.events() {
		if t > s && t < e && r.free(t) < procs {
			return false
		}
	}
	return true
}

func (r *refProfile) earliestFit(procs int, d, on, deadline int64) (int64, bool) {
	if procs > r.procs {
		return 0, false
	}
	cands := []int64{on}
	for _, t := range r.events() {
		if t > on {
			cands = append(cands, t)
		}
	}
	for _, s := range cands {
		if s+d > deadline {
			return 0, false
		}
		if r.fits(procs, s, s+d) {
			return s, true
		}
	}
	return 0, false
}

func (r *refProfile) gaps(procs int, from, to int64) []Gap {
	if procs > r.procs {
		return nil
	}
	pts := []int64{from}
	for _, t := range r.events() {
		if t > from && t < to {
			pts = append(pts, t)
		}
	}
	var out []Gap
	open := false
	for _, t := range pts {
		ok := r.free(t) >= procs
		switch {
		case ok && !open:
			out = append(out, Gap{Start: t})
			open = true
		case !ok && open:
			out[len(out)-1].End = t
			open = false
		}
	}
	if open {
		out[len(out)-1].End = to
	}
	return out
}

// randomPlan fills a plan and its reference with random feasible reservations,
// releasing some again, and returns both.
func randomPlan(rng *rand.Rand, procs, n int, horizon int64) (*Plan, *refProfile) {
	p, ref := New(procs), newRef(procs)
	var ids []int64
	for i := 0; i < n; i++ {
		id := int64(i + 1)
		q := 1 + rng.IntN(procs)
		d := 1 + rng.Int64N(horizon/10+1)
		on := rng.Int64N(horizon)
		s, ok := p.EarliestFit(q, d, on, Forever)
		if !ok {
			continue
		}
		r := Reservation{ID: id, Procs: q, Start: s, End: s + d, Release: on, Deadline: Forever}
		if err := p.Reserve(r); err != nil {
			panic(err)
		}
		ref.res[id] = r
		ids = append(ids, id)
		if rng.IntN(4) == 0 && len(ids) > 0 {
			k := rng.IntN(len(ids))
			if _, err := p.Release(ids[k]); err != nil {
				panic(err)
			}
			delete(ref.res, ids[k])
			ids = slices.Delete(ids, k, k+1)
		}
	}
	return p, ref
}

func TestProfileAgainstReference(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		procs := 1 + rng.IntN(16)
		p, ref := randomPlan(rng, procs, 5+rng.IntN(60), 200)
		for q := 0; q < 200; q++ {
			at := rng.Int64N(260) - 20
			if got, want := p.Free(at), ref.free(at); got != want {
				t.Fatalf("seed %d: Free(%d) = %d, reference %d", seed, at, got, want)
			}
			free, until := p.Profile().FreeSpan(at)
			if free != ref.free(at) || until <= at {
				t.Fatalf("seed %d: FreeSpan(%d) = %d, %d; reference free %d", seed, at, free, until, ref.free(at))
			}
			for x := at; x < min(until, 300); x++ {
				if ref.free(x) != free {
					t.Fatalf("seed %d: FreeSpan(%d) = %d until %d, but the reference has %d free at %d", seed, at, free, until, ref.free(x), x)
				}
			}
			if until < Forever && ref.free(until) == free {
				t.Fatalf("seed %d: FreeSpan(%d) = %d until %d, where nothing changes", seed, at, free, until)
			}
			need := 1 + rng.IntN(procs+1)
			d := 1 + rng.Int64N(60)
			dl := Forever
			if rng.IntN(2) == 0 {
				dl = at + rng.Int64N(200)
			}
			gs, gok := p.EarliestFit(need, d, at, dl)
			ws, wok := ref.earliestFit(need, d, at, dl)
			if gok != wok || gs != ws {
				t.Fatalf("seed %d: EarliestFit(%d, %d, %d, %d) = %d,%v, reference %d,%v", seed, need, d, at, dl, gs, gok, ws, wok)
			}
			to := at + 1 + rng.Int64N(200)
			gg := p.Gaps(nil, need, at, to)
			wg := ref.gaps(need, at, to)
			if !slices.Equal(gg, wg) {
				t.Fatalf("seed %d: Gaps(%d, %d, %d) = %v, reference %v", seed, need, at, to, gg, wg)
			}
			if got, want := p.Profile().Fits(need, at, at+d), ref.fits(need, at, at+d); got != want {
				t.Fatalf("seed %d: Fits(%d, %d, %d) = %v, reference %v", seed, need, at, at+d, got, want)
			}
			var area int64
			for x := at; x < to; x++ {
				area += int64(ref.free(x))
			}
			if got := p.Profile().FreeArea(at, to); got != area {
				t.Fatalf("seed %d: FreeArea(%d, %d) = %d, reference %d", seed, at, to, got, area)
			}
		}
		checkInvariants(t, p)
	}
}

// checkInvariants asserts that no time has more processors reserved than
// exist, that every reservation lies inside its window, that the profile
// equals the sum of the reservations, and that All yields them all, once
// each, stopping when told to.
func checkInvariants(t *testing.T, p *Plan) {
	t.Helper()
	ref := newRef(p.Procs())
	for _, r := range p.Reservations() {
		if r.Start < r.Release || r.End > r.Deadline || r.End <= r.Start {
			t.Fatalf("reservation %+v leaves its window", r)
		}
		ref.res[r.ID] = r
	}
	seen := map[int64]bool{}
	for r := range p.All() {
		if seen[r.ID] || ref.res[r.ID] != r {
			t.Fatalf("All yielded %+v (again: %v), the plan holds %+v", r, seen[r.ID], ref.res[r.ID])
		}
		seen[r.ID] = true
	}
	if len(seen) != len(ref.res) {
		t.Fatalf("All yielded %d reservations, the plan holds %d", len(seen), len(ref.res))
	}
	for range p.All() {
		break // a walk stopped at once must not panic
	}
	for _, at := range append(ref.events(), Never, 0) {
		f := ref.free(at)
		if f < 0 {
			t.Fatalf("at %d: %d processors over-committed", at, -f)
		}
		if got := p.Free(at); got != f {
			t.Fatalf("at %d: profile says %d free, reservations %d", at, got, f)
		}
	}
	// Only real steps are stored: no breakpoint repeats its predecessor.
	steps := p.Profile().Steps(Never, Forever)
	for i := 1; i < len(steps); i++ {
		if steps[i].Free == steps[i-1].Free {
			t.Fatalf("redundant breakpoint at %d", steps[i].At)
		}
	}
	checkTreap(t, p.Profile())
}

// checkTreap asserts the profile's treap is well formed: keys in search
// order, priorities in heap order, and every node's summary (size, smallest
// and largest key, smallest and largest free count) equal to its subtree's,
// with the pending additions above it applied; every node is either in the
// treap or on the free list.
func checkTreap(t *testing.T, p *Profile) {
	t.Helper()
	type sum struct {
		size   int32
		lo, hi int64
		mn, mx int32
	}
	var visit func(i, acc int32, lo, hi int64, prio uint32) sum
	visit = func(i, acc int32, lo, hi int64, prio uint32) sum {
		n := &p.nodes[i]
		if n.key < lo || n.key > hi {
			t.Fatalf("node %d: key %d outside (%d, %d) of its place", i, n.key, lo, hi)
		}
		if n.prio > prio {
			t.Fatalf("node %d: priority %d above its parent's %d", i, n.prio, prio)
		}
		v := n.val + acc
		s := sum{size: 1, lo: n.key, hi: n.key, mn: v, mx: v}
		if n.left != 0 {
			l := visit(n.left, acc+n.lz, lo, n.key-1, n.prio)
			s.size += l.size
			s.lo, s.mn, s.mx = l.lo, min(s.mn, l.mn), max(s.mx, l.mx)
		}
		if n.right != 0 {
			r := visit(n.right, acc+n.lz, n.key+1, hi, n.prio)
			s.size += r.size
			s.hi, s.mn, s.mx = r.hi, min(s.mn, r.mn), max(s.mx, r.mx)
		}
		if n.size != s.size || n.lo != s.lo || n.hi != s.hi || n.mn+acc != s.mn || n.mx+acc != s.mx {
			t.Fatalf("node %d (key %d): summary size %d lo %d hi %d mn %d mx %d, subtree %+v",
				i, n.key, n.size, n.lo, n.hi, n.mn+acc, n.mx+acc, s)
		}
		return s
	}
	if p.root == 0 {
		t.Fatal("empty treap: the breakpoint at Never is missing")
	}
	s := visit(p.root, 0, math.MinInt64, math.MaxInt64, math.MaxUint32)
	if int(s.size) != p.Len() {
		t.Fatalf("%d nodes in the treap, %d counted (%d slots, %d free)", s.size, p.Len(), len(p.nodes)-1, len(p.free))
	}
}

// TestProfileAddKeepsTreap adds and takes back random slots, many of them
// on existing breakpoints so that boundaries appear and disappear, and
// checks the treap and the step function after every Add.
func TestProfileAddKeepsTreap(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		p := NewProfile(64)
		ref := make(map[int64]int) // free count change at each time
		type slot struct {
			s, e int64
			d    int
		}
		var live []slot
		for k := 0; k < 300; k++ {
			if len(live) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(live))
				x := live[i]
				live = slices.Delete(live, i, i+1)
				p.Add(x.s, x.e, -x.d)
				ref[x.s] -= x.d
				ref[x.e] += x.d
			} else {
				// Few distinct times: boundaries often coincide.
				s := rng.Int64N(40)
				x := slot{s: s, e: s + 1 + rng.Int64N(20), d: 1 + rng.IntN(8)}
				if rng.IntN(2) == 0 {
					x.d = -x.d
				}
				live = append(live, x)
				p.Add(x.s, x.e, x.d)
				ref[x.s] += x.d
				ref[x.e] -= x.d
			}
			checkTreap(t, p)
			free := 64
			var want []Step
			want = append(want, Step{At: Never, Free: 64})
			for at := int64(0); at <= 60; at++ {
				if ref[at] != 0 {
					free += ref[at]
					want = append(want, Step{At: at, Free: free})
				}
			}
			// Merge equal neighbours: the profile keeps only real steps.
			m := 1
			for _, st := range want[1:] {
				if st.Free != want[m-1].Free {
					want[m] = st
					m++
				}
			}
			want = want[:m]
			if got := p.Steps(Never, Forever); !slices.Equal(got, want) {
				t.Fatalf("seed %d, op %d: steps %v, want %v", seed, k, got, want)
			}
		}
	}
}

func TestProfileOperations(t *testing.T) {
	tests := []struct {
		name  string
		ops   func(p *Plan) error
		at    int64
		want  int
		steps int
	}{
		{"empty", func(p *Plan) error { return nil }, 5, 4, 1},
		{"one", func(p *Plan) error {
			return p.Reserve(Reservation{ID: 1, Procs: 3, Start: 10, End: 20, Deadline: Forever})
		}, 15, 1, 3},
		{"release restores", func(p *Plan) error {
			if err := p.Reserve(Reservation{ID: 1, Procs: 3, Start: 10, End: 20, Deadline: Forever}); err != nil {
				return err
			}
			_, err := p.Release(1)
			return err
		}, 15, 4, 1},
		{"shorten", func(p *Plan) error {
			if err := p.Reserve(Reservation{ID: 1, Procs: 3, Start: 10, End: 20, Deadline: Forever}); err != nil {
				return err
			}
			return p.Shorten(1, 12)
		}, 15, 4, 3},
		{"move", func(p *Plan) error {
			if err := p.Reserve(Reservation{ID: 1, Procs: 3, Start: 10, End: 20, Deadline: Forever}); err != nil {
				return err
			}
			return p.Move(1, 30, 40)
		}, 35, 1, 3},
		{"adjacent merge", func(p *Plan) error {
			if err := p.Reserve(Reservation{ID: 1, Procs: 2, Start: 10, End: 20, Deadline: Forever}); err != nil {
				return err
			}
			return p.Reserve(Reservation{ID: 2, Procs: 2, Start: 20, End: 30, Deadline: Forever})
		}, 25, 2, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(4)
			if err := tc.ops(p); err != nil {
				t.Fatal(err)
			}
			if got := p.Free(tc.at); got != tc.want {
				t.Errorf("Free(%d) = %d, want %d", tc.at, got, tc.want)
			}
			if got := p.Profile().Len(); got != tc.steps {
				t.Errorf("breakpoints = %d, want %d", got, tc.steps)
			}
			checkInvariants(t, p)
		})
	}
}

func TestPlanRefusesBadReservations(t *testing.T) {
	p := New(4)
	if err := p.Reserve(Reservation{ID: 1, Procs: 4, Start: 0, End: 10, Deadline: Forever}); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		r    Reservation
		want error
	}{
		{"duplicate", Reservation{ID: 1, Procs: 1, Start: 20, End: 30, Deadline: Forever}, ErrDuplicate},
		{"no procs", Reservation{ID: 2, Procs: 0, Start: 20, End: 30, Deadline: Forever}, ErrInvalid},
		{"too wide", Reservation{ID: 2, Procs: 5, Start: 20, End: 30, Deadline: Forever}, ErrExceedsCapacity},
		{"empty", Reservation{ID: 2, Procs: 1, Start: 20, End: 20, Deadline: Forever}, ErrInvalid},
		{"before release", Reservation{ID: 2, Procs: 1, Start: 20, End: 30, Release: 25, Deadline: Forever}, ErrOutsideWindow},
		{"after deadline", Reservation{ID: 2, Procs: 1, Start: 20, End: 30, Deadline: 29}, ErrOutsideWindow},
		{"busy", Reservation{ID: 2, Procs: 1, Start: 5, End: 15, Deadline: Forever}, ErrNoFit},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			before := p.Profile().Steps(Never, Forever)
			err := p.Reserve(tc.r)
			if !errorsIs(err, tc.want) {
				t.Fatalf("Reserve = %v, want %v", err, tc.want)
			}
			if after := p.Profile().Steps(Never, Forever); !slices.Equal(before, after) {
				t.Fatalf("failed Reserve changed the profile: %v -> %v", before, after)
			}
		})
	}
}

// TestProfileVersion: Version changes with every Add that changes the
// profile, and only then.
func TestProfileVersion(t *testing.T) {
	p := NewProfile(4)
	v := p.Version()
	p.Add(10, 10, -1)
	p.Add(10, 20, 0)
	if p.Version() != v {
		t.Fatalf("Version %d after empty Adds, was %d", p.Version(), v)
	}
	for i, a := range [][3]int64{{10, 20, -1}, {15, 30, -2}, {10, 20, 1}} {
		p.Add(a[0], a[1], int(a[2]))
		if p.Version() == v {
			t.Fatalf("Add %d: Version still %d", i, v)
		}
		v = p.Version()
	}
}
