package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// fillJobs opens a store in dir, writes n jobs one commit each, and closes
// it.
func fillJobs(t *testing.T, dir string, n int) {
	t.Helper()
	s, err := OpenBolt(dir, &Options{MaxBatchDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.PutJob(context.Background(), job(fmt.Sprintf("j-%03d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// damageNewestMeta flips a byte of the transaction id in the meta page
// with the higher id: its checksum no longer matches, and bbolt opens the
// file at the transaction before, without a word.
func damageNewestMeta(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const txidOff = 16 + 4 + 4 + 4 + 4 + 16 + 8 + 8 // page header, then meta up to txid
	pageSize := int(binary.LittleEndian.Uint32(b[16+8:]))
	off := txidOff
	if binary.LittleEndian.Uint64(b[pageSize+txidOff:]) > binary.LittleEndian.Uint64(b[txidOff:]) {
		off = pageSize + txidOff
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{b[off] ^ 0x55}, int64(off)); err != nil {
		t.Fatal(err)
	}
}

// TestBoltDetectsMetaRollback: with the newest meta page damaged, bbolt
// would silently serve the previous transaction (19 of 20 acknowledged
// jobs). Defect 12: the store must refuse to open, and say what to do.
func TestBoltDetectsMetaRollback(t *testing.T) {
	dir := t.TempDir()
	fillJobs(t, dir, 20)
	damageNewestMeta(t, Path(dir))
	_, err := OpenBolt(dir, nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open after a damaged meta page = %v, want ErrCorrupt", err)
	}
	for _, want := range []string{"committed writes were lost", "fedsched check", "backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The read-only check says the same, without failing to open.
	s, err := OpenBolt(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := s.Check(context.Background())
	s.Close()
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "committed writes were lost") {
		t.Fatalf("Check = %q, %v; want the rollback", problems, err)
	}
	// Deleting the mark accepts the loss: the store opens with 19 jobs.
	if err := os.Remove(Path(dir) + MarkSuffix); err != nil {
		t.Fatal(err)
	}
	s, err = OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs, _, err := s.ListJobs(context.Background(), JobQuery{})
	if err != nil || len(jobs) != 19 {
		t.Fatalf("after accepting the loss: %d jobs, %v; want 19", len(jobs), err)
	}
}

// TestBoltTornMarkSlot: a torn write of one slot of the mark leaves the
// other; the mark is then one transaction behind, never ahead.
func TestBoltTornMarkSlot(t *testing.T) {
	dir := t.TempDir()
	fillJobs(t, dir, 3)
	path := Path(dir) + MarkSuffix
	_, before, _, err := openMark(path, true)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xde, 0xad}, int64(before%2)*markSlot+3) //nolint:errcheck // checked by the read below
	f.Close()
	_, after, valid, err := openMark(path, true)
	if err != nil || !valid || after != before-1 {
		t.Fatalf("mark after a torn slot = %d (valid %v, %v), want %d", after, valid, err, before-1)
	}
	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatalf("open with a torn mark slot: %v", err)
	}
	s.Close()
}

// TestBoltDamagedPageIsAnError: a damaged page under an open store makes
// bbolt panic in its read path; the store returns ErrCorrupt instead, and
// Check names the page. Defect 12: the node panicked.
func TestBoltDamagedPageIsAnError(t *testing.T) {
	dir := t.TempDir()
	fillJobs(t, dir, 200)
	s, err := OpenBolt(dir, &Options{MaxBatchDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var root uint64
	var pageSize int
	s.db.View(func(tx *bolt.Tx) error { //nolint:errcheck // cannot fail
		root, pageSize = uint64(tx.Bucket(bucketJobs).Root()), tx.DB().Info().PageSize
		return nil
	})
	if root == 0 {
		t.Fatal("jobs bucket is inline; the test needs its own pages")
	}
	f, err := os.OpenFile(Path(dir), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The page's flags (offset 8) become no known page type; the file is
	// mapped, so the open store sees it.
	if _, err := f.WriteAt([]byte{0xff, 0xff}, int64(root)*int64(pageSize)+8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx := context.Background()
	if _, err := s.GetJob(ctx, "j-100"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("GetJob on a damaged page = %v, want ErrCorrupt", err)
	}
	if _, _, err := s.ListJobs(ctx, JobQuery{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ListJobs on a damaged page = %v, want ErrCorrupt", err)
	}
	if err := s.PutJob(ctx, job("j-100", "bob", fedschedv1.JobState_JOB_STATE_RUNNING)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("PutJob on a damaged page = %v, want ErrCorrupt", err)
	}
	problems, err := s.Check(ctx)
	if err != nil || len(problems) == 0 {
		t.Fatalf("Check = %q, %v; want the damaged page", problems, err)
	}
}

func TestBoltCheck(t *testing.T) {
	dir := t.TempDir()
	fillJobs(t, dir, 5)
	s, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, _, err := s.PutJobIfNewKey(ctx, "k", []byte("h"), job("j-keyed", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
		t.Fatal(err)
	}
	if problems, err := s.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("Check of a sound store = %q, %v", problems, err)
	}
	// Damage behind the store's back: an undecodable job, a job missing
	// from its index, a key naming no job.
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketJobs).Put([]byte("j-001"), []byte{1, 0xff}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketJobsByUser).Delete(userKey("alice", "j-002")); err != nil {
			return err
		}
		return tx.Bucket(bucketJobs).Delete([]byte("j-keyed"))
	})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{`job "j-001"`, `job "j-002" missing from the user index`, `idempotency "k": names job "j-keyed"`} {
		if !strings.Contains(all, want) {
			t.Errorf("Check problems %q lack %q", all, want)
		}
	}
}
