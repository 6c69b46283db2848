package store

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func sameStanding(a, b StandingRecord) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Procs == b.Procs && a.Start.Equal(b.Start) && a.End.Equal(b.End) &&
		a.EverySeconds == b.EverySeconds && a.Until.Equal(b.Until) && slices.Equal(a.Weekdays, b.Weekdays)
}

func TestStanding(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		a := StandingRecord{ID: "s.r000000000002", Name: "maintenance", Procs: 8, Start: t0, End: t0.Add(time.Hour),
			EverySeconds: 86400, Until: t0.Add(30 * 24 * time.Hour), Weekdays: []time.Weekday{time.Monday, time.Sunday}}
		b := StandingRecord{ID: "s.r000000000001", Name: "course", Procs: 2, Start: t0, End: t0.Add(2 * time.Hour), EverySeconds: 7 * 86400}
		// A fixed reservation and a rule go in one transaction.
		fixed := ReservationRecord{ID: "s.r000000000003", Procs: 1, Start: t0, End: t0.Add(time.Minute), Fixed: true, Note: "x"}
		if err := s.Apply(ctx, Changes{PutStanding: []StandingRecord{a, b}, PutReservations: []ReservationRecord{fixed}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetStanding(ctx, a.ID)
		if err != nil || !sameStanding(got, a) {
			t.Fatalf("GetStanding = %+v, %v", got, err)
		}
		list, err := s.ListStanding(ctx)
		if err != nil || len(list) != 2 || !sameStanding(list[0], b) || !sameStanding(list[1], a) {
			t.Fatalf("ListStanding = %+v, %v", list, err)
		}
		if got, err := s.GetReservation(ctx, fixed.ID); err != nil || !sameReservation(got, fixed) {
			t.Fatalf("fixed reservation = %+v, %v", got, err)
		}
		if err := s.Apply(ctx, Changes{DeleteStanding: []string{a.ID}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetStanding(ctx, a.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted rule: %v", err)
		}
		for name, bad := range map[string]Changes{
			"no id":       {PutStanding: []StandingRecord{{EverySeconds: 60}}},
			"no period":   {PutStanding: []StandingRecord{{ID: "x"}}},
			"bad weekday": {PutStanding: []StandingRecord{{ID: "x", EverySeconds: 60, Weekdays: []time.Weekday{9}}}},
			"delete ''":   {DeleteStanding: []string{""}},
		} {
			if err := s.Apply(ctx, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		if list, _ := s.ListStanding(ctx); len(list) != 1 {
			t.Fatalf("invalid changes wrote something: %+v", list)
		}
	})
}

// writeV3 lays out a schema v3 file by hand, as fedsched wrote it before
// standing reservations: the v1 buckets, the v2 indexes, the v3 agreements,
// with one fixed reservation.
func writeV3(t *testing.T, dir string, fixed ReservationRecord) {
	t.Helper()
	db, err := bolt.Open(Path(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"meta", "jobs", "reservations", "sla", "stats", "idempotency", "jobs_by_state", "jobs_by_user", "agreements"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte("meta")).Put([]byte("schema_version"), []byte("3")); err != nil {
			return err
		}
		v, err := encodeReservation(fixed)
		if err != nil {
			return err
		}
		return tx.Bucket([]byte("reservations")).Put([]byte(fixed.ID), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMigrateV3ToV4(t *testing.T) {
	dir := t.TempDir()
	fixed := ReservationRecord{ID: "m.r000000000001", Procs: 4, Start: t0, End: t0.Add(time.Hour), Fixed: true, Note: "maintenance"}
	writeV3(t, dir, fixed)
	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if v, err := s.SchemaVersion(ctx); err != nil || v != 4 || CurrentSchemaVersion != 4 {
		t.Fatalf("SchemaVersion after migration = %d, %v", v, err)
	}
	// The fixed reservation is untouched; the standing bucket is there,
	// empty and usable.
	if got, err := s.GetReservation(ctx, fixed.ID); err != nil || !sameReservation(got, fixed) {
		t.Fatalf("fixed reservation after migration = %+v, %v", got, err)
	}
	if list, err := s.ListStanding(ctx); err != nil || len(list) != 0 {
		t.Fatalf("standing after migration: %v, %v", list, err)
	}
	rule := StandingRecord{ID: "m.r000000000002", Procs: 2, Start: t0, End: t0.Add(time.Hour), EverySeconds: 86400}
	if err := s.Apply(ctx, Changes{PutStanding: []StandingRecord{rule}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetStanding(ctx, rule.ID); err != nil || !sameStanding(got, rule) {
		t.Fatalf("rule round trip: %+v, %v", got, err)
	}
	// The backup is the v3 file, without the new bucket.
	backups, _ := filepath.Glob(Path(dir) + ".v3.*.bak")
	if len(backups) != 1 {
		t.Fatalf("backups: %v", backups)
	}
	old, err := bolt.Open(backups[0], 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.View(func(tx *bolt.Tx) error {
		if v, err := schemaVersion(tx); err != nil || v != 3 {
			t.Errorf("backup schema version = %d, %v", v, err)
		}
		if tx.Bucket(bucketStanding) != nil {
			t.Error("backup has the v4 bucket")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeStandingNeverPanics(t *testing.T) {
	good, err := encodeStanding(StandingRecord{ID: "x", EverySeconds: 60, Weekdays: []time.Weekday{time.Friday}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(good) + 1 {
		for _, b := range [][]byte{good[:i], append(append([]byte{}, good[:i]...), 0xff, 0x01)} {
			if _, err := decodeStanding(b); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Errorf("decode %x: %v does not wrap ErrCorrupt", b, err)
			}
		}
	}
}
