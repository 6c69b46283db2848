package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// noCheckpoints keeps everything in the log for the length of a test.
var noCheckpoints = &Options{CheckpointRecords: 1 << 30, CheckpointBytes: 1 << 40, CheckpointInterval: time.Hour}

// crash leaves w as a SIGKILL would: no last checkpoint, the log as it is
// on disk, the file closed.
func (w *WALStore) crash(t *testing.T) {
	t.Helper()
	if w.closed.Swap(true) {
		return
	}
	close(w.stop)
	<-w.done
	w.wmu.Lock()
	w.f.Close()
	w.wmu.Unlock()
	w.b.db.Close()
	w.b.mark.close()
}

func (w *WALStore) pendingLen() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.pending)
}

func openWAL(t *testing.T, dir string, o *Options) *WALStore {
	t.Helper()
	w, err := OpenWAL(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// applyAll applies each of cs to every store.
func applyAll(t *testing.T, cs []Changes, stores ...Store) {
	t.Helper()
	for _, c := range cs {
		for _, s := range stores {
			if err := s.Apply(context.Background(), c); err != nil {
				t.Fatalf("%s: %v", s.Name(), err)
			}
		}
	}
}

// sameContents fails unless the two stores hold the same records, read
// through every Get and List.
func sameContents(t *testing.T, got, want Store, jobIDs, keys []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range jobIDs {
		g, gerr := got.GetJob(ctx, id)
		w, werr := want.GetJob(ctx, id)
		if errors.Is(gerr, ErrNotFound) != errors.Is(werr, ErrNotFound) {
			t.Fatalf("GetJob(%s): %s says %v, %s says %v", id, got.Name(), gerr, want.Name(), werr)
		}
		if werr == nil {
			sameJob(t, g, w)
		}
	}
	for _, k := range keys {
		g, gerr := got.GetIdempotencyKey(ctx, k)
		w, werr := want.GetIdempotencyKey(ctx, k)
		if errors.Is(gerr, ErrNotFound) != errors.Is(werr, ErrNotFound) || g.JobID != w.JobID || !bytes.Equal(g.BodyHash, w.BodyHash) {
			t.Fatalf("GetIdempotencyKey(%s): %s says %+v %v, %s says %+v %v", k, got.Name(), g, gerr, want.Name(), w, werr)
		}
	}
	for _, q := range []JobQuery{{}, {PageSize: 3}, {User: "alice", PageSize: 2}, {User: "bob"},
		{States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_RUNNING}, PageSize: 2},
		{States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_COMPLETED}}} {
		g, w := allPages(t, got, q), allPages(t, want, q)
		if !slices.Equal(g, w) {
			t.Fatalf("ListJobs(%+v):\n%s: %v\n%s: %v", q, got.Name(), g, want.Name(), w)
		}
	}
	lists := map[string]func(Store) (any, error){
		"ListReservations": func(s Store) (any, error) { return s.ListReservations(ctx) },
		"ListStanding":     func(s Store) (any, error) { return s.ListStanding(ctx) },
		"ListAgreements":   func(s Store) (any, error) { return s.ListAgreements(ctx) },
		"ListSLAOutcomes":  func(s Store) (any, error) { return s.ListSLAOutcomes(ctx) },
	}
	for name, list := range lists {
		g, err1 := list(got)
		w, err2 := list(want)
		if err := errors.Join(err1, err2); err != nil || fmt.Sprint(g) != fmt.Sprint(w) {
			t.Fatalf("%s: %v\n%s: %v\n%s: %v", name, err, got.Name(), g, want.Name(), w)
		}
	}
	for _, name := range []string{"runtimes", "other"} {
		g, gerr := got.GetStats(ctx, name)
		w, werr := want.GetStats(ctx, name)
		if !bytes.Equal(g, w) || errors.Is(gerr, ErrNotFound) != errors.Is(werr, ErrNotFound) {
			t.Fatalf("GetStats(%s): %s %q %v, %s %q %v", name, got.Name(), g, gerr, want.Name(), w, werr)
		}
	}
	gc, gerr := got.GetMeta(ctx, SiteClockKey)
	wc, werr := want.GetMeta(ctx, SiteClockKey)
	if gc != wc || errors.Is(gerr, ErrNotFound) != errors.Is(werr, ErrNotFound) {
		t.Fatalf("site clock: %s %q %v, %s %q %v", got.Name(), gc, gerr, want.Name(), wc, werr)
	}
	for _, p := range []string{"alice/", "bob/", ""} {
		g, err1 := got.CountIdempotencyKeys(ctx, p, 0)
		w, err2 := want.CountIdempotencyKeys(ctx, p, 0)
		if err := errors.Join(err1, err2); err != nil || g != w {
			t.Fatalf("CountIdempotencyKeys(%q): %s %d, %s %d (%v)", p, got.Name(), g, want.Name(), w, err)
		}
		for limit := 1; limit <= w+1; limit++ {
			g, err := got.CountIdempotencyKeys(ctx, p, limit)
			if err != nil || g != min(w, limit) {
				t.Fatalf("CountIdempotencyKeys(%q, limit %d) = %d, %v; want %d", p, limit, g, err, min(w, limit))
			}
		}
	}
}

// allPages lists every page of q, as "id:state" strings.
func allPages(t *testing.T, s Store, q JobQuery) []string {
	t.Helper()
	var out []string
	for {
		page, next, err := s.ListJobs(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: ListJobs(%+v): %v", s.Name(), q, err)
		}
		for _, r := range page {
			out = append(out, r.ID()+":"+r.Job.GetState().String())
		}
		if next == "" {
			return out
		}
		q.PageToken = next
	}
}

// workload is a history of changes touching every kind of record, with
// overwrites and deletions of what earlier changes wrote: half of it (the
// first) and the rest.
func workload() (first, rest []Changes, jobIDs, keys []string) {
	pending, running, done := fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_COMPLETED
	keyed := func(id, user string, st fedschedv1.JobState, key string) JobRecord {
		r := job(id, user, st)
		r.IdempotencyKey, r.BodyHash = key, []byte("h-"+key)
		return r
	}
	clock := func(h int) *SiteClock {
		return &SiteClock{Site: t0.Add(time.Duration(h) * time.Hour), Wall: t0, Scale: 2}
	}
	for i := range 12 {
		jobIDs = append(jobIDs, fmt.Sprintf("j-%02d", i))
	}
	keys = []string{"alice/k0", "alice/k1", "bob/k2", "alice/k3", "bob/k4"}
	first = []Changes{
		{PutJobs: []JobRecord{keyed("j-00", "alice", pending, "alice/k0"), keyed("j-01", "alice", pending, "alice/k1"), job("j-02", "bob", pending)},
			PutReservations: []ReservationRecord{{ID: "r-1", Procs: 2, Start: t0, End: t0.Add(time.Hour), Fixed: true}},
			PutStats:        map[string][]byte{"runtimes": []byte("v1")}, SiteClock: clock(1)},
		{PutJobs: []JobRecord{job("j-03", "bob", running), keyed("j-04", "bob", pending, "bob/k2"), job("j-05", "alice", pending)},
			PutStanding:    []StandingRecord{{ID: "s-1", Procs: 1, Start: t0, End: t0.Add(time.Hour), EverySeconds: 86400}},
			PutAgreements:  []AgreementRecord{{ID: "a-1", Body: []byte("one")}},
			PutSLAOutcomes: []SLARecord{{JobID: "j-03", Fee: 3, Penalty: 1}}},
		{PutJobs: []JobRecord{job("j-00", "alice", running)}, DeleteJobs: []string{"j-02"}},
	}
	rest = []Changes{
		{PutJobs: []JobRecord{job("j-01", "alice", done), job("j-06", "bob", pending), keyed("j-07", "alice", running, "alice/k3")},
			DeleteJobs: []string{"j-04"}, DeleteReservations: []string{"r-1"},
			PutReservations: []ReservationRecord{{ID: "r-2", Procs: 4, Start: t0, End: t0.Add(2 * time.Hour), Fixed: true}},
			PutStats:        map[string][]byte{"runtimes": []byte("v2"), "other": []byte("x")}, SiteClock: clock(2)},
		{PutJobs: []JobRecord{job("j-08", "alice", pending), job("j-09", "bob", done), keyed("j-10", "bob", pending, "bob/k4")},
			DeleteStanding: []string{"s-1"}, PutAgreements: []AgreementRecord{{ID: "a-1", Body: []byte("two")}, {ID: "a-0", Body: []byte("zero")}},
			PutSLAOutcomes: []SLARecord{{JobID: "j-03", Outcome: fedschedv1.SlaOutcome_SLA_OUTCOME_MET, Fee: 3, Penalty: 1, DecidedAt: t0}}},
		{DeleteJobs: []string{"j-05", "j-10"}, PutJobs: []JobRecord{job("j-11", "alice", running), job("j-05", "alice", done)}},
		{PutJobs: []JobRecord{job("j-03", "alice", done)}, DeleteJobs: []string{"j-09"}},
	}
	return first, rest, jobIDs, keys
}

// TestWALMatchesMemStore runs one history on a MemStore and on a
// WALStore, and compares them through every read: with everything in the
// overlay, with everything in the file, with the two mixed (the first half
// checkpointed), after a crash and replay, and after a clean reopen.
func TestWALMatchesMemStore(t *testing.T) {
	first, rest, ids, keys := workload()
	mem := NewMemStore()
	dir := t.TempDir()
	w := openWAL(t, dir, noCheckpoints)
	applyAll(t, first, mem, w)
	sameContents(t, w, mem, ids, keys) // all in the overlay
	if w.pendingLen() != len(first) {
		t.Fatalf("%d records pending, want %d", w.pendingLen(), len(first))
	}
	if err := w.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if w.pendingLen() != 0 {
		t.Fatalf("%d records pending after a checkpoint", w.pendingLen())
	}
	sameContents(t, w, mem, ids, keys) // all in the file
	applyAll(t, rest, mem, w)
	sameContents(t, w, mem, ids, keys) // mixed
	// The overlay is read first: the file does not have the rest yet.
	if _, err := w.b.GetJob(context.Background(), "j-11"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("file has j-11 before a checkpoint: %v", err)
	}
	w.crash(t)
	w = openWAL(t, dir, noCheckpoints)
	if w.replayed != len(rest) {
		t.Fatalf("replayed %d records, want %d", w.replayed, len(rest))
	}
	sameContents(t, w, mem, ids, keys)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean close leaves no log: the bbolt file alone holds it all.
	if segs, err := listSegments(filepath.Join(dir, LogDirName)); err != nil || len(segs) != 0 {
		t.Fatalf("segments after Close: %v %v", segs, err)
	}
	b, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameContents(t, b, mem, ids, keys)
	if problems, err := b.Check(context.Background()); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
	b.Close()
}

// crashedLog leaves a crashed WALStore in dir whose log holds n records,
// each putting job c-<i> (all of one size), and returns the path of its
// segment, the segment's bytes and the size of a record.
func crashedLog(t *testing.T, dir string, n int) (seg string, data []byte, size int) {
	t.Helper()
	w := openWAL(t, dir, noCheckpoints)
	for i := range n {
		if err := w.PutJob(context.Background(), job(fmt.Sprintf("c-%d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
			t.Fatal(err)
		}
	}
	w.crash(t)
	segs, err := listSegments(filepath.Join(dir, LogDirName))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	if data, err = os.ReadFile(segs[0].path); err != nil {
		t.Fatal(err)
	}
	if _, _, size, err = decodeFrame(data); err != nil {
		t.Fatal(err)
	}
	return segs[0].path, data, size
}

func haveJobs(t *testing.T, s Store, n int) {
	t.Helper()
	jobs, _, err := s.ListJobs(context.Background(), JobQuery{PageSize: MaxPageSize})
	if err != nil || len(jobs) != n {
		t.Fatalf("%d jobs (%v), want %d", len(jobs), err, n)
	}
}

// TestWALTornTail cuts the last record short, or damages its checksum, at
// every length: the open drops it (it was never acknowledged) and keeps
// the others.
func TestWALTornTail(t *testing.T) {
	src := t.TempDir()
	seg, data, size := crashedLog(t, src, 3)
	lastStart := 2 * size // the three records are the same size
	cases := map[string][]byte{}
	for _, cut := range []int{1, frameHeader - 1, frameHeader, frameHeader + 1, size / 2, size - 1} {
		cases[fmt.Sprintf("cut to %d bytes", cut)] = slices.Clone(data[:lastStart+cut])
	}
	flipped := slices.Clone(data)
	flipped[lastStart+size-1] ^= 0x40
	cases["bad checksum"] = flipped
	cases["zeros"] = append(slices.Clone(data[:lastStart]), make([]byte, size)...)
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyStore(t, src, dir)
			if err := os.WriteFile(filepath.Join(dir, LogDirName, filepath.Base(seg)), content, 0o600); err != nil {
				t.Fatal(err)
			}
			// The next segment, made ahead, is there too: zeros.
			if err := os.WriteFile(filepath.Join(dir, LogDirName, segmentName(1<<20)), make([]byte, 4096), 0o600); err != nil {
				t.Fatal(err)
			}
			w := openWAL(t, dir, noCheckpoints)
			if w.replayed != 2 {
				t.Fatalf("replayed %d records, want 2", w.replayed)
			}
			haveJobs(t, w, 2)
			// The next record takes the torn one's number, in a new segment.
			if err := w.PutJob(context.Background(), job("c-new", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
				t.Fatal(err)
			}
			w.crash(t)
			w = openWAL(t, dir, noCheckpoints)
			haveJobs(t, w, 3)
			if w.replayed != 1 {
				t.Fatalf("replayed %d, want 1", w.replayed)
			}
		})
	}
}

// copyStore copies a data directory's store file, mark and log.
func copyStore(t *testing.T, from, to string) {
	t.Helper()
	for _, name := range []string{FileName, FileName + MarkSuffix} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := listSegments(filepath.Join(from, LogDirName))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(to, LogDirName), 0o700)
	for _, sg := range segs {
		b, err := os.ReadFile(sg.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, LogDirName, filepath.Base(sg.path)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWALDamageBeforeGoodRecords: a damaged record followed by good ones
// is not a tear: the open fails, a read-only open (fedsched check) reports
// it, and OpenBolt refuses the directory (the file alone misses
// acknowledged changes). So does a missing record.
func TestWALDamageBeforeGoodRecords(t *testing.T) {
	src := t.TempDir()
	seg, data, size := crashedLog(t, src, 3)
	damaged := map[string][]byte{}
	for _, at := range []int{2, 5, 9, frameHeader + 3, size - 1} {
		b := slices.Clone(data)
		b[at] ^= 0x10
		damaged[fmt.Sprintf("byte %d of the first record", at)] = b
	}
	middle := slices.Clone(data)
	middle[size+frameHeader+1] ^= 0x01
	damaged["the second record"] = middle
	damaged["the first record missing"] = slices.Clone(data[size:])
	zeroed := slices.Clone(data)
	clear(zeroed[:size])
	damaged["the first record zeroed"] = zeroed
	// Records 1 and 2 in one segment, 3 in the next, and 2 damaged: not
	// a tear, whatever segment the good record is in.
	split := slices.Clone(data[:2*size])
	split[2*size-1] ^= 0x01
	damaged["the end of a segment before a good one"] = split
	for name, content := range damaged {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyStore(t, src, dir)
			if err := os.WriteFile(filepath.Join(dir, LogDirName, filepath.Base(seg)), content, 0o600); err != nil {
				t.Fatal(err)
			}
			if name == "the end of a segment before a good one" {
				if err := os.WriteFile(filepath.Join(dir, LogDirName, segmentName(1<<20)), data[2*size:], 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if w, err := OpenWAL(dir, noCheckpoints); !errors.Is(err, ErrCorrupt) {
				if err == nil {
					w.Close()
				}
				t.Fatalf("OpenWAL = %v, want ErrCorrupt", err)
			}
			ro, err := OpenWAL(dir, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			problems, err := ro.Check(context.Background())
			ro.Close()
			if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "write-ahead log") {
				t.Fatalf("Check = %q, %v; want the log's damage", problems, err)
			}
			if b, err := OpenBolt(dir, nil); err == nil {
				b.Close()
				t.Fatal("OpenBolt opened a data directory whose log holds records")
			} else if !errors.Is(err, ErrLogNotReplayed) {
				t.Fatalf("OpenBolt = %v, want ErrLogNotReplayed", err)
			}
		})
	}
}

// TestWALCheckpointThenCrash: what a checkpoint wrote is not replayed
// again, what came after it is.
func TestWALCheckpointThenCrash(t *testing.T) {
	dir := t.TempDir()
	w := openWAL(t, dir, noCheckpoints)
	ctx := context.Background()
	for i := range 5 {
		if err := w.PutJob(ctx, job(fmt.Sprintf("c-%d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 7; i++ {
		if err := w.PutJob(ctx, job(fmt.Sprintf("c-%d", i), "alice", fedschedv1.JobState_JOB_STATE_RUNNING)); err != nil {
			t.Fatal(err)
		}
	}
	// A checkpointed segment that survived the crash (its deletion was
	// not durable) is skipped.
	segs, _ := listSegments(w.dir)
	w.crash(t)
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	w = openWAL(t, dir, noCheckpoints)
	if w.replayed != 2 {
		t.Fatalf("replayed %d, want 2", w.replayed)
	}
	haveJobs(t, w, 7)
	running, _, err := w.ListJobs(ctx, JobQuery{States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_RUNNING}})
	if err != nil || len(running) != 2 {
		t.Fatalf("running: %v %v", running, err)
	}
}

// TestWALIdempotencyThroughOverlay: PutJobIfNewKey sees keys and jobs that
// are only in the log.
func TestWALIdempotencyThroughOverlay(t *testing.T) {
	w := openWAL(t, t.TempDir(), noCheckpoints)
	ctx := context.Background()
	a := job("i-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)
	if _, created, err := w.PutJobIfNewKey(ctx, "alice/k", []byte("h1"), a); err != nil || !created {
		t.Fatalf("first = %v %v", created, err)
	}
	if _, _, err := w.PutJobIfNewKey(ctx, "alice/k", []byte("h2"), job("i-2", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("other body = %v, want ErrIdempotencyConflict", err)
	}
	stored, created, err := w.PutJobIfNewKey(ctx, "alice/k", []byte("h1"), job("i-3", "alice", fedschedv1.JobState_JOB_STATE_PENDING))
	if err != nil || created || stored.ID() != "i-1" {
		t.Fatalf("retry = %v %v %v, want i-1 not created", stored.ID(), created, err)
	}
	if _, _, err := w.PutJobIfNewKey(ctx, "alice/other", []byte("h"), a); !errors.Is(err, ErrJobExists) {
		t.Fatalf("same id = %v, want ErrJobExists", err)
	}
	// Deleting the job forgets its key: the key may be used again.
	if err := w.DeleteJob(ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.GetIdempotencyKey(ctx, "alice/k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("key after delete = %v", err)
	}
	if _, created, err := w.PutJobIfNewKey(ctx, "alice/k", []byte("h2"), job("i-4", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil || !created {
		t.Fatalf("reuse = %v %v", created, err)
	}
	if w.pendingLen() != 3 || w.b == nil {
		t.Fatalf("%d records pending, want 3 (nothing checkpointed)", w.pendingLen())
	}
	if n, err := w.CountIdempotencyKeys(ctx, "alice/", 0); err != nil || n != 1 {
		t.Fatalf("keys = %d %v, want 1 (alice/k)", n, err)
	}
}

// TestWALCheckpointSettings: each threshold makes checkpoints happen, and
// bad settings are refused.
func TestWALCheckpointSettings(t *testing.T) {
	ctx := context.Background()
	put := func(w *WALStore, n int) {
		for i := range n {
			if err := w.PutJob(ctx, job(fmt.Sprintf("s-%d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitEmpty := func(w *WALStore) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); w.pendingLen() > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d records still pending", w.pendingLen())
			}
		}
	}
	t.Run("records", func(t *testing.T) {
		w := openWAL(t, t.TempDir(), &Options{CheckpointRecords: 3, CheckpointBytes: 1 << 40, CheckpointInterval: time.Hour})
		put(w, 3)
		waitEmpty(w)
		// Past logHardFactor thresholds Apply checkpoints itself.
		w.cmu.Lock() // the checkpointer cannot run
		go func() { time.Sleep(10 * time.Millisecond); w.cmu.Unlock() }()
		put(w, logHardFactor*3)
		if n := w.pendingLen(); n >= logHardFactor*3 {
			t.Fatalf("%d records pending", n)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		// One record passes the threshold but not logHardFactor of it:
		// the checkpointer, not Apply, must write it.
		e, err := encodeChanges(Changes{PutJobs: []JobRecord{job("s-0", "alice", fedschedv1.JobState_JOB_STATE_PENDING)}})
		if err != nil {
			t.Fatal(err)
		}
		size := int64(len(appendFrame(nil, 1, e.appendTo(nil))))
		w := openWAL(t, t.TempDir(), &Options{CheckpointRecords: 1 << 30, CheckpointBytes: size - 1, CheckpointInterval: time.Hour})
		put(w, 1)
		waitEmpty(w)
	})
	t.Run("interval", func(t *testing.T) {
		w := openWAL(t, t.TempDir(), &Options{CheckpointRecords: 1 << 30, CheckpointBytes: 1 << 40, CheckpointInterval: 5 * time.Millisecond})
		put(w, 1)
		waitEmpty(w)
	})
	for name, o := range map[string]*Options{
		"negative records":  {CheckpointRecords: -1},
		"negative bytes":    {CheckpointBytes: -1},
		"negative interval": {CheckpointInterval: -1},
		"batch delay":       {MaxBatchDelay: time.Millisecond},
	} {
		if w, err := OpenWAL(t.TempDir(), o); !errors.Is(err, ErrInvalid) {
			if err == nil {
				w.Close()
			}
			t.Errorf("OpenWAL(%s) = %v, want ErrInvalid", name, err)
		}
	}
	if b, err := OpenBolt(t.TempDir(), &Options{CheckpointRecords: 5}); !errors.Is(err, ErrInvalid) {
		if err == nil {
			b.Close()
		}
		t.Errorf("OpenBolt with a checkpoint setting = %v, want ErrInvalid", err)
	}
}

// TestWALWritesAfterFailure: a store whose log write failed refuses every
// later write (a retry after a failed fsync could acknowledge what is not
// on disk), and the next open replays what was acknowledged.
func TestWALWritesAfterFailure(t *testing.T) {
	dir := t.TempDir()
	w := openWAL(t, dir, noCheckpoints)
	ctx := context.Background()
	if err := w.PutJob(ctx, job("f-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
		t.Fatal(err)
	}
	w.wmu.Lock()
	w.f.Close() // the next write fails
	w.wmu.Unlock()
	if err := w.PutJob(ctx, job("f-2", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err == nil {
		t.Fatal("write to a closed log succeeded")
	}
	if err := w.PutJob(ctx, job("f-3", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err == nil || !strings.Contains(err.Error(), "failed earlier") {
		t.Fatalf("write after a failure = %v", err)
	}
	if _, err := w.GetJob(ctx, "f-1"); err != nil {
		t.Fatalf("read after a failure: %v", err)
	}
	w.Close()
	w = openWAL(t, dir, noCheckpoints)
	haveJobs(t, w, 1)
}

// oversizeKeyChanges are changes with a key longer than bbolt takes
// (bolt.MaxKeySize): of a record, or of the index entry a job makes (its
// user, a zero byte and its id).
func oversizeKeyChanges() map[string]Changes {
	long := strings.Repeat("k", bolt.MaxKeySize+1)
	pending := fedschedv1.JobState_JOB_STATE_PENDING
	keyed := job("j-1", "alice", pending)
	keyed.IdempotencyKey = long
	return map[string]Changes{
		"job id":          {PutJobs: []JobRecord{job(long, "alice", pending)}},
		"idempotency key": {PutJobs: []JobRecord{keyed}},
		"user index key":  {PutJobs: []JobRecord{job("j-1", strings.Repeat("u", bolt.MaxKeySize), pending)}},
		"reservation id":  {PutReservations: []ReservationRecord{{ID: long, Procs: 1}}},
		"SLA job id":      {PutSLAOutcomes: []SLARecord{{JobID: long}}},
		"statistics name": {PutStats: map[string][]byte{long: []byte("{}")}},
		"agreement id":    {PutAgreements: []AgreementRecord{{ID: long, Body: []byte("a")}}},
		"standing id":     {PutStanding: []StandingRecord{{ID: long, EverySeconds: 60}}},
	}
}

// TestWALRefusesKeysTheFileCannotHold: Apply refuses a change that bbolt
// would refuse. Logged and acknowledged, such a change fails every
// checkpoint, so the store refuses all writes, Close fails, and every open
// fails too (its replay writes the change to the file): the node cannot
// start until the log, and every change in it, is thrown away.
func TestWALRefusesKeysTheFileCannotHold(t *testing.T) {
	ctx := context.Background()
	for name, c := range oversizeKeyChanges() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w := openWAL(t, dir, noCheckpoints)
			if err := w.Apply(ctx, c); !errors.Is(err, ErrInvalid) {
				t.Errorf("Apply = %v, want ErrInvalid", err)
			}
			if err := w.PutJob(ctx, job("ok-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			w, err := OpenWAL(dir, noCheckpoints)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer w.Close()
			if _, err := w.GetJob(ctx, "ok-1"); err != nil {
				t.Fatal(err)
			}
		})
	}
	w := openWAL(t, t.TempDir(), noCheckpoints)
	long := strings.Repeat("k", bolt.MaxKeySize+1)
	if _, _, err := w.PutJobIfNewKey(ctx, long, []byte{1}, job("j-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); !errors.Is(err, ErrInvalid) {
		t.Errorf("PutJobIfNewKey with a long key = %v, want ErrInvalid", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close after PutJobIfNewKey: %v", err)
	}
}

// TestWALDurableWriteNotReportedFailed: an Apply (or PutJobIfNewKey) past
// logHardFactor thresholds checkpoints itself; when that checkpoint fails,
// the change is already durable in the log and in the overlay (reads see
// it, the next open replays it), so the write must report success. The
// checkpoint's failure stops the writes that follow.
func TestWALDurableWriteNotReportedFailed(t *testing.T) {
	ctx := context.Background()
	pending := fedschedv1.JobState_JOB_STATE_PENDING
	for name, write := range map[string]func(w *WALStore) error{
		"Apply": func(w *WALStore) error { return w.PutJob(ctx, job("d-1", "alice", pending)) },
		"PutJobIfNewKey": func(w *WALStore) error {
			_, created, err := w.PutJobIfNewKey(ctx, "key-1", []byte{1}, job("d-1", "alice", pending))
			if err == nil && !created {
				t.Error("not created")
			}
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			// One record passes logHardFactor times the bytes threshold.
			w := openWAL(t, dir, &Options{CheckpointRecords: 1 << 30, CheckpointBytes: 1, CheckpointInterval: time.Hour})
			// The checkpoint's next segment cannot be made.
			w.cmu.Lock()
			block := filepath.Join(w.dir, segmentName(w.gen+1))
			w.cmu.Unlock()
			if err := os.Mkdir(block, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := write(w); err != nil {
				t.Errorf("durable write = %v, want success", err)
			}
			if _, err := w.GetJob(ctx, "d-1"); err != nil {
				t.Fatalf("the write is not read back: %v", err)
			}
			if err := w.PutJob(ctx, job("d-2", "alice", pending)); err == nil || !strings.Contains(err.Error(), "failed earlier") {
				t.Fatalf("write after the failed checkpoint = %v", err)
			}
			if err := w.Close(); err == nil {
				t.Fatal("Close after a failed checkpoint succeeded")
			}
			if err := os.Remove(block); err != nil {
				t.Fatal(err)
			}
			w = openWAL(t, dir, noCheckpoints)
			if _, err := w.GetJob(ctx, "d-1"); err != nil {
				t.Fatalf("after reopen: %v", err)
			}
			haveJobs(t, w, 1)
		})
	}
}

// TestWALReadYourWritesDuringCheckpoints: writers each read back what they
// wrote (Get, ListJobs, CountIdempotencyKeys) while the checkpointer
// writes the log to the file after nearly every record: a change is read
// back whether it is in the overlay, in the file, or in the middle of a
// checkpoint's commit.
func TestWALReadYourWritesDuringCheckpoints(t *testing.T) {
	ctx := context.Background()
	w := openWAL(t, t.TempDir(), &Options{CheckpointRecords: 1, CheckpointInterval: time.Millisecond})
	const writers, writes = 4, 150
	errs := make(chan error, writers)
	for g := range writers {
		go func() {
			errs <- func() error {
				user := fmt.Sprintf("u%d", g)
				live := map[string]bool{}
				for i := range writes {
					id := fmt.Sprintf("%s-%04d", user, i)
					rec := job(id, user, fedschedv1.JobState_JOB_STATE_PENDING)
					rec.IdempotencyKey, rec.BodyHash = user+"/"+id, []byte{1}
					c := Changes{PutJobs: []JobRecord{rec}}
					if i%3 == 2 { // delete the one before
						gone := fmt.Sprintf("%s-%04d", user, i-1)
						c.DeleteJobs = []string{gone}
						delete(live, gone)
					}
					if err := w.Apply(ctx, c); err != nil {
						return err
					}
					live[id] = true
					if _, err := w.GetJob(ctx, id); err != nil {
						return fmt.Errorf("GetJob %s after its write: %w", id, err)
					}
					if _, err := w.GetIdempotencyKey(ctx, rec.IdempotencyKey); err != nil {
						return fmt.Errorf("key of %s after its write: %w", id, err)
					}
					for _, gone := range c.DeleteJobs {
						if _, err := w.GetJob(ctx, gone); !errors.Is(err, ErrNotFound) {
							return fmt.Errorf("GetJob %s after its deletion: %v", gone, err)
						}
					}
					jobs, _, err := w.ListJobs(ctx, JobQuery{User: user, PageSize: MaxPageSize})
					if err != nil {
						return err
					}
					if len(jobs) != len(live) {
						return fmt.Errorf("ListJobs after write %d: %d jobs, want %d", i, len(jobs), len(live))
					}
					for _, j := range jobs {
						if !live[j.ID()] {
							return fmt.Errorf("ListJobs after write %d: %s, deleted", i, j.ID())
						}
					}
					if n, err := w.CountIdempotencyKeys(ctx, user+"/", 0); err != nil || n != len(live) {
						return fmt.Errorf("CountIdempotencyKeys after write %d: %d (%v), want %d", i, n, err, len(live))
					}
				}
				return nil
			}()
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWALCloseMakesNoSegment: a clean stop writes the pending records to
// the file and removes the log without making a new segment first (Close
// made one, of up to 16 MiB of zeros and two syncs, only to delete it, and
// failed, keeping the log, when it could not: on a full disk, say).
func TestWALCloseMakesNoSegment(t *testing.T) {
	dir := t.TempDir()
	w := openWAL(t, dir, noCheckpoints)
	ctx := context.Background()
	for i := range 3 {
		if err := w.PutJob(ctx, job(fmt.Sprintf("c-%d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
			t.Fatal(err)
		}
	}
	w.cmu.Lock()
	block := filepath.Join(w.dir, segmentName(w.gen+1)) // no segment can be made
	w.cmu.Unlock()
	if err := os.Mkdir(block, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	if segs, err := listSegments(filepath.Join(dir, LogDirName)); err != nil || len(segs) > 0 {
		t.Fatalf("after Close, the log holds %v (%v)", segs, err)
	}
	b, err := OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	haveJobs(t, b, 3)
}

// TestWALLargestThresholds: thresholds as large as their types hold (an
// operator's "never by count") make no checkpoint: logHardFactor times
// them must not wrap around to a negative number that every write passes.
func TestWALLargestThresholds(t *testing.T) {
	w := openWAL(t, t.TempDir(), &Options{CheckpointRecords: math.MaxInt, CheckpointBytes: math.MaxInt64, CheckpointInterval: time.Hour})
	for i := range 3 {
		if err := w.PutJob(context.Background(), job(fmt.Sprintf("m-%d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.pendingLen(); n != 3 {
		t.Fatalf("%d records pending, want 3 (no checkpoint)", n)
	}
}
