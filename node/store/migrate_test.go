package store

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// writeV1 lays out a schema v1 file by hand, as fedsched v1 wrote it: the six
// buckets and no indexes.
func writeV1(t *testing.T, dir string, jobs []JobRecord) {
	t.Helper()
	db, err := bolt.Open(Path(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{[]byte("meta"), []byte("jobs"), []byte("reservations"), []byte("sla"), []byte("stats"), []byte("idempotency")} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte("meta")).Put([]byte("schema_version"), []byte("1")); err != nil {
			return err
		}
		for _, j := range jobs {
			v, err := encodeJobRecord(j)
			if err != nil {
				return err
			}
			if err := tx.Bucket([]byte("jobs")).Put([]byte(j.ID()), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMigrateV1ToCurrent(t *testing.T) {
	P, R := fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING
	dir := t.TempDir()
	writeV1(t, dir, []JobRecord{
		job("m.001", "alice", P),
		job("m.002", "bob", R),
		job("m.003", "alice", R),
	})

	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if v, err := s.SchemaVersion(ctx); err != nil || v != CurrentSchemaVersion {
		t.Fatalf("SchemaVersion after migration = %d, %v", v, err)
	}
	// v3 added the agreements bucket: it is there and empty, and usable.
	if as, err := s.ListAgreements(ctx); err != nil || len(as) != 0 {
		t.Fatalf("agreements after migration: %v %v", as, err)
	}
	if err := s.Apply(ctx, Changes{PutAgreements: []AgreementRecord{{ID: "a1", Body: []byte(`{"x":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.GetAgreement(ctx, "a1"); err != nil || string(a.Body) != `{"x":1}` {
		t.Fatalf("agreement round trip: %v %v", a, err)
	}
	// The indexes exist and were built from the v1 jobs.
	cases := map[string]struct {
		q    JobQuery
		want []string
	}{
		"running":       {JobQuery{States: []fedschedv1.JobState{R}}, []string{"m.002", "m.003"}},
		"alice":         {JobQuery{User: "alice"}, []string{"m.001", "m.003"}},
		"alice running": {JobQuery{User: "alice", States: []fedschedv1.JobState{R}}, []string{"m.003"}},
	}
	for name, c := range cases {
		page, _, err := s.ListJobs(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, r := range page {
			got = append(got, r.ID())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", name, got, c.want)
		}
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketJobsByState).Stats().KeyN != 3 || tx.Bucket(bucketJobsByUser).Stats().KeyN != 3 {
			t.Errorf("index sizes: state %d, user %d; want 3 and 3",
				tx.Bucket(bucketJobsByState).Stats().KeyN, tx.Bucket(bucketJobsByUser).Stats().KeyN)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The backup is the untouched v1 file.
	backups, _ := filepath.Glob(Path(dir) + ".v1.*.bak")
	if len(backups) != 1 {
		t.Fatalf("backups: %v", backups)
	}
	old, err := bolt.Open(backups[0], 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.View(func(tx *bolt.Tx) error {
		if v, err := schemaVersion(tx); err != nil || v != 1 {
			t.Errorf("backup schema version = %d, %v", v, err)
		}
		if tx.Bucket(bucketJobsByState) != nil {
			t.Error("backup has the v2 index")
		}
		if n := tx.Bucket(bucketJobs).Stats().KeyN; n != 3 {
			t.Errorf("backup has %d jobs", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Opening again does not migrate (nor back up) again.
	s.Close()
	s2, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if b, _ := filepath.Glob(Path(dir) + ".v1.*.bak"); len(b) != 1 {
		t.Fatalf("reopening made more backups: %v", b)
	}
}

func TestMigrationsChain(t *testing.T) {
	for i, m := range migrations {
		if m.to != m.from+1 {
			t.Errorf("migration %d (%s) goes from v%d to v%d", i, m.name, m.from, m.to)
		}
		if i > 0 && m.from != migrations[i-1].to {
			t.Errorf("migration %d (%s) does not follow the previous one", i, m.name)
		}
	}
	if last := migrations[len(migrations)-1].to; last != CurrentSchemaVersion {
		t.Errorf("migrations end at v%d, CurrentSchemaVersion is %d", last, CurrentSchemaVersion)
	}
}
