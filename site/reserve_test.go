package site

import (
	"errors"
	"slices"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// TestReserve: an operator's fixed reservation made while work is planned
// decides as a node's CreateReservation does.
func TestReserve(t *testing.T) {
	waiting, running := JobKey{"s", 2}, JobKey{"s", 1}
	peerJob := JobKey{"o", 7}
	for _, tc := range []struct {
		name     string
		deadline int64 // of the waiting job (0: none)
		peer     bool  // the waiting job is a peer's
		held     bool  // a hold for a peer's quote instead of the waiting job
		f        plan.FixedSpec
		displace bool
		// want: the error (nil: made), the conflict's lists, and the
		// decisions about the waiting job.
		err               error
		jobs, runs, holds []JobKey
		displaced         []bool // Placement.OK() of each DecideDisplaced
		report            bool   // a report of the dropped job to its origin
		start             int64  // the waiting job's start after it
	}{
		{name: "free", f: plan.FixedSpec{Procs: 4, Start: 3000, End: 3100}, start: 1000},
		{name: "waiting job in the way", f: plan.FixedSpec{Procs: 4, Start: 1200, End: 1300},
			err: plan.ErrConflict, jobs: []JobKey{waiting}, start: 1000},
		{name: "displaced and placed again", f: plan.FixedSpec{Procs: 4, Start: 1200, End: 1300}, displace: true,
			displaced: []bool{true}, start: 1300},
		{name: "displaced and dropped", deadline: 1700, f: plan.FixedSpec{Procs: 4, Start: 1200, End: 1300}, displace: true,
			displaced: []bool{false}},
		{name: "a peer's job displaced and dropped", deadline: 1700, peer: true, f: plan.FixedSpec{Procs: 4, Start: 1200, End: 1300}, displace: true,
			displaced: []bool{false}, report: true},
		{name: "running job in the way", f: plan.FixedSpec{Procs: 4, Start: 500, End: 600}, displace: true,
			err: plan.ErrConflict, jobs: []JobKey{running}, runs: []JobKey{running}, start: 1000},
		{name: "hold for a peer in the way", held: true, f: plan.FixedSpec{Procs: 4, Start: 1200, End: 1300}, displace: true,
			err: plan.ErrConflict, jobs: []JobKey{peerJob}, holds: []JobKey{peerJob}},
		{name: "fixed reservation in the way", f: plan.FixedSpec{Procs: 1, Start: 5050, End: 5060}, displace: true, err: plan.ErrNoFit, start: 1000},
		{name: "over", f: plan.FixedSpec{Procs: 1, Start: 0, End: 10}, err: plan.ErrInvalid, start: 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(Config{Name: "s", Procs: 4, Policy: plan.Conservative, Fixed: []plan.FixedSpec{{ID: -1, Procs: 4, Start: 5000, End: 5100}}})
			if err != nil {
				t.Fatal(err)
			}
			a.Submit(0, 1, plan.Job{Procs: 4, Estimate: 1000, Deadline: plan.Forever}) // runs 0..1000
			a.Tick(0)
			dl := plan.Forever
			if tc.deadline > 0 {
				dl = tc.deadline
			}
			spec := plan.Job{Procs: 4, Estimate: 500, Deadline: dl}
			route := delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}
			switch {
			case tc.held:
				a.Step(0, Message{Kind: KindQuoteRequest, From: "o", To: "s", Job: peerJob, Spec: spec, Route: route, HoldSeconds: 60})
			case tc.peer:
				a.Step(0, Message{Kind: KindQuoteRequest, From: "o", To: "s", Job: peerJob, Spec: spec, Route: route, HoldSeconds: 60})
				a.Step(0, agreeTo(a, "o", peerJob))
				waiting = peerJob
			default:
				a.Submit(0, 2, spec)
				waiting = JobKey{"s", 2}
			}
			a.Ready()
			id, err := a.Reserve(10, tc.f, tc.displace)
			r := a.Ready()
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				if len(r.Decisions) != 0 {
					t.Fatalf("a refused reservation decided %+v", r.Decisions)
				}
				var ce *ReservationConflict
				if errors.As(err, &ce) && (!slices.Equal(ce.Jobs, tc.jobs) || !slices.Equal(ce.Running, tc.runs) || !slices.Equal(ce.Held, tc.holds)) {
					t.Fatalf("conflict %+v, want jobs %v running %v held %v", ce, tc.jobs, tc.runs, tc.holds)
				}
			} else {
				if id >= -1 || r.Decisions[0].Kind != DecideReserve || r.Decisions[0].Fixed.ID != id {
					t.Fatalf("id %d, decisions %+v", id, r.Decisions)
				}
				var ok []bool
				for _, d := range r.Decisions[1:] {
					if d.Kind == DecideReport && tc.report {
						continue
					}
					if d.Kind != DecideDisplaced || d.Job != waiting || d.Fixed.ID != id {
						t.Fatalf("decision %+v", d)
					}
					ok = append(ok, d.Placement.OK())
				}
				if !slices.Equal(ok, tc.displaced) {
					t.Fatalf("displaced %v, want %v", ok, tc.displaced)
				}
			}
			reported := slices.ContainsFunc(r.Messages, func(m Message) bool {
				return m.Kind == KindReport && m.Job == peerJob && m.Outcome.Dropped && m.To == "o"
			})
			if reported != tc.report {
				t.Fatalf("report to the origin %v, want %v: %+v", reported, tc.report, r.Messages)
			}
			if tc.held {
				return
			}
			jb := a.jobs[waiting]
			if tc.start == 0 {
				if jb != nil {
					t.Fatal("a dropped job is still kept")
				}
				return
			}
			pl, in := a.Site().Placement(jb.pj.ID)
			if !in || pl.Start != tc.start {
				t.Fatalf("the waiting job starts at %d (in the plan %v), want %d", pl.Start, in, tc.start)
			}
		})
	}
}

// TestUnreserve: an operator's reservation goes, and the work planned
// after it moves earlier; only reservations Reserve made can be removed,
// and a restored agent keeps them (and names new ones afresh).
func TestUnreserve(t *testing.T) {
	cfg := Config{Name: "s", Procs: 4, Policy: plan.Conservative, TrackMoves: true, Fixed: []plan.FixedSpec{{ID: -1, Procs: 4, Start: 5000, End: 5100}}}
	a, _ := New(cfg)
	x := &journaled{t: t, a: a, j: NewJournal()}
	a.Submit(0, 1, plan.Job{Procs: 4, Estimate: 1000, Deadline: plan.Forever})
	a.Tick(0)
	id, err := a.Reserve(0, plan.FixedSpec{Procs: 4, Start: 1000, End: 2000}, false)
	if err != nil {
		t.Fatal(err)
	}
	a.Submit(0, 2, plan.Job{Procs: 4, Estimate: 500, Deadline: plan.Forever}) // after it: 2000
	x.flush(0)
	b, err := Restore(cfg, 0, x.j.Saved())
	if err != nil {
		t.Fatal(err)
	}
	b.Ready()
	if got := len(b.Site().Fixed()); got != 2 {
		t.Fatalf("the restored plan has %d fixed reservations, want 2", got)
	}
	if id2, err := b.Reserve(0, plan.FixedSpec{Procs: 1, Start: 6000, End: 6100}, false); err != nil || id2 >= id {
		t.Fatalf("a new reservation after the restore: id %d (the saved one is %d), %v", id2, id, err)
	}
	b.Ready()
	for _, ag := range []*Agent{a, b} {
		if ag.Unreserve(0, -1) {
			t.Fatal("a configured reservation was removed")
		}
		if !ag.Unreserve(10, id) || ag.Unreserve(10, id) {
			t.Fatal("unreserve did not remove it once")
		}
		ag.Tick(10)
		r := ag.Ready()
		i := slices.IndexFunc(r.Decisions, func(d Decision) bool { return d.Kind == DecideMove && d.Job == (JobKey{"s", 2}) })
		if r.Decisions[0].Kind != DecideUnreserve || r.Decisions[0].Fixed.ID != id || i < 0 || r.Decisions[i].Placement.Start != 1000 {
			t.Fatalf("after the unreserve: %+v", r.Decisions)
		}
	}
}
