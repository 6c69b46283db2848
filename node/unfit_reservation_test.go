package node_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestUnfitReservationDeleted: a fixed reservation that no longer fits the
// plan after the site restarted smaller is listed with its problem, the
// operator can delete it, and the deletion is durable: restarted at its old
// size, the site does not hold the processors again.
func TestUnfitReservationDeleted(t *testing.T) {
	st := store.NewMemStore()
	cfg := testConfig(t.TempDir())
	s := startSite(t, cfg, st)
	ctx := context.Background()
	start := timestampAfter(s.clk, 48*time.Hour)
	res, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "wide", Procs: 8, Start: start,
		End: timestamppb.New(start.AsTime().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetReservation().GetId()
	s.stop(t)

	cfg.Procs = 4
	s = startSite(t, cfg, st)
	got, err := s.client.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: id})
	if err != nil {
		t.Fatalf("delete of a reservation that no longer fits: %v", err)
	}
	if got.GetReservation().GetId() != id || got.GetReservation().GetProblem() == "" {
		t.Errorf("deleted %v, want %s with its problem", got.GetReservation(), id)
	}
	for _, x := range listRes(t, s.client) {
		if x.GetId() == id {
			t.Errorf("deleted reservation still listed: %v", x)
		}
	}
	if _, err := s.client.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: id}); err == nil {
		t.Error("second delete succeeded; want NotFound")
	}
	s.stop(t)

	cfg.Procs = 8
	s = startSite(t, cfg, st)
	defer s.stop(t)
	for _, x := range listRes(t, s.client) {
		if x.GetId() == id {
			t.Errorf("deleted reservation back after a restart: %v", x)
		}
	}
}

// TestUnfitReservationTidied: the record of a reservation left out of the
// plan is removed from the store when its end passes, as a held one's is.
func TestUnfitReservationTidied(t *testing.T) {
	st := store.NewMemStore()
	clk := clock.NewManual(monday)
	cfg := testConfig(t.TempDir())
	s := startManual(t, cfg, st, clk, 0)
	ctx := context.Background()
	if _, err := s.client.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "wide", Procs: 8, Start: at(time.Hour), End: at(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	cfg.Procs = 4
	s = startManual(t, cfg, st, clk, 0)
	defer s.stop(t)
	if len(listRes(t, s.client)) != 1 {
		t.Fatal("the reservation that no longer fits is not listed")
	}
	clk.Advance(3 * time.Hour)
	// A job's submission is a turn of the loop after the end.
	submitAt(t, s.client, 1, time.Minute, 0, 0)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		recs, err := st.ListReservations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range recs {
			if r.Fixed {
				n++
			}
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fixed reservation records left in the store after the end", n)
		}
	}
}
