package store

import (
	"context"
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// FuzzIndexedFields: whatever decodes as a job record, indexedFields reads
// the same state and user from it as the full decode.
func FuzzIndexedFields(f *testing.F) {
	good, err := encodeJobRecord(job("f-1", "alice", fedschedv1.JobState_JOB_STATE_RUNNING))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	// The job field twice: the two occurrences merge, so the state and
	// the user of the second win.
	second, err := encodeJobRecord(job("f-1", "bob", fedschedv1.JobState_JOB_STATE_COMPLETED))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(append([]byte{}, good...), second[1:]...))
	// A later job field without state or spec leaves them as they were.
	f.Add(protowire.AppendBytes(protowire.AppendTag(append([]byte{}, good...), fieldRecordJob, protowire.BytesType),
		protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "f-1")))
	// Unknown fields of every wire type, before the job.
	unknown := []byte{recordFormat}
	unknown = protowire.AppendVarint(protowire.AppendTag(unknown, 90, protowire.VarintType), 7)
	unknown = protowire.AppendFixed32(protowire.AppendTag(unknown, 91, protowire.Fixed32Type), 7)
	unknown = protowire.AppendFixed64(protowire.AppendTag(unknown, 92, protowire.Fixed64Type), 7)
	f.Add(append(unknown, good[1:]...))
	f.Add(good[:len(good)/2])
	f.Add([]byte{1, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeJobRecord(b)
		if err != nil {
			return
		}
		state, user, err := indexedFields(b)
		if err != nil {
			t.Fatalf("indexedFields: %v, but the record decodes", err)
		}
		if state != rec.Job.GetState() || user != rec.Job.GetSpec().GetUser() {
			t.Fatalf("indexedFields: %v %q, the record says %v %q", state, user, rec.Job.GetState(), rec.Job.GetSpec().GetUser())
		}
	})
}

func TestIndexedFieldsRejectsGarbage(t *testing.T) {
	for name, b := range map[string][]byte{"empty": {}, "format": {2, 0x0a, 0x00}, "truncated": {1, 0x0a, 0x05, 0x10}} {
		if _, _, err := indexedFields(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestRewriteMovesIndexKeys: rewriting a job leaves exactly its new state
// and user in the indexes (the keys of the version it replaces, read by
// indexedFields, are removed; a key that stays the same and went missing
// is written again).
func TestRewriteMovesIndexKeys(t *testing.T) {
	s, err := OpenBolt(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	steps := []JobRecord{
		job("j-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING),
		job("j-1", "alice", fedschedv1.JobState_JOB_STATE_RUNNING),
		job("j-1", "bob", fedschedv1.JobState_JOB_STATE_COMPLETED),
		job("j-1", "bob", fedschedv1.JobState_JOB_STATE_COMPLETED), // its index keys deleted first (below)
	}
	for i, rec := range steps {
		if i == 3 {
			err := s.db.Update(func(tx *bolt.Tx) error {
				if err := tx.Bucket(bucketJobsByState).Delete(stateKey(rec.Job.GetState(), "j-1")); err != nil {
					return err
				}
				return tx.Bucket(bucketJobsByUser).Delete(userKey("bob", "j-1"))
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Apply(ctx, Changes{PutJobs: []JobRecord{rec}}); err != nil {
			t.Fatal(err)
		}
		err := s.db.View(func(tx *bolt.Tx) error {
			for _, ix := range []struct {
				name []byte
				want []byte
			}{{bucketJobsByState, stateKey(rec.Job.GetState(), "j-1")}, {bucketJobsByUser, userKey(rec.Job.GetSpec().GetUser(), "j-1")}} {
				var keys []string
				if err := tx.Bucket(ix.name).ForEach(func(k, _ []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
					return err
				}
				if len(keys) != 1 || keys[0] != string(ix.want) {
					t.Errorf("after writing %v of %s: %s holds %q, want only %q", rec.Job.GetState(), rec.Job.GetSpec().GetUser(), ix.name, keys, ix.want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
