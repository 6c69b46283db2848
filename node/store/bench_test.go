package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// BenchmarkBoltPutJob measures durable job writes: one writer after another
// (the event loop) and many at once (concurrent submissions), with bbolt's
// default batch delay and a short one.
func BenchmarkBoltPutJob(b *testing.B) {
	for _, delay := range []time.Duration{10 * time.Millisecond, DefaultMaxBatchDelay} {
		for _, parallel := range []bool{false, true} {
			b.Run(fmt.Sprintf("delay=%v/parallel=%v", delay, parallel), func(b *testing.B) {
				s, err := OpenBolt(b.TempDir(), &Options{MaxBatchDelay: delay})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				var n atomic.Int64
				put := func() {
					id := fmt.Sprintf("b.%012d", n.Add(1))
					if err := s.PutJob(ctx, job(id, "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
						b.Error(err)
					}
				}
				b.ResetTimer()
				if parallel {
					b.SetParallelism(16)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							put()
						}
					})
					return
				}
				for b.Loop() {
					put()
				}
			})
		}
	}
}
