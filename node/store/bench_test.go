package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/types/known/timestamppb"

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

// BenchmarkCommitPages measures what one commit of the event loop writes
// as the store grows: a store holding `jobs` PENDING jobs (with their
// index entries and idempotency keys; a job's reservation is in its
// record) takes commits of 4 new RUNNING jobs each, as a turn of 4
// submissions that start at once writes them. Reported: the pages bbolt
// writes per commit (every dirtied B+tree node of the jobs, index and key
// buckets), and the pwrite calls. Deeper trees dirty more branch pages per
// commit.
func BenchmarkCommitPages(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("jobs=%dk", n/1000), func(b *testing.B) {
			s, err := OpenBolt(b.TempDir(), &Options{MaxBatchDelay: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			rec := func(k int, user, key string, state fedschedv1.JobState) JobRecord {
				r := job(fmt.Sprintf("s.%012d", k), user, state)
				r.IdempotencyKey, r.BodyHash = fmt.Sprintf("%s/%s-%d", user, key, k), make([]byte, 32)
				return r
			}
			for i := 0; i < n; i += 1000 {
				var c Changes
				for k := i; k < i+1000; k++ {
					r := rec(k, fmt.Sprintf("u%d", k%16), "fill", fedschedv1.JobState_JOB_STATE_PENDING)
					c.PutJobs = append(c.PutJobs, r)
				}
				if err := s.Apply(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			st0 := s.db.Stats()
			next := n
			b.ResetTimer()
			for range b.N {
				var c Changes
				for range 4 {
					r := rec(next, "alice", "run", fedschedv1.JobState_JOB_STATE_RUNNING)
					c.PutJobs = append(c.PutJobs, r)
					next++
				}
				if err := s.Apply(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			d := reportPages(b, s, st0)
			b.ReportMetric(float64(d.TxStats.GetWrite())/float64(b.N), "writes/commit")
		})
	}
}

// BenchmarkRewriteJobs measures a commit that rewrites 8 stored jobs (each
// moves from PENDING to RUNNING or back, as starts and re-planning do) in a
// store of 10k jobs: every rewrite removes the index keys of the version it
// replaces. Its B/op and allocs/op do not depend on the disk.
func BenchmarkRewriteJobs(b *testing.B) {
	s, err := OpenBolt(b.TempDir(), &Options{MaxBatchDelay: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const n = 10_000
	recs := make([]JobRecord, n)
	for i := 0; i < n; i += 1000 {
		var c Changes
		for k := i; k < i+1000; k++ {
			recs[k] = job(fmt.Sprintf("s.%012d", k), fmt.Sprintf("u%d", k%16), fedschedv1.JobState_JOB_STATE_PENDING)
			c.PutJobs = append(c.PutJobs, recs[k])
		}
		if err := s.Apply(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	st0 := s.db.Stats()
	b.ResetTimer()
	for i := range b.N {
		var c Changes
		for k := range 8 {
			r := recs[(i*8+k)*7919%n]
			r.Job.State = fedschedv1.JobState_JOB_STATE_RUNNING + fedschedv1.JobState_JOB_STATE_PENDING - r.Job.State
			c.PutJobs = append(c.PutJobs, r)
		}
		if err := s.Apply(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportPages(b, s, st0)
}

// reportPages reports the pages bbolt wrote per commit since st0, and
// returns the difference of the statistics.
func reportPages(b *testing.B, s *BoltStore, st0 bolt.Stats) bolt.Stats {
	st1 := s.db.Stats()
	d := st1.Sub(&st0)
	b.ReportMetric(float64(d.TxStats.GetPageCount())/float64(b.N), "pages/commit")
	return d
}

// BenchmarkFdatasync is the disk's part of a commit: one 4 KiB overwrite
// and fdatasync of a file in the directory the store would use, the unit
// bbolt pays twice per commit (its pages, then its meta page). Set TMPDIR
// to the data directory's file system to measure that one.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.CreateTemp(b.TempDir(), "fdatasync")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	if _, err := f.Write(make([]byte, 256*len(page))); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if _, err := f.WriteAt(page, int64(i%256*len(page))); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFdatasyncPages is BenchmarkFdatasync with more pages per sync:
// n 4 KiB pages overwritten at random places in a 1 MiB region (as
// bbolt's commit writes the B+tree pages it dirtied, each where the free
// list put it), or n adjacent ones, then one fdatasync. On the
// development machine's disk each run of adjacent pages costs about one
// page's sync (docs/PERFORMANCE.md, "Fewer pages per commit").
func BenchmarkFdatasyncPages(b *testing.B) {
	for _, c := range []struct {
		name     string
		n        int
		adjacent bool
	}{{"scattered=1", 1, false}, {"scattered=4", 4, false}, {"scattered=8", 8, false}, {"scattered=13", 13, false}, {"adjacent=13", 13, true}} {
		b.Run(c.name, func(b *testing.B) {
			f, err := os.CreateTemp(b.TempDir(), "fdatasync")
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const region = 256
			page := make([]byte, 4096)
			if _, err := f.Write(make([]byte, region*len(page))); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			rnd := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				at := rnd.IntN(region - c.n)
				for k := range c.n {
					if !c.adjacent {
						at = rnd.IntN(region)
					} else if k > 0 {
						at++
					}
					if _, err := f.WriteAt(page, int64(at*len(page))); err != nil {
						b.Fatal(err)
					}
				}
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSubmitCommit measures the commit of one turn of 8 submissions,
// as the node's event loop writes it (docs/PERFORMANCE.md, "Fewer pages
// per commit"): 8 new PENDING jobs, each with its reservation (in the job
// record) and its idempotency key, into a store that already holds 10k
// such jobs.
// keys=seq uses keys that sort in submission order (the node's benchmark
// clients), keys=time keys that sort by the millisecond they were made in
// and are random within it (the CLI's, newIdempotencyKey: 8 clients'
// keys of one commit share a millisecond), keys=random keys that do not
// sort at all (UUIDv4). Reported: the time of one commit, the pages bbolt
// writes per commit, and B/op and allocs/op.
func BenchmarkSubmitCommit(b *testing.B) {
	for _, keys := range []string{"seq", "time", "random"} {
		b.Run("keys="+keys, func(b *testing.B) {
			s, err := OpenBolt(b.TempDir(), &Options{MaxBatchDelay: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			rnd := rand.New(rand.NewPCG(1, 2))
			next := 0
			commit := func(n int) {
				var c Changes
				for range n {
					r := job(fmt.Sprintf("s.%012d", next), "alice", fedschedv1.JobState_JOB_STATE_PENDING)
					r.Job.Reservation = &fedschedv1.Reservation{Start: timestamppb.New(t0), End: timestamppb.New(t0.Add(time.Hour)), Procs: 4, Site: "site-a"}
					var key string
					switch keys {
					case "seq":
						key = fmt.Sprintf("bench-%d", next)
					case "time":
						key = fmt.Sprintf("%012x%016x%04x", 1_800_000_000_000+next/8, rnd.Uint64(), rnd.Uint64()&0xffff)
					default:
						key = fmt.Sprintf("%016x%016x", rnd.Uint64(), rnd.Uint64())
					}
					r.IdempotencyKey, r.BodyHash = "alice/"+key, make([]byte, 32)
					c.PutJobs = append(c.PutJobs, r)
					next++
				}
				if err := s.Apply(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			for range 10 {
				commit(1000)
			}
			b.ReportAllocs()
			st0 := s.db.Stats()
			b.ResetTimer()
			for range b.N {
				commit(8)
			}
			b.StopTimer()
			reportPages(b, s, st0)
		})
	}
}

// BenchmarkLogAppend is the write-ahead log's part of a commit: a 3 KiB
// record (about a turn of 8 submissions) appended and fdatasynced, at the
// end of a file that grows with each append (grow: fdatasync also writes
// the file's new size, an ext4 journal commit) or into a file already
// filled with zeros (preallocated: the data alone), as WALStore's
// segments are. Set TMPDIR to the data directory's file system.
func BenchmarkLogAppend(b *testing.B) {
	for _, prealloc := range []bool{false, true} {
		name := "grow"
		if prealloc {
			name = "preallocated"
		}
		b.Run(name, func(b *testing.B) {
			rec := make([]byte, 3000)
			for i := range rec {
				rec[i] = byte(i)
			}
			var f *os.File
			fresh := func() {
				if f != nil {
					f.Close()
				}
				var err error
				if f, err = os.CreateTemp(b.TempDir(), "log"); err != nil {
					b.Fatal(err)
				}
				if prealloc {
					if _, err := f.Write(make([]byte, 64<<20)); err != nil {
						b.Fatal(err)
					}
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
			fresh()
			defer func() { f.Close() }()
			off := int64(0)
			for b.Loop() {
				if off+int64(len(rec)) > 64<<20 {
					b.StopTimer()
					fresh()
					off = 0
					b.StartTimer()
				}
				if _, err := f.WriteAt(rec, off); err != nil {
					b.Fatal(err)
				}
				off += int64(len(rec))
				if err := fdatasync(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
