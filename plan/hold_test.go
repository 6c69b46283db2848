package plan

import (
	"errors"
	"testing"
)

func TestHolds(t *testing.T) {
	for _, pol := range []Policy{Conservative, EASY} {
		t.Run(pol.String(), func(t *testing.T) {
			s, err := NewSite(Config{Procs: 4, Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			job := func(id int64) Job { return Job{ID: id, Procs: 4, Estimate: 10, Deadline: Forever} }
			// A held slot is taken: a second hold for the whole site must
			// go elsewhere (conservative) or is refused (queue policies).
			p1 := s.Hold(0, job(1), 5)
			if !p1.OK() || p1.Start != 0 {
				t.Fatalf("hold 1: %+v", p1)
			}
			p2 := s.Hold(0, job(2), 5)
			if pol == Conservative && (!p2.OK() || p2.Start != 10) || pol != Conservative && p2.OK() {
				t.Fatalf("hold 2: %+v", p2)
			}
			if got := s.NextWake(0); got != 5 {
				t.Fatalf("NextWake = %d, want the hold expiry 5", got)
			}
			// Confirming an unknown hold fails; confirming hold 1 makes
			// it an accepted job that starts.
			if _, err := s.Confirm(1, 99); !errors.Is(err, ErrUnknownReservation) {
				t.Fatalf("confirm unknown: %v", err)
			}
			if _, err := s.Confirm(1, 1); err != nil {
				t.Fatal(err)
			}
			ds := s.Pass(1)
			if pol == Conservative {
				// Its reservation began at 0: it starts at the first pass.
				if len(ds) != 1 || ds[0].JobID != 1 {
					t.Fatalf("decisions %+v", ds)
				}
			} else if len(ds) != 1 || ds[0].JobID != 1 || ds[0].Start != 1 {
				t.Fatalf("decisions %+v", ds)
			}
			// Hold 2 (conservative only) expires at 5 and frees its slot.
			if pol == Conservative {
				s.Pass(5)
				if _, err := s.Confirm(5, 2); !errors.Is(err, ErrUnknownReservation) {
					t.Fatalf("confirm after expiry: %v", err)
				}
				if s.Holds() != 0 {
					t.Fatalf("%d holds left", s.Holds())
				}
				checkInvariants(t, s.Plan())
				if _, ok := s.Plan().Get(2); ok {
					t.Fatal("expired hold still in the plan")
				}
			}
			// Unhold drops a hold at once.
			p3 := s.Hold(20, job(3), 100)
			if !p3.OK() || !s.Unhold(20, 3) || s.Unhold(20, 3) {
				t.Fatalf("unhold: %+v", p3)
			}
			if _, ok := s.Plan().Get(3); ok {
				t.Fatal("unheld slot still in the plan")
			}
		})
	}
}

func TestConfirmExpiredHold(t *testing.T) {
	s, _ := NewSite(Config{Procs: 2})
	if !s.Hold(0, Job{ID: 1, Procs: 1, Estimate: 5, Deadline: Forever}, 10).OK() {
		t.Fatal("hold refused")
	}
	if _, err := s.Confirm(10, 1); !errors.Is(err, ErrHoldExpired) {
		t.Fatalf("confirm at expiry: %v", err)
	}
	if s.Plan().Len() != 0 {
		t.Fatal("expired hold kept its slot")
	}
}

// TestFixedNeverDisplacesHolds checks that a fixed reservation with
// displace refuses to take the slot of a hold backing a quote, as it does
// for a running job: the hold stays exactly where it was.
func TestFixedNeverDisplacesHolds(t *testing.T) {
	s, _ := NewSite(Config{Procs: 2})
	if !s.Hold(0, Job{ID: 1, Procs: 2, Estimate: 100, Deadline: Forever}, 50).OK() {
		t.Fatal("hold refused")
	}
	_, err := s.AddFixed(0, FixedSpec{ID: -1, Procs: 2, Start: 10, End: 20}, true)
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Running) != 1 || ce.Running[0] != 1 {
		t.Fatalf("AddFixed over a hold: %v", err)
	}
	if _, err := s.Confirm(1, 1); err != nil {
		t.Fatalf("the hold was disturbed: %v", err)
	}
	checkInvariants(t, s.Plan())
}
