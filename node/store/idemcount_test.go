package store

import (
	"context"
	"fmt"
	"testing"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestCountIdempotencyKeys: keys are counted by prefix (one user's keys,
// not those of a user whose name extends it), up to the limit, and keys
// written by Apply count like those of PutJobIfNewKey.
func TestCountIdempotencyKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var c Changes
		for i := range 5 {
			r := job(fmt.Sprintf("j-%d", i), "al", fedschedv1.JobState_JOB_STATE_PENDING)
			r.IdempotencyKey, r.BodyHash = fmt.Sprintf("al/k%d", i), []byte("h")
			c.PutJobs = append(c.PutJobs, r)
		}
		for i := range 3 {
			r := job(fmt.Sprintf("x-%d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)
			r.IdempotencyKey, r.BodyHash = fmt.Sprintf("alice/k%d", i), []byte("h")
			c.PutJobs = append(c.PutJobs, r)
		}
		if err := s.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PutJobIfNewKey(ctx, "alice/k9", []byte("h"), job("x-9", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			prefix string
			limit  int
			want   int
		}{
			{"al/", 0, 5},
			{"al/", 3, 3},
			{"al/", 5, 5},
			{"alice/", 0, 4},
			{"alice/", 100, 4},
			{"bob/", 0, 0},
			{"", 0, 9},
		} {
			got, err := s.CountIdempotencyKeys(ctx, tc.prefix, tc.limit)
			if err != nil || got != tc.want {
				t.Errorf("CountIdempotencyKeys(%q, %d) = %d, %v; want %d", tc.prefix, tc.limit, got, err, tc.want)
			}
		}
		if err := s.DeleteJob(ctx, "j-0"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.CountIdempotencyKeys(ctx, "al/", 0); err != nil || got != 4 {
			t.Errorf("after deleting a job: %d, %v; want 4", got, err)
		}
	})
}

// BenchmarkCountIdempotencyKeys is the node's check of
// limits.max_idempotency_keys for a user at the default limit (the worst
// case: a user with fewer keys costs less).
func BenchmarkCountIdempotencyKeys(b *testing.B) {
	s, err := OpenBolt(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const keys = 10000
	for lo := 0; lo < keys; lo += 1000 {
		var c Changes
		for i := lo; i < lo+1000; i++ {
			r := job(fmt.Sprintf("j-%06d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)
			r.IdempotencyKey, r.BodyHash = fmt.Sprintf("alice/key-%06d", i), []byte("h")
			c.PutJobs = append(c.PutJobs, r)
		}
		if err := s.Apply(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if n, err := s.CountIdempotencyKeys(ctx, "alice/", keys); err != nil || n != keys {
			b.Fatal(n, err)
		}
	}
}
