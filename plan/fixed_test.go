package plan

import (
	"errors"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func newTestSite(t *testing.T, procs int, pol Policy) *Site {
	t.Helper()
	s, err := NewSite(Config{Procs: procs, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testJob(id int64, procs int, est, release, deadline int64) Job {
	return Job{ID: id, Procs: procs, Estimate: est, Release: release, Deadline: deadline}
}

func mustSubmit(t *testing.T, s *Site, now int64, j Job, wantStart int64) {
	t.Helper()
	pl := s.Submit(now, j)
	if !pl.OK() {
		t.Fatalf("job %d rejected: %v", j.ID, pl.Reason)
	}
	if s.cfg.Policy == Conservative && pl.Start != wantStart {
		t.Fatalf("job %d placed at %d, want %d", j.ID, pl.Start, wantStart)
	}
}

// snapshot is everything AddFixed may change, to check that a refusal
// leaves the site as it was.
type snapshot struct {
	res     []Reservation
	steps   []Step
	waiting []int64
	fixed   []Reservation
}

func snap(s *Site) snapshot {
	sn := snapshot{res: s.plan.Reservations(), steps: s.plan.prof.Steps(Never+1, Forever), fixed: s.Fixed()}
	sn.waiting = s.WaitingIDs(nil)
	return sn
}

// checkPlanConsistent recomputes the profile from the reservations.
func checkPlanConsistent(t *testing.T, s *Site) {
	t.Helper()
	ref := NewProfile(s.cfg.Procs)
	for _, r := range s.plan.res {
		ref.Add(r.Start, r.End, -r.Procs)
	}
	if got, want := s.plan.prof.Steps(Never+1, Forever), ref.Steps(Never+1, Forever); !reflect.DeepEqual(got, want) {
		t.Fatalf("profile %v, reservations say %v", got, want)
	}
	if m := s.plan.prof.MinFree(Never+1, Forever); m < 0 {
		t.Fatalf("over-committed: %d free", m)
	}
	checkDueIndex(t, s)
	for _, e := range s.waiting {
		if s.cfg.Policy != Conservative || e.dead {
			continue
		}
		r, ok := s.plan.Get(e.job.ID)
		if !ok || r.Start != e.place.Start || r.End != e.place.End {
			t.Fatalf("waiting job %d placed %+v, plan holds %+v (%v)", e.job.ID, e.place, r, ok)
		}
	}
}

func TestAddFixed(t *testing.T) {
	const F = -1 // the fixed reservation's id
	// Every case starts from the same site: 10 processors, conservative, at
	// time 0, with A (6 procs, 100 s) at [0, 100), B (6 procs, 100 s) at
	// [100, 200) and C (2 procs, 50 s) at [0, 50), none started unless
	// the case starts them.
	type want struct {
		err       error // nil: accepted
		conflicts []int64
		running   []int64
		displaced []Displaced
		after     map[int64][2]int64 // job id -> reserved [start, end) afterwards
		gone      []int64            // jobs no longer at the site
	}
	tests := []struct {
		name     string
		deadA    int64 // A's deadline
		started  bool  // run Pass(0) first: A and C are running
		spec     FixedSpec
		displace bool
		want     want
	}{
		{
			name: "free slot",
			spec: FixedSpec{ID: F, Name: "maint", Procs: 2, Start: 50, End: 300},
			want: want{after: map[int64][2]int64{1: {0, 100}, 2: {100, 200}, 3: {0, 50}}},
		},
		{
			name: "free slot beside running jobs",
			spec: FixedSpec{ID: F, Procs: 2, Start: 50, End: 300}, started: true, displace: true,
			want: want{after: map[int64][2]int64{1: {0, 100}, 2: {100, 200}, 3: {0, 50}}},
		},
		{
			name: "conflict refused with the exact job list",
			spec: FixedSpec{ID: F, Procs: 8, Start: 50, End: 150},
			want: want{err: ErrConflict, conflicts: []int64{1, 2}},
		},
		{
			name: "touching a reservation is no conflict",
			spec: FixedSpec{ID: F, Procs: 8, Start: 200, End: 250},
			want: want{after: map[int64][2]int64{1: {0, 100}, 2: {100, 200}, 3: {0, 50}}},
		},
		{
			name: "displace re-plans a waiting job",
			spec: FixedSpec{ID: F, Procs: 8, Start: 10, End: 60}, displace: true,
			want: want{
				// A and C overlap [10, 60), so both are displaced (the rule
				// takes every overlapping job out). In submission order, A
				// goes to its earliest fit, after B; C fits again where it
				// was, on the 2 processors the fixed one leaves.
				displaced: []Displaced{
					{JobID: 1, Was: Placement{Start: 0, End: 100, Reason: ReasonPlacedInFull}, Placement: Placement{Start: 200, End: 300, Reason: ReasonPlacedInFull}},
					{JobID: 3, Was: Placement{Start: 0, End: 50, Reason: ReasonPlacedInFull}, Placement: Placement{Start: 0, End: 50, Reason: ReasonPlacedInFull}},
				},
				after: map[int64][2]int64{1: {200, 300}, 2: {100, 200}, 3: {0, 50}},
			},
		},
		{
			name: "displace rejects a job whose window no longer fits",
			spec: FixedSpec{ID: F, Procs: 8, Start: 10, End: 60}, displace: true, deadA: 250,
			want: want{
				displaced: []Displaced{
					{JobID: 1, Was: Placement{Start: 0, End: 100, Reason: ReasonPlacedInFull}, Placement: Placement{Reason: ReasonRejectedNoGap}, Rejected: true},
					{JobID: 3, Was: Placement{Start: 0, End: 50, Reason: ReasonPlacedInFull}, Placement: Placement{Start: 0, End: 50, Reason: ReasonPlacedInFull}},
				},
				after: map[int64][2]int64{2: {100, 200}, 3: {0, 50}},
				gone:  []int64{1},
			},
		},
		{
			name: "running conflict refused even with displace",
			spec: FixedSpec{ID: F, Procs: 8, Start: 10, End: 150}, displace: true, started: true,
			want: want{err: ErrConflict, conflicts: []int64{1, 2, 3}, running: []int64{1, 3}},
		},
		{
			name: "running conflict refused without displace",
			spec: FixedSpec{ID: F, Procs: 8, Start: 10, End: 60}, started: true,
			want: want{err: ErrConflict, conflicts: []int64{1, 3}, running: []int64{1, 3}},
		},
		{
			name: "whole machine for ever is refused",
			spec: FixedSpec{ID: F, Procs: 10, Start: 0, End: Forever},
			want: want{err: ErrConflict, conflicts: []int64{1, 2, 3}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSite(t, 10, Conservative)
			dA := tc.deadA
			if dA == 0 {
				dA = Forever
			}
			mustSubmit(t, s, 0, testJob(1, 6, 100, 0, dA), 0)
			mustSubmit(t, s, 0, testJob(2, 6, 100, 0, Forever), 100)
			mustSubmit(t, s, 0, testJob(3, 2, 50, 0, Forever), 0)
			if tc.started {
				if d := s.Pass(0); len(d) != 2 {
					t.Fatalf("pass started %v", d)
				}
			}
			before := snap(s)
			if got := s.Conflicts(tc.spec); tc.want.err != nil && !reflect.DeepEqual(got, tc.want.conflicts) {
				t.Fatalf("Conflicts = %v, want %v", got, tc.want.conflicts)
			}
			disp, err := s.AddFixed(0, tc.spec, tc.displace)
			if tc.want.err != nil {
				if !errors.Is(err, tc.want.err) {
					t.Fatalf("AddFixed = %v, want %v", err, tc.want.err)
				}
				var ce *ConflictError
				if !errors.As(err, &ce) {
					t.Fatalf("error %T is not a *ConflictError", err)
				}
				if !reflect.DeepEqual(ce.Jobs, tc.want.conflicts) || !reflect.DeepEqual(ce.Running, tc.want.running) {
					t.Fatalf("conflicts %v running %v, want %v and %v", ce.Jobs, ce.Running, tc.want.conflicts, tc.want.running)
				}
				if disp != nil {
					t.Fatalf("refused, yet displaced %v", disp)
				}
				if after := snap(s); !reflect.DeepEqual(before, after) {
					t.Fatalf("refusal changed the site:\nbefore %+v\nafter  %+v", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("AddFixed: %v", err)
			}
			if !reflect.DeepEqual(disp, tc.want.displaced) {
				t.Fatalf("displaced\n got %+v\nwant %+v", disp, tc.want.displaced)
			}
			r, ok := s.plan.Get(F)
			want := Reservation{ID: F, Procs: tc.spec.Procs, Start: tc.spec.Start, End: tc.spec.End, Release: tc.spec.Start, Deadline: tc.spec.End, Fixed: true}
			if !ok || r != want {
				t.Fatalf("fixed reservation %+v, want %+v", r, want)
			}
			if got := s.Fixed(); len(got) != 1 || got[0] != want {
				t.Fatalf("Fixed() = %+v", got)
			}
			if n, _ := s.FixedName(F); n != tc.spec.Name {
				t.Fatalf("name %q", n)
			}
			for id, w := range tc.want.after {
				r, ok := s.plan.Get(id)
				if !ok || r.Start != w[0] || r.End != w[1] {
					t.Fatalf("job %d at %+v (%v), want [%d, %d)", id, r, ok, w[0], w[1])
				}
				if pl, ok := s.Placement(id); !ok || pl.Start != w[0] {
					t.Fatalf("job %d placement %+v (%v)", id, pl, ok)
				}
			}
			for _, id := range tc.want.gone {
				if _, ok := s.plan.Get(id); ok {
					t.Fatalf("rejected job %d still in the plan", id)
				}
				if _, ok := s.Placement(id); ok {
					t.Fatalf("rejected job %d still at the site", id)
				}
			}
			checkPlanConsistent(t, s)
			// The next passes never move the fixed reservation; the first
			// pass at or after its end drops it.
			for _, now := range []int64{0, tc.spec.Start, tc.spec.End - 1} {
				s.Pass(now)
				if r, _ := s.plan.Get(F); r != want {
					t.Fatalf("pass at %d moved the fixed reservation to %+v", now, r)
				}
				checkPlanConsistent(t, s)
			}
			s.Pass(tc.spec.End)
			if _, ok := s.plan.Get(F); ok || len(s.Fixed()) != 0 {
				t.Fatalf("fixed reservation kept after its end")
			}
		})
	}
}

func TestAddFixedRefusesBadSpecs(t *testing.T) {
	s := newTestSite(t, 10, Conservative)
	mustSubmit(t, s, 0, testJob(1, 2, 10, 0, Forever), 0)
	if _, err := s.AddFixed(0, FixedSpec{ID: -1, Procs: 10, Start: 100, End: 200}, false); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		now  int64
		spec FixedSpec
		want error
	}{
		{"no procs", 0, FixedSpec{ID: -2, Procs: 0, Start: 0, End: 10}, ErrInvalid},
		{"too wide", 0, FixedSpec{ID: -2, Procs: 11, Start: 0, End: 10}, ErrExceedsCapacity},
		{"empty", 0, FixedSpec{ID: -2, Procs: 1, Start: 10, End: 10}, ErrInvalid},
		{"backwards", 0, FixedSpec{ID: -2, Procs: 1, Start: 10, End: 5}, ErrInvalid},
		{"over already", 50, FixedSpec{ID: -2, Procs: 1, Start: 10, End: 50}, ErrInvalid},
		{"duplicate fixed id", 0, FixedSpec{ID: -1, Procs: 1, Start: 300, End: 400}, ErrDuplicate},
		{"a job's id", 0, FixedSpec{ID: 1, Procs: 1, Start: 300, End: 400}, ErrDuplicate},
		{"collides with a fixed one", 0, FixedSpec{ID: -2, Procs: 1, Start: 150, End: 250}, ErrNoFit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := snap(s)
			for _, displace := range []bool{false, true} {
				if _, err := s.AddFixed(tc.now, tc.spec, displace); !errors.Is(err, tc.want) {
					t.Fatalf("AddFixed(displace=%v) = %v, want %v", displace, err, tc.want)
				}
			}
			if after := snap(s); !reflect.DeepEqual(before, after) {
				t.Fatalf("refusal changed the site")
			}
		})
	}
	// A queued job's id (no reservation) is taken too.
	q := newTestSite(t, 4, FCFS)
	q.Submit(0, testJob(7, 4, 10, 0, Forever))
	if _, err := q.AddFixed(0, FixedSpec{ID: 7, Procs: 1, Start: 0, End: 5}, false); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("queued job id: %v", err)
	}
	// And a fixed reservation's id is never a job's: Move, Shorten and
	// Extend refuse it.
	p := s.Plan()
	if p.Move(-1, 300, 400) == nil || p.Shorten(-1, 150) == nil || p.Extend(-1, 300) == nil {
		t.Fatal("a fixed reservation changed")
	}
}

func TestRemoveFixed(t *testing.T) {
	s := newTestSite(t, 10, Conservative)
	if _, err := s.AddFixed(0, FixedSpec{ID: -1, Name: "maint", Procs: 10, Start: 0, End: 100}, false); err != nil {
		t.Fatal(err)
	}
	mustSubmit(t, s, 0, testJob(1, 4, 50, 0, Forever), 100)
	if err := s.RemoveFixed(0, 1); !errors.Is(err, ErrUnknownReservation) {
		t.Fatalf("RemoveFixed of a job: %v", err)
	}
	if err := s.RemoveFixed(0, -9); !errors.Is(err, ErrUnknownReservation) {
		t.Fatalf("RemoveFixed of nothing: %v", err)
	}
	if err := s.RemoveFixed(0, -1); err != nil {
		t.Fatal(err)
	}
	if len(s.Fixed()) != 0 {
		t.Fatalf("still listed: %v", s.Fixed())
	}
	if _, ok := s.FixedName(-1); ok {
		t.Fatal("name kept")
	}
	if err := s.RemoveFixed(0, -1); !errors.Is(err, ErrUnknownReservation) {
		t.Fatalf("second RemoveFixed: %v", err)
	}
	// The room it left lets the job move earlier and start now.
	d := s.Pass(0)
	if len(d) != 1 || d[0].JobID != 1 || d[0].Start != 0 || d[0].End != 50 {
		t.Fatalf("pass after removal: %+v", d)
	}
	// The id can be used again, with another end; the stale heap entry of
	// the first one must not drop it.
	if _, err := s.AddFixed(0, FixedSpec{ID: -1, Procs: 2, Start: 10, End: 500}, false); err != nil {
		t.Fatal(err)
	}
	s.Pass(100)
	if got := s.Fixed(); len(got) != 1 || got[0].End != 500 {
		t.Fatalf("re-added reservation lost: %v", got)
	}
	s.Pass(500)
	if got := s.Fixed(); len(got) != 0 {
		t.Fatalf("over at 500 but still listed: %v", got)
	}
	checkPlanConsistent(t, s)
}

// TestFixedWallUnderQueuePolicies: a queued job blocked only by a fixed
// reservation starts when it ends, woken by NextWake; with nothing waiting,
// fixed reservations do not wake the site.
func TestFixedWallUnderQueuePolicies(t *testing.T) {
	for _, pol := range []Policy{EASY, FCFS, LIST} {
		t.Run(pol.String(), func(t *testing.T) {
			s := newTestSite(t, 8, pol)
			if _, err := s.AddFixed(0, FixedSpec{ID: -1, Procs: 6, Start: 50, End: 100}, false); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AddFixed(0, FixedSpec{ID: -2, Procs: 8, Start: 1000, End: 1100}, false); err != nil {
				t.Fatal(err)
			}
			if w := s.NextWake(0); w != Forever {
				t.Fatalf("NextWake with nothing waiting = %d", w)
			}
			s.Submit(0, testJob(1, 4, 80, 0, Forever)) // would overlap [50, 100) on 6+4 > 8
			s.Submit(0, testJob(2, 2, 40, 0, Forever)) // fits before and beside
			d := s.Pass(0)
			want := []Decision{{Kind: DecideStart, JobID: 2, Start: 0, End: 40}}
			if pol == FCFS {
				want = nil // nobody overtakes the blocked head
			}
			if len(d) != len(want) || (len(want) > 0 && d[0] != want[0]) {
				t.Fatalf("pass at 0: %+v, want %+v", d, want)
			}
			if w := s.NextWake(0); w != 100 {
				t.Fatalf("NextWake = %d, want 100 (the fixed reservation ends)", w)
			}
			if pol != FCFS {
				s.End(40, 2)
				s.Pass(40)
			}
			d = s.Pass(100)
			if len(d) == 0 || d[0].JobID != 1 || d[0].Start != 100 {
				t.Fatalf("pass at 100: %+v", d)
			}
			if got := s.Fixed(); len(got) != 1 || got[0].ID != -2 {
				t.Fatalf("fixed after 100: %v", got)
			}
			checkPlanConsistent(t, s)
		})
	}
}

// TestFixedConfig: fixed reservations given in Config are held from the
// start; a bad one makes NewSite fail.
func TestFixedConfig(t *testing.T) {
	s, err := NewSite(Config{Procs: 4, Fixed: []FixedSpec{{ID: -1, Procs: 4, Start: 0, End: 10}, {ID: -2, Procs: 2, Start: 10, End: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if pl := s.Submit(0, testJob(1, 3, 5, 0, Forever)); pl.Start != 20 {
		t.Fatalf("placed at %d, want 20", pl.Start)
	}
	if _, err := NewSite(Config{Procs: 4, Fixed: []FixedSpec{{ID: -1, Procs: 4, Start: 0, End: 10}, {ID: -2, Procs: 1, Start: 5, End: 20}}}); !errors.Is(err, ErrNoFit) {
		t.Fatalf("overlapping fixed reservations: %v", err)
	}
	if _, err := NewSite(Config{Procs: 4, Fixed: []FixedSpec{{ID: -1, Procs: 5, Start: 0, End: 10}}}); !errors.Is(err, ErrExceedsCapacity) {
		t.Fatalf("too wide: %v", err)
	}
}

// TestAddFixedRandom adds random fixed reservations, with and without
// displacement, to random conservative sites, and checks that the plan
// stays consistent, that every fixed reservation stays exactly where it was
// put through the passes, that waiting jobs keep slots in their windows, and
// that a refusal changes nothing.
func TestAddFixedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var added, refused, displaced, rejected, removed int
	for round := 0; round < 150; round++ {
		procs := 1 + rng.IntN(16)
		s := newTestSite(t, procs, Conservative)
		fixed := map[int64]Reservation{}
		var now int64
		nextID, nextFixed := int64(1), int64(-1)
		running := map[int64]int64{} // id -> end
		for step := 0; step < 60; step++ {
			now += rng.Int64N(20)
			for id, end := range running {
				if end <= now || rng.IntN(8) == 0 {
					s.End(now, id)
					delete(running, id)
				}
			}
			switch rng.IntN(3) {
			case 0:
				dl := Forever
				if rng.IntN(2) == 0 {
					dl = now + 50 + rng.Int64N(400)
				}
				s.Submit(now, testJob(nextID, 1+rng.IntN(procs), 1+rng.Int64N(60), now, dl))
				nextID++
			case 1:
				start := now + rng.Int64N(200) - 20
				f := FixedSpec{ID: nextFixed, Procs: 1 + rng.IntN(procs), Start: start, End: start + 1 + rng.Int64N(100)}
				before := snap(s)
				disp, err := s.AddFixed(now, f, rng.IntN(2) == 0)
				switch {
				case err == nil:
					fixed[f.ID] = Reservation{ID: f.ID, Procs: f.Procs, Start: f.Start, End: f.End, Release: f.Start, Deadline: f.End, Fixed: true}
					nextFixed--
					added++
					for _, d := range disp {
						displaced++
						if d.Rejected {
							rejected++
						}
						if _, ok := s.Placement(d.JobID); ok == d.Rejected {
							t.Fatalf("displaced %+v: at the site %v", d, ok)
						}
					}
				case errors.Is(err, ErrConflict) || errors.Is(err, ErrNoFit) || errors.Is(err, ErrInvalid):
					if after := snap(s); !reflect.DeepEqual(before, after) {
						t.Fatalf("refused (%v) but changed the site", err)
					}
					refused++
				default:
					t.Fatalf("AddFixed: %v", err)
				}
			case 2:
				if rng.IntN(4) != 0 || len(fixed) == 0 {
					break
				}
				ids := slices.Sorted(maps.Keys(fixed))
				id := ids[rng.IntN(len(ids))]
				if err := s.RemoveFixed(now, id); err != nil {
					t.Fatal(err)
				}
				delete(fixed, id)
				removed++
			}
			for _, d := range s.Pass(now) {
				if d.Kind == DecideStart {
					running[d.JobID] = d.End
				}
			}
			for id, want := range fixed {
				if want.End <= now {
					delete(fixed, id)
					continue
				}
				if got, ok := s.plan.Get(id); !ok || got != want {
					t.Fatalf("round %d step %d: fixed %d is %+v (%v), want %+v", round, step, id, got, ok, want)
				}
			}
			checkPlanConsistent(t, s)
			for _, e := range s.waiting {
				if e.dead {
					continue
				}
				if e.place.Start <= now || e.place.Start < e.job.Release || e.place.End > e.job.Deadline {
					t.Fatalf("waiting job %d at %+v outside its window", e.job.ID, e.place)
				}
			}
		}
	}
	t.Logf("added %d, refused %d, displaced %d (rejected %d), removed %d", added, refused, displaced, rejected, removed)
	if added < 100 || refused < 100 || displaced < 50 || rejected < 5 || removed < 20 {
		t.Fatal("the random cases miss a path")
	}
}
