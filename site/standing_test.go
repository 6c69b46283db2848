package site

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// daily is a rule of 4 processors over [1200, 1300) of every day.
func daily(name string) plan.Standing {
	return plan.Standing{Name: name, Procs: 4, Start: 1200, Every: 86400, Length: 100}
}

// windows are a rule's instances in the plan, by start.
func windows(t *testing.T, a *Agent, name string) ([]plan.Window, int) {
	t.Helper()
	inst, skipped, ok := a.Instances(name)
	if !ok {
		t.Fatalf("no standing reservation %q", name)
	}
	ws := slices.Collect(maps.Values(inst))
	slices.SortFunc(ws, func(x, y plan.Window) int { return int(x.Start - y.Start) })
	return ws, skipped
}

// TestAddStanding: a standing reservation added while work is planned
// decides as a node's CreateReservation with every_seconds does.
func TestAddStanding(t *testing.T) {
	running, waiting := JobKey{"s", 1}, JobKey{"s", 2}
	for _, tc := range []struct {
		name     string
		rule     plan.Standing
		displace bool
		err      error
		jobs     []JobKey // of the conflict
		runs     []JobKey
		holds    []JobKey
		// displaced: Placement.OK() of each DecideDisplaced; start: the
		// waiting job's start after it.
		displaced []bool
		start     int64
	}{
		{name: "free", rule: plan.Standing{Name: "r", Procs: 4, Start: 3000, Every: 86400, Length: 100}, start: 1000},
		{name: "waiting job in the way", rule: daily("r"), err: plan.ErrConflict, jobs: []JobKey{waiting}, start: 1000},
		{name: "displaced and placed again", rule: daily("r"), displace: true, displaced: []bool{true}, start: 1300},
		{name: "running job in the way", rule: plan.Standing{Name: "r", Procs: 4, Start: 500, Every: 86400, Length: 100}, displace: true,
			err: plan.ErrConflict, jobs: []JobKey{running}, runs: []JobKey{running}, start: 1000},
		{name: "hold for a peer in the way", rule: plan.Standing{Name: "r", Procs: 4, Start: 2000, Every: 86400, Length: 100}, displace: true,
			err: plan.ErrConflict, jobs: []JobKey{{"o", 7}}, holds: []JobKey{{"o", 7}}, start: 1000},
		{name: "fixed reservation in the way", rule: plan.Standing{Name: "r", Procs: 1, Start: 5050, Every: 86400, Length: 10}, displace: true,
			err: plan.ErrNoFit, start: 1000},
		{name: "malformed", rule: plan.Standing{Name: "r", Procs: 1, Start: 0, Every: 50, Length: 100}, err: plan.ErrInvalid, start: 1000},
		{name: "too wide", rule: plan.Standing{Name: "r", Procs: 5, Start: 3000, Every: 86400, Length: 100}, err: plan.ErrInvalid, start: 1000},
		{name: "name taken", rule: plan.Standing{Name: "held", Procs: 1, Start: 3000, Every: 86400, Length: 100}, err: plan.ErrInvalid, start: 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(Config{Name: "s", Procs: 4, Policy: plan.Conservative, Fixed: []plan.FixedSpec{{ID: -1, Procs: 4, Start: 5000, End: 5100}},
				Standing: []plan.Standing{{Name: "held", Procs: 4, Start: 7 * 86400, Every: 7 * 86400, Length: 100}}})
			if err != nil {
				t.Fatal(err)
			}
			a.Submit(0, 1, plan.Job{Procs: 4, Estimate: 1000, Deadline: plan.Forever}) // runs 0..1000
			a.Tick(0)
			a.Submit(0, 2, plan.Job{Procs: 4, Estimate: 500, Deadline: plan.Forever}) // waits 1000..1500
			if tc.holds != nil {
				// A hold for a peer's quote, 1500..2500.
				a.Step(0, Message{Kind: KindQuoteRequest, From: "o", To: "s", Job: JobKey{"o", 7}, Spec: plan.Job{Procs: 4, Estimate: 1000, Deadline: plan.Forever},
					Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}, HoldSeconds: 60})
			}
			a.Ready()
			err = a.AddStanding(10, tc.rule, tc.displace)
			r := a.Ready()
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				if len(r.Decisions) != 0 {
					t.Fatalf("a refused rule decided %+v", r.Decisions)
				}
				if _, _, ok := a.Instances(tc.rule.Name); ok != (tc.rule.Name == "held") {
					t.Fatalf("a refused rule is held: %v", ok)
				}
				if ce, ok := errors.AsType[*ReservationConflict](err); ok && (!slices.Equal(ce.Jobs, tc.jobs) || !slices.Equal(ce.Running, tc.runs) || !slices.Equal(ce.Held, tc.holds)) {
					t.Fatalf("conflict %+v, want jobs %v running %v", ce, tc.jobs, tc.runs)
				}
			} else {
				var disp []bool
				for _, d := range r.Decisions {
					if d.Kind == DecideDisplaced {
						disp = append(disp, d.Placement.OK())
						if d.Fixed.Name != "r" || d.Job != waiting {
							t.Fatalf("displaced %+v", d)
						}
					}
				}
				if !slices.Equal(disp, tc.displaced) {
					t.Fatalf("displaced %v, want %v", disp, tc.displaced)
				}
				if k := r.Decisions[0].Kind; k != DecideStanding || r.Decisions[0].Standing.Name != "r" {
					t.Fatalf("first decision %v %+v, want the rule", k, r.Decisions[0].Standing)
				}
				// Laid as far as the rule held (a seventh of the 7-day
				// horizon beyond): 8 daily instances.
				if ws, _ := windows(t, a, "r"); len(ws) != 8 || ws[0].Start != tc.rule.Start {
					t.Fatalf("instances %v", ws)
				}
			}
			if res, ok := a.Site().Plan().Get(2); !ok || res.Start != tc.start {
				t.Fatalf("waiting job at %v (%v), want %d", res, ok, tc.start)
			}
		})
	}
}

// TestStandingAddedPlansAsHeld: jobs submitted after a rule added to an
// empty site are placed as with the rule held from the start, and as the
// rule's instances move out with time, the agent lays new ones.
func TestStandingAddedPlansAsHeld(t *testing.T) {
	held, err := New(Config{Name: "s", Procs: 8, Policy: plan.Conservative, Standing: []plan.Standing{daily("r")}})
	if err != nil {
		t.Fatal(err)
	}
	added, err := New(Config{Name: "s", Procs: 8, Policy: plan.Conservative})
	if err != nil {
		t.Fatal(err)
	}
	if err := added.AddStanding(0, daily("r"), false); err != nil {
		t.Fatal(err)
	}
	added.Ready()
	for i := range int64(40) {
		now := i * 9000
		j := plan.Job{Procs: 1 + int(i%8), Estimate: 3000 + (i%5)*40000, Deadline: plan.Forever}
		for _, a := range []*Agent{held, added} {
			a.Tick(now)
			a.Submit(now, i+1, j)
		}
		h, d := held.Ready().Decisions, added.Ready().Decisions
		if !slices.EqualFunc(h, d, func(x, y Decision) bool { return x.Kind == y.Kind && x.Job == y.Job && x.Placement == y.Placement }) {
			t.Fatalf("job %d: held %+v, added %+v", i+1, h, d)
		}
	}
	hw, _ := windows(t, held, "r")
	aw, _ := windows(t, added, "r")
	if !slices.Equal(hw, aw) || hw[0].End <= 39*9000 {
		t.Fatalf("instances held %v, added %v", hw, aw)
	}
}

// TestRemoveStanding: removing a rule frees its instances; the job
// planned after one starts earlier at the next pass.
func TestRemoveStanding(t *testing.T) {
	a, err := New(Config{Name: "s", Procs: 4, Policy: plan.Conservative, TrackMoves: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddStanding(0, plan.Standing{Name: "r", Procs: 4, Start: 0, Every: 86400, Length: 1000}, false); err != nil {
		t.Fatal(err)
	}
	a.Submit(0, 1, plan.Job{Procs: 2, Estimate: 500, Deadline: plan.Forever})
	a.Ready()
	if res, _ := a.Site().Plan().Get(1); res.Start != 1000 {
		t.Fatalf("job at %d, want after the instance (1000)", res.Start)
	}
	if a.RemoveStanding(10, "x") {
		t.Fatal("removed a rule that is not there")
	}
	if !a.RemoveStanding(10, "r") {
		t.Fatal("rule not removed")
	}
	a.Tick(10)
	r := a.Ready()
	if r.Decisions[0].Kind != DecideUnstanding || r.Decisions[0].Standing.Name != "r" {
		t.Fatalf("decisions %+v", r.Decisions)
	}
	if res, _ := a.Site().Plan().Get(1); res.Start != 10 {
		t.Fatalf("job at %d after the rule went, want 10", res.Start)
	}
	if len(a.Site().Fixed()) != 0 {
		t.Fatalf("instances left: %v", a.Site().Fixed())
	}
}

// TestRestoreStanding: the rules added at run time are journaled and laid
// again at Restore; an instance a running job is in is skipped; the
// restored agent places as the original.
func TestRestoreStanding(t *testing.T) {
	a, err := New(Config{Name: "s", Procs: 4, Policy: plan.Conservative})
	if err != nil {
		t.Fatal(err)
	}
	j := NewJournal()
	rec := func(now int64) {
		if err := j.Record(a, a.Ready(), now); err != nil {
			t.Fatal(err)
		}
	}
	a.Submit(0, 1, plan.Job{Procs: 4, Estimate: 200000, Deadline: plan.Forever}) // runs 0..200000, over two instances
	a.Tick(0)
	rec(0)
	if err := a.AddStanding(0, daily("r"), true); !errors.Is(err, plan.ErrConflict) {
		t.Fatalf("a rule over a running job: %v", err)
	}
	if err := a.AddStanding(0, plan.Standing{Name: "gone", Procs: 1, Start: 250000, Every: 86400, Length: 100}, false); err != nil {
		t.Fatal(err)
	}
	rec(0)
	if err := a.AddStanding(0, plan.Standing{Name: "r", Procs: 2, Start: 300000, Every: 86400, Length: 100}, false); err != nil {
		t.Fatal(err)
	}
	rec(0)
	a.RemoveStanding(0, "gone")
	rec(0)
	s := j.Saved()
	if !slices.Equal(slices.Sorted(maps.Keys(s.Standing)), []string{"r"}) {
		t.Fatalf("saved rules %v", s.Standing)
	}
	// The running job's kill time was extended over the rule's first two
	// instances in the store of a driver that does not know (a restart
	// finds it there).
	s.Jobs[JobKey{"s", 1}].End = 400000
	b, err := Restore(Config{Name: "s", Procs: 4, Policy: plan.Conservative}, 10, s)
	if err != nil {
		t.Fatal(err)
	}
	ws, skipped := windows(t, b, "r")
	if skipped != 2 || ws[0].Start != 300000+2*86400 {
		t.Fatalf("restored instances %v, skipped %d: want the first two skipped", ws, skipped)
	}
	if _, _, ok := b.Instances("gone"); ok {
		t.Fatal("a removed rule restored")
	}
	b.Ready()
	for _, x := range []*Agent{a, b} {
		x.Submit(20, 2, plan.Job{Procs: 3, Estimate: 86000, Deadline: plan.Forever})
		pl := x.Ready().Decisions[0].Placement
		xw, _ := windows(t, x, "r")
		run, _ := x.Site().Plan().Get(1)
		if !pl.OK() || pl.Start < run.End || slices.ContainsFunc(xw, func(w plan.Window) bool { return w.Start < pl.End && pl.Start < w.End }) {
			t.Fatalf("placed at %+v, running job to %d, instances %v", pl, run.End, xw)
		}
	}
	if _, err := Restore(Config{Name: "s", Procs: 4, Policy: plan.Conservative, Standing: []plan.Standing{daily("r")}}, 10, j.Saved()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a saved rule also in the configuration: %v", err)
	}
}
