package store

import (
	"errors"
	"testing"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func FuzzDecodeJobRecord(f *testing.F) {
	good, err := encodeJobRecord(job("f-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2, 0x0a, 0x00})
	f.Add([]byte{1, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeJobRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if rec.ID() == "" {
			t.Fatal("decoded a job without an id")
		}
		// What decodes must encode again.
		if _, err := encodeJobRecord(rec); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":          {},
		"unknown format": {9, 1, 2, 3},
		"bad protobuf":   {1, 0xff},
		"no job":         {1},
	} {
		if _, err := decodeJobRecord(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
