package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func TestBoltSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != filepath.Join(dir, "fedsched.db") {
		t.Fatalf("Path = %s", s.Path())
	}
	a := job("a-1", "alice", fedschedv1.JobState_JOB_STATE_RUNNING)
	if _, _, err := s.PutJobIfNewKey(ctx, "k", []byte("h"), a); err != nil {
		t.Fatal(err)
	}
	n1, _ := s.NextSequence(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.GetJob(ctx, "a-1")
	if err != nil {
		t.Fatal(err)
	}
	a.IdempotencyKey, a.BodyHash = "k", []byte("h")
	sameJob(t, got, a)
	if _, created, err := s.PutJobIfNewKey(ctx, "k", []byte("h"), job("a-2", "alice", 1)); err != nil || created {
		t.Fatalf("retry after restart: created=%v err=%v", created, err)
	}
	if n2, _ := s.NextSequence(ctx); n2 <= n1 {
		t.Fatalf("sequence went back after restart: %d then %d", n1, n2)
	}
	page, _, err := s.ListJobs(ctx, JobQuery{States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_RUNNING}})
	if err != nil || len(page) != 1 {
		t.Fatalf("running jobs after restart: %v %v", page, err)
	}
}

func TestBoltSecondOpenFailsFast(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = OpenBolt(dir, &Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the data dir", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second open took %v", d)
	}
}

func TestBoltCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.PutJob(ctx, job("a-1", "alice", 1)); err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).Put([]byte("a-1"), []byte{1, 0xff, 0xff, 0xff})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetJob(ctx, "a-1"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetJob(corrupt) = %v, want ErrCorrupt", err)
	}
	if _, _, err := s.ListJobs(ctx, JobQuery{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ListJobs over a corrupt record = %v, want ErrCorrupt", err)
	}
	// A corrupt job can still be overwritten or deleted.
	if err := s.PutJob(ctx, job("a-1", "alice", 2)); err != nil {
		t.Fatalf("overwrite corrupt job: %v", err)
	}
	if err := s.DeleteJob(ctx, "a-1"); err != nil {
		t.Fatalf("delete job: %v", err)
	}
	s.Close()
}

func TestBoltRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return setSchemaVersion(tx, CurrentSchemaVersion+1) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenBolt(dir, nil); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("open newer schema = %v, want ErrSchemaTooNew", err)
	}
}

func TestBoltRefusesForeignFile(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(Path(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenBolt(dir, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open a bbolt file of something else = %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(Path(dir)); err != nil {
		t.Fatal(err)
	}
}
