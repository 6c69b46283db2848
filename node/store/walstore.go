package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Defaults of the checkpoint settings of Options (WALStore).
const (
	// DefaultCheckpointRecords is CheckpointRecords when Options leaves it
	// zero.
	DefaultCheckpointRecords = 1024
	// DefaultCheckpointBytes is CheckpointBytes when Options leaves it
	// zero.
	DefaultCheckpointBytes = 16 << 20
	// DefaultCheckpointInterval is CheckpointInterval when Options leaves
	// it zero.
	DefaultCheckpointInterval = time.Second
)

// logHardFactor: an Apply that finds the log holding this many times the
// records or bytes of a checkpoint (the checkpointer falls behind) makes a
// checkpoint itself before it returns, which bounds the log and the
// overlay.
const logHardFactor = 4

// keyLogSeq is the bucketMeta key of the sequence number of the last log
// record the file holds (8 bytes, big-endian).
var keyLogSeq = []byte("wal_seq")

// WALStore is the durable Store with a write-ahead log in front of a
// BoltStore. Apply appends the changes to the log as one record and
// fdatasyncs it once: when it returns they are durable. They then sit in
// an in-memory overlay, which every read consults first, until a
// checkpointer (a goroutine of the store) writes a batch of them to bbolt
// in one ordinary bbolt transaction (two fsyncs, as ever) that also
// records the last log record it holds; then the log segments it covered
// are deleted. Open replays the records the file does not hold. Make one
// with OpenWAL.
type WALStore struct {
	b        *BoltStore
	dir      string
	readOnly bool
	log      *slog.Logger
	// Checkpoint thresholds: records, bytes and time.
	ckRecords  int
	ckBytes    int64
	ckInterval time.Duration

	// cmu makes checkpoints one at a time; it is taken before wmu.
	cmu sync.Mutex
	// wmu orders the writes: the log's appends and the overlay's updates.
	wmu sync.Mutex
	// Under wmu: the open segment, its path, the segments before it that
	// a checkpoint has not yet covered, the next record's sequence number,
	// and the frame buffer.
	f        *os.File
	current  string
	older    []string
	nextSeq  uint64
	buf      []byte
	segBytes int64 // written to f

	// Under cmu: the last segment generation made, and the next segment,
	// made and preallocated ahead of its use (nil: none yet).
	gen       uint64
	spare     *os.File
	sparePath string
	// lastSegBytes is what the last full segment held (under cmu; rotate
	// holds both).
	lastSegBytes int64

	// mu guards the overlay's contents and pending (readers take it
	// shared). The overlay's maps are made once, by OpenWAL, and never
	// replaced: a reader may hold one between locks.
	mu sync.RWMutex
	ov overlay
	// pending are the records logged but not yet in bbolt, in order.
	pending      []logRecord
	pendingBytes int64

	// failed is set when a log write or a checkpoint failed: the store
	// then refuses writes (the log on disk holds every acknowledged
	// change; a restart replays it).
	failed atomic.Pointer[error]
	closed atomic.Bool
	// problems are what a read-only open found wrong with the log.
	problems []string
	// replayed is how many records Open replayed (tests, logs).
	replayed int

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

var _ Store = (*WALStore)(nil)

// overlay holds, per bbolt bucket, the latest logged value of each key
// the log changed since the last checkpoint: the bytes bbolt would hold,
// nil for a deletion.
type overlay struct {
	jobs, idem, res, sla, stats, agreements, standing, meta map[string]ovVal
}

// ovVal is one overlay value and the record that wrote it.
type ovVal struct {
	seq uint64
	val []byte
}

func newOverlay() overlay {
	return overlay{jobs: map[string]ovVal{}, idem: map[string]ovVal{}, res: map[string]ovVal{}, sla: map[string]ovVal{},
		stats: map[string]ovVal{}, agreements: map[string]ovVal{}, standing: map[string]ovVal{}, meta: map[string]ovVal{}}
}

func (o overlay) all() []map[string]ovVal {
	return []map[string]ovVal{o.jobs, o.idem, o.res, o.sla, o.stats, o.agreements, o.standing, o.meta}
}

// OpenWAL opens the store of a data directory as OpenBolt does (the same
// file, lock, migrations and options) with its write-ahead log,
// LogDirName: it replays the log records the file does not hold, writes
// them to the file and deletes the log, then starts the checkpointer. A
// torn last record (a crash during its write: it was never acknowledged)
// is dropped with a warning; a damaged record before a good one, or a
// missing record, fails with ErrCorrupt. With ReadOnly, the records are
// replayed into memory only, nothing is written, and a damaged log is
// reported by Check instead of failing the open.
func OpenWAL(dataDir string, opts *Options) (*WALStore, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CheckpointRecords < 0 || o.CheckpointBytes < 0 || o.CheckpointInterval < 0 {
		return nil, fmt.Errorf("open store: negative checkpoint setting (records %d, bytes %d, interval %v): %w",
			o.CheckpointRecords, o.CheckpointBytes, o.CheckpointInterval, ErrInvalid)
	}
	if o.MaxBatchDelay != 0 {
		return nil, fmt.Errorf("open store: MaxBatchDelay has no effect with the write-ahead log (Apply never waits for other writers: one record, one sync): %w", ErrInvalid)
	}
	w := &WALStore{
		dir: filepath.Join(dataDir, LogDirName), readOnly: o.ReadOnly, log: o.Logger,
		ckRecords: orDefault(o.CheckpointRecords, DefaultCheckpointRecords), ckBytes: orDefault(o.CheckpointBytes, DefaultCheckpointBytes),
		ckInterval: orDefault(o.CheckpointInterval, DefaultCheckpointInterval),
		ov:         newOverlay(), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	bo := o
	bo.CheckpointRecords, bo.CheckpointBytes, bo.CheckpointInterval = 0, 0, 0
	bo.MaxBatchDelay = -1 // the checkpointer is the one writer
	b, err := openBolt(dataDir, &bo, false)
	if err != nil {
		return nil, err
	}
	w.b = b
	fail := func(err error) (*WALStore, error) {
		b.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	after, err := w.fileLogSeq()
	if err != nil {
		return fail(err)
	}
	scan, err := readLog(w.dir, after)
	if err != nil {
		if !o.ReadOnly {
			return fail(fmt.Errorf("%w; %s; or, to keep %s as it is and lose the changes logged since its last checkpoint, move %s away",
				err, corruptAdvice(dataDir), FileName, w.dir))
		}
		w.problems = append(w.problems, err.Error())
	}
	if scan.torn != "" {
		w.log.Warn("write-ahead log: dropped a torn last record (a crash during its write; it was never acknowledged)", "tail", scan.torn)
	}
	w.nextSeq = max(after, scan.last) + 1
	w.replayed = len(scan.recs)
	if o.ReadOnly {
		// Replayed into memory only: reads see them, nothing is written.
		for _, r := range scan.recs {
			w.overlayApply(r.seq, r.e)
		}
		close(w.done)
		return w, nil
	}
	if len(scan.recs) > 0 {
		w.log.Info("write-ahead log replayed", "records", len(scan.recs), "from", scan.recs[0].seq, "to", scan.last)
	}
	// The replayed records go to the file now; then every old segment
	// goes (the torn tail with them), and the new segment's directory
	// sync makes those deletions durable before a record is written to
	// it.
	if err := w.commit(scan.recs); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return fail(err)
	}
	// The log's own entry in the data directory (new at the first open)
	// is durable before a record relies on it; rotate syncs the entries
	// of the log's segments.
	if err := syncDir(dataDir); err != nil {
		return fail(fmt.Errorf("write-ahead log: %w", err))
	}
	segs, err := listSegments(w.dir)
	if err != nil {
		return fail(err)
	}
	for _, sg := range segs {
		w.gen = max(w.gen, sg.gen)
		if err := os.Remove(sg.path); err != nil {
			return fail(err)
		}
	}
	if err := w.rotate(); err != nil {
		return fail(err)
	}
	go w.checkpointer()
	return w, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// fileLogSeq is the sequence number of the last log record the file
// holds (0: none).
func (w *WALStore) fileLogSeq() (uint64, error) {
	var seq uint64
	err := w.b.view(context.Background(), func(tx *bolt.Tx) error {
		meta, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		v := meta.Get(keyLogSeq)
		switch {
		case v == nil:
		case len(v) == 8:
			seq = binary.BigEndian.Uint64(v)
		default:
			return fmt.Errorf("meta %s: %d bytes: %w", keyLogSeq, len(v), ErrCorrupt)
		}
		return nil
	})
	return seq, err
}

// Name returns "wal".
func (w *WALStore) Name() string { return "wal" }

// Path returns the path of the store's bbolt file.
func (w *WALStore) Path() string { return w.b.Path() }

// Check is BoltStore.Check of the file, and what the open found wrong
// with the log (read-only opens; a writable open fails instead).
func (w *WALStore) Check(ctx context.Context) ([]string, error) {
	problems, err := w.b.Check(ctx)
	return append(problems, w.problems...), err
}

// Close makes a last checkpoint, deletes the log (everything is in the
// file) and closes the file. It is safe to call more than once.
func (w *WALStore) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	if w.readOnly {
		return w.b.Close()
	}
	close(w.stop)
	<-w.done
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.wmu.Lock()
	defer w.wmu.Unlock()
	// No append follows (closed): the last checkpoint needs no new
	// segment, and the log goes once the file holds it all.
	var err error
	if p := w.failed.Load(); p != nil {
		err = *p
	} else {
		err = w.commit(w.pending)
	}
	w.mu.Lock()
	w.pending, w.pendingBytes = nil, 0
	w.mu.Unlock()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if w.spare != nil {
		w.spare.Close()
		os.Remove(w.sparePath) // it holds no record
	}
	if err == nil {
		for _, p := range append(w.older, w.current) {
			err = errors.Join(err, os.Remove(p))
		}
		// The log stays gone after a power loss: the file alone is the
		// state (OpenBolt refuses a directory whose log holds records).
		if err == nil {
			err = syncDir(w.dir)
		}
		if err != nil {
			err = fmt.Errorf("write-ahead log: %w", err)
		}
	}
	if berr := w.b.Close(); err == nil {
		err = berr
	}
	return err
}

// writable reports why the store takes no writes, if it does not.
func (w *WALStore) writable() error {
	switch {
	case w.closed.Load():
		return ErrClosed
	case w.readOnly:
		return fmt.Errorf("store opened read-only: %w", ErrInvalid)
	}
	if p := w.failed.Load(); p != nil {
		return fmt.Errorf("store failed earlier, restart the node to recover from its log: %w", *p)
	}
	return nil
}

// fail makes every later write fail with err.
func (w *WALStore) fail(err error) error {
	w.failed.CompareAndSwap(nil, &err)
	w.log.Error("store failed: writes are refused until a restart replays the log", "err", err)
	return err
}

// Apply implements Store: one log record, one fdatasync.
func (w *WALStore) Apply(ctx context.Context, c Changes) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e, err := encodeChanges(c)
	if err != nil {
		return err
	}
	w.wmu.Lock()
	err = w.appendLocked(e)
	w.wmu.Unlock()
	if err != nil {
		return err
	}
	w.afterAppend()
	return nil
}

// afterAppend, after a durable append, wakes the checkpointer when the log
// has grown past a threshold, and makes a checkpoint itself when it has
// grown past logHardFactor thresholds. The append stands whatever the
// checkpoint does: a checkpoint that fails fails the store (fail), and so
// the writes that follow, not the one that is durable already.
func (w *WALStore) afterAppend() {
	w.mu.RLock()
	n, size := len(w.pending), w.pendingBytes
	w.mu.RUnlock()
	// n/logHardFactor >= ck is n >= logHardFactor*ck without the product,
	// which wraps around for thresholds near their type's largest value.
	if n/logHardFactor >= w.ckRecords || size/logHardFactor >= w.ckBytes {
		w.checkpoint() //nolint:errcheck // fail has logged it and refuses later writes
		return
	}
	if n >= w.ckRecords || size >= w.ckBytes {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// appendLocked writes e to the log as one record, syncs it, and lays it
// on the overlay. wmu is held.
func (w *WALStore) appendLocked(e encChanges) error {
	if err := w.writable(); err != nil {
		return err
	}
	seq := w.nextSeq
	w.buf = appendFrame(w.buf[:0], seq, e.appendTo(nil))
	if _, err := w.f.Write(w.buf); err != nil {
		return w.fail(fmt.Errorf("write-ahead log %s: %w", w.current, err))
	}
	if err := fdatasync(w.f); err != nil {
		// After a failed sync the page cache may say anything: never retry.
		return w.fail(fmt.Errorf("write-ahead log %s: sync: %w", w.current, err))
	}
	w.nextSeq++
	w.segBytes += int64(len(w.buf))
	w.mu.Lock()
	w.overlayApply(seq, e)
	w.pending = append(w.pending, logRecord{seq: seq, e: e, size: len(w.buf)})
	w.pendingBytes += int64(len(w.buf))
	w.mu.Unlock()
	if cap(w.buf) > 1<<20 {
		w.buf = nil // a rare large record: do not keep its buffer
	}
	return nil
}

// overlayApply lays e, record seq, on the overlay, as applyEncoded writes
// it to bbolt. mu is held (or the store is not yet shared).
func (w *WALStore) overlayApply(seq uint64, e encChanges) {
	set := func(m map[string]ovVal, key string, val []byte) { m[key] = ovVal{seq: seq, val: val} }
	for _, id := range e.deleteJobs {
		// deleteJob also forgets the job's idempotency key if the key
		// still names it (or cannot be read).
		if v, ok := w.rawLocked(w.ov.jobs, bucketJobs, id); ok {
			if old, err := decodeJobRecord(v); err == nil && old.IdempotencyKey != "" {
				if iv, ok := w.rawLocked(w.ov.idem, bucketIdempotency, old.IdempotencyKey); ok {
					if ir, err := decodeIdempotency(old.IdempotencyKey, iv); err != nil || ir.JobID == id {
						set(w.ov.idem, old.IdempotencyKey, nil)
					}
				}
			}
		}
		set(w.ov.jobs, id, nil)
	}
	for i, j := range e.jobs {
		set(w.ov.jobs, string(j.key), j.val)
		if k := e.idems[i]; len(k.key) > 0 {
			set(w.ov.idem, string(k.key), k.val)
		}
	}
	for _, id := range e.deleteReservations {
		set(w.ov.res, id, nil)
	}
	for _, r := range e.reservations {
		set(w.ov.res, string(r.key), r.val)
	}
	for _, r := range e.sla {
		set(w.ov.sla, string(r.key), r.val)
	}
	for _, r := range e.stats {
		set(w.ov.stats, string(r.key), r.val)
	}
	for _, r := range e.agreements {
		set(w.ov.agreements, string(r.key), r.val)
	}
	for _, id := range e.deleteStanding {
		set(w.ov.standing, id, nil)
	}
	for _, r := range e.standing {
		set(w.ov.standing, string(r.key), r.val)
	}
	if e.siteClock != nil {
		set(w.ov.meta, string(metaKey(SiteClockKey)), e.siteClock)
	}
}

// rawLocked is the current value of key: the overlay's (m), else the
// file's (bucket name); ok false if there is none. mu is held.
func (w *WALStore) rawLocked(m map[string]ovVal, name []byte, key string) ([]byte, bool) {
	if v, ok := m[key]; ok {
		return v.val, v.val != nil
	}
	var out []byte
	err := w.b.view(context.Background(), func(tx *bolt.Tx) error {
		b, err := bucket(tx, name)
		if err == nil {
			out = slices.Clone(b.Get([]byte(key)))
		}
		return err
	})
	return out, err == nil && out != nil
}

// lookup is the value of key in m, one of the overlay's maps: found says
// the overlay has the key (val nil: deleted); otherwise the file's value
// stands.
func (w *WALStore) lookup(m map[string]ovVal, key string) (val []byte, found bool) {
	w.mu.RLock()
	v, ok := m[key]
	w.mu.RUnlock()
	return v.val, ok
}

// checkpointer writes the log to the file when it has grown past a
// threshold (Apply kicks it) and at every interval, until Close.
func (w *WALStore) checkpointer() {
	defer close(w.done)
	t := time.NewTicker(w.ckInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		case <-t.C:
		}
		if err := w.checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
			w.log.Error("checkpoint failed", "err", err)
		}
	}
}

// checkpoint writes every pending record to the file.
func (w *WALStore) checkpoint() error {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	return w.checkpointLocked()
}

// checkpointLocked writes the pending records to bbolt in one
// transaction, with the last one's sequence number, then drops them from
// the overlay and deletes the segments that held them. Appends go on
// meanwhile, to a new segment. cmu is held.
func (w *WALStore) checkpointLocked() error {
	if p := w.failed.Load(); p != nil {
		return *p
	}
	if w.closed.Load() {
		return ErrClosed // Close made the last one
	}
	// The next segment is made before the appends are held up.
	w.mu.RLock()
	some := len(w.pending) > 0
	w.mu.RUnlock()
	if some && w.spare == nil {
		if err := w.prepareSpare(); err != nil {
			return w.fail(err)
		}
	}
	w.wmu.Lock()
	w.mu.Lock()
	recs := w.pending
	w.pending, w.pendingBytes = nil, 0
	w.mu.Unlock()
	var err error
	if len(recs) > 0 {
		err = w.rotate()
	}
	old := w.older
	w.older = nil
	w.wmu.Unlock()
	if err != nil {
		return w.fail(err)
	}
	if err := w.commit(recs); err != nil {
		return w.fail(err)
	}
	if len(recs) > 0 {
		w.mu.Lock()
		w.dropUpTo(recs[len(recs)-1].seq)
		w.mu.Unlock()
	}
	for _, p := range old {
		// A segment that comes back after a crash holds only records the
		// file has: the next open skips them.
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.log.Warn("write-ahead log: cannot delete a checkpointed segment", "path", p, "err", err)
		}
	}
	return nil
}

// commit writes records to bbolt in one transaction, with the last one's
// sequence number.
func (w *WALStore) commit(recs []logRecord) error {
	if len(recs) == 0 {
		return nil
	}
	last := recs[len(recs)-1].seq
	err := w.b.batch(context.Background(), func(tx *bolt.Tx) error {
		for _, r := range recs {
			if err := applyEncoded(tx, r.e); err != nil {
				return fmt.Errorf("log record %d: %w", r.seq, err)
			}
		}
		meta, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return meta.Put(keyLogSeq, binary.BigEndian.AppendUint64(nil, last))
	})
	if err != nil {
		return fmt.Errorf("checkpoint of log records %d to %d: %w", recs[0].seq, last, err)
	}
	return nil
}

// dropUpTo drops from the overlay the values of records up to last, which
// the file now holds. mu is held.
func (w *WALStore) dropUpTo(last uint64) {
	for _, m := range w.ov.all() {
		for k, v := range m {
			if v.seq <= last {
				delete(m, k)
			}
		}
	}
}

// rotate closes the open segment (every record in it is synced) and
// continues in the next one, made ahead by prepareSpare (or now, if there
// is none). wmu and cmu are held.
func (w *WALStore) rotate() error {
	if w.spare == nil {
		if err := w.prepareSpare(); err != nil {
			return err
		}
	}
	if w.f != nil {
		w.f.Close() // its records are synced
		w.older = append(w.older, w.current)
		w.lastSegBytes = w.segBytes
	}
	w.f, w.current, w.segBytes = w.spare, w.sparePath, 0
	w.spare, w.sparePath = nil, ""
	return nil
}

// Preallocation of a segment: twice what the last one held, within these
// bounds (and at most the bytes threshold, if it is higher than the floor).
const (
	minSegmentBytes = 1 << 20
	maxSegmentBytes = 64 << 20
)

// prepareSpare makes the next segment: a new file of zeros, synced, its
// directory entry synced. An append then overwrites blocks the file has,
// so its fdatasync need not write the file's size too. cmu is held.
func (w *WALStore) prepareSpare() error {
	size := min(max(2*w.lastSegBytes, minSegmentBytes), max(min(w.ckBytes, maxSegmentBytes), minSegmentBytes))
	w.gen++
	path := filepath.Join(w.dir, segmentName(w.gen))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write-ahead log: new segment %s: %w", path, err)
	}
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zeros)) {
		if _, err := f.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := syncDir(w.dir); err != nil {
		return fail(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	w.spare, w.sparePath = f, path
	return nil
}

// flushed runs f, a write straight to bbolt (PutMeta,
// PruneIdempotencyKeys), once every change logged before the call is in
// the file, with appends held while f runs. An Apply racing the call may
// be logged between the checkpoint and f: it stays in the overlay and wins
// over f's write to the same key, as if it came after f, which two
// concurrent writes allow.
func (w *WALStore) flushed(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.writable(); err != nil {
		return err
	}
	w.cmu.Lock()
	defer w.cmu.Unlock()
	if err := w.checkpointLocked(); err != nil {
		return err
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return f()
}

// getOver is a Get through the overlay: its value if it has the key,
// else the file's (fromFile).
func getOver[T any](w *WALStore, ctx context.Context, m map[string]ovVal, what, key string,
	decode func([]byte) (T, error), fromFile func(context.Context, string) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if w.closed.Load() {
		return zero, ErrClosed
	}
	v, found := w.lookup(m, key)
	if !found {
		return fromFile(ctx, key)
	}
	if v == nil {
		return zero, fmt.Errorf("%s %q: %w", what, key, ErrNotFound)
	}
	out, err := decode(v)
	if err != nil {
		return zero, fmt.Errorf("%s %q: %w", what, key, err)
	}
	return out, nil
}

// listOver is a List through the overlay: the file's records that the
// overlay leaves alone and the overlay's, in order of id.
func listOver[T any](w *WALStore, ctx context.Context, m map[string]ovVal, what string,
	decode func(key string, v []byte) (T, error), fromFile func(context.Context) ([]T, error), id func(T) string) ([]T, error) {
	if w.closed.Load() {
		return nil, ErrClosed
	}
	w.mu.RLock()
	snap := maps.Clone(m)
	w.mu.RUnlock()
	base, err := fromFile(ctx) // after the snapshot: see WALStore.ListJobs
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(base, func(r T) bool { _, ok := snap[id(r)]; return ok })
	for k, v := range snap {
		if v.val == nil {
			continue
		}
		r, err := decode(k, v.val)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, k, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	return out, nil
}

// GetJob implements JobStore.
func (w *WALStore) GetJob(ctx context.Context, id string) (JobRecord, error) {
	return getOver(w, ctx, w.ov.jobs, "job", id, decodeJobRecord, w.b.GetJob)
}

// PutJob implements JobStore.
func (w *WALStore) PutJob(ctx context.Context, rec JobRecord) error {
	return w.Apply(ctx, Changes{PutJobs: []JobRecord{rec}})
}

// DeleteJob implements JobStore.
func (w *WALStore) DeleteJob(ctx context.Context, id string) error {
	return w.Apply(ctx, Changes{DeleteJobs: []string{id}})
}

// PutJobIfNewKey implements JobStore: the key and the job are looked up
// through the overlay and the job is logged, with no write in between.
func (w *WALStore) PutJobIfNewKey(ctx context.Context, key string, bodyHash []byte, rec JobRecord) (JobRecord, bool, error) {
	if key == "" {
		return JobRecord{}, false, fmt.Errorf("empty idempotency key: %w", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return JobRecord{}, false, err
	}
	rec.IdempotencyKey, rec.BodyHash = key, slices.Clone(bodyHash)
	e, err := encodeChanges(Changes{PutJobs: []JobRecord{rec}})
	if err != nil {
		return JobRecord{}, false, err
	}
	w.wmu.Lock()
	stored, created, err := w.putIfNewKeyLocked(ctx, key, bodyHash, rec, e)
	w.wmu.Unlock()
	if created {
		w.afterAppend()
	}
	if err != nil {
		return JobRecord{}, false, err
	}
	return stored, created, nil
}

func (w *WALStore) putIfNewKeyLocked(ctx context.Context, key string, bodyHash []byte, rec JobRecord, e encChanges) (JobRecord, bool, error) {
	if err := w.writable(); err != nil {
		return JobRecord{}, false, err
	}
	ir, err := w.GetIdempotencyKey(ctx, key)
	switch {
	case err == nil:
		existing, err := w.GetJob(ctx, ir.JobID)
		switch {
		case err == nil:
			if !bytes.Equal(ir.BodyHash, bodyHash) {
				return JobRecord{}, false, fmt.Errorf("key %q (job %s): %w", key, ir.JobID, ErrIdempotencyConflict)
			}
			return existing, false, nil
		case !errors.Is(err, ErrNotFound):
			return JobRecord{}, false, err
		}
		// A key whose job is gone no longer protects anything: reuse it.
	case !errors.Is(err, ErrNotFound):
		return JobRecord{}, false, fmt.Errorf("idempotency key %q: %w", key, err)
	}
	if _, err := w.GetJob(ctx, rec.ID()); err == nil {
		return JobRecord{}, false, fmt.Errorf("job %q: %w", rec.ID(), ErrJobExists)
	} else if !errors.Is(err, ErrNotFound) {
		return JobRecord{}, false, err
	}
	if err := w.appendLocked(e); err != nil {
		return JobRecord{}, false, err
	}
	// Return a copy the caller owns, as decoded from what was written.
	stored, err := decodeJobRecord(e.jobs[0].val)
	return stored, true, err
}

// ListJobs implements JobStore: the file's jobs with the overlay's merged
// in. The overlay is copied before the file is read: a checkpoint drops
// records from the overlay only after the file holds them, so a job is
// either in the copy or in the file the read sees.
func (w *WALStore) ListJobs(ctx context.Context, q JobQuery) ([]JobRecord, string, error) {
	if w.closed.Load() {
		return nil, "", ErrClosed
	}
	w.mu.RLock()
	ov := make(map[string][]byte, len(w.ov.jobs))
	for id, v := range w.ov.jobs {
		ov[id] = v.val
	}
	w.mu.RUnlock()
	return w.b.listJobs(ctx, q, ov)
}

// GetReservation implements ReservationStore.
func (w *WALStore) GetReservation(ctx context.Context, id string) (ReservationRecord, error) {
	return getOver(w, ctx, w.ov.res, "reservation", id, decodeReservation, w.b.GetReservation)
}

// PutReservation implements ReservationStore.
func (w *WALStore) PutReservation(ctx context.Context, r ReservationRecord) error {
	return w.Apply(ctx, Changes{PutReservations: []ReservationRecord{r}})
}

// DeleteReservation implements ReservationStore.
func (w *WALStore) DeleteReservation(ctx context.Context, id string) error {
	return w.Apply(ctx, Changes{DeleteReservations: []string{id}})
}

// ListReservations implements ReservationStore.
func (w *WALStore) ListReservations(ctx context.Context) ([]ReservationRecord, error) {
	return listOver(w, ctx, w.ov.res, "reservation", keyless(decodeReservation), w.b.ListReservations,
		func(r ReservationRecord) string { return r.ID })
}

// keyless adapts a decoder that does not need the record's key.
func keyless[T any](decode func([]byte) (T, error)) func(string, []byte) (T, error) {
	return func(_ string, v []byte) (T, error) { return decode(v) }
}

// GetSLAOutcome implements SLAStore.
func (w *WALStore) GetSLAOutcome(ctx context.Context, jobID string) (SLARecord, error) {
	return getOver(w, ctx, w.ov.sla, "SLA of job", jobID, decodeSLA, w.b.GetSLAOutcome)
}

// PutSLAOutcome implements SLAStore.
func (w *WALStore) PutSLAOutcome(ctx context.Context, r SLARecord) error {
	return w.Apply(ctx, Changes{PutSLAOutcomes: []SLARecord{r}})
}

// ListSLAOutcomes implements SLAStore.
func (w *WALStore) ListSLAOutcomes(ctx context.Context) ([]SLARecord, error) {
	return listOver(w, ctx, w.ov.sla, "SLA of job", keyless(decodeSLA), w.b.ListSLAOutcomes,
		func(r SLARecord) string { return r.JobID })
}

// GetStats implements StatsStore.
func (w *WALStore) GetStats(ctx context.Context, name string) ([]byte, error) {
	return getOver(w, ctx, w.ov.stats, "statistics", name, decodeStats, w.b.GetStats)
}

// PutStats implements StatsStore.
func (w *WALStore) PutStats(ctx context.Context, name string, blob []byte) error {
	return w.Apply(ctx, Changes{PutStats: map[string][]byte{name: blob}})
}

// GetIdempotencyKey implements IdempotencyStore: a map lookup when the
// key is in the overlay.
func (w *WALStore) GetIdempotencyKey(ctx context.Context, key string) (IdempotencyRecord, error) {
	return getOver(w, ctx, w.ov.idem, "idempotency key", key,
		func(v []byte) (IdempotencyRecord, error) { return decodeIdempotency(key, v) }, w.b.GetIdempotencyKey)
}

// PruneIdempotencyKeys implements IdempotencyStore, on the file after a
// checkpoint.
func (w *WALStore) PruneIdempotencyKeys(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := w.flushed(ctx, func() (err error) {
		n, err = w.b.PruneIdempotencyKeys(ctx, before)
		return err
	})
	return n, err
}

// CountIdempotencyKeys implements IdempotencyStore: the overlay's keys
// with the prefix, and the file's that the overlay does not hold, up to
// limit.
func (w *WALStore) CountIdempotencyKeys(ctx context.Context, prefix string, limit int) (int, error) {
	if w.closed.Load() {
		return 0, ErrClosed
	}
	w.mu.RLock()
	snap := make(map[string]bool) // key -> present
	for k, v := range w.ov.idem {
		if strings.HasPrefix(k, prefix) {
			snap[k] = v.val != nil
		}
	}
	w.mu.RUnlock()
	n := 0
	for _, present := range snap {
		if present {
			n++
		}
	}
	err := w.b.view(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketIdempotency)
		if err != nil {
			return err
		}
		p := []byte(prefix)
		c := b.Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && (limit <= 0 || n < limit); k, _ = c.Next() {
			if _, inOverlay := snap[string(k)]; !inOverlay {
				n++
			}
		}
		return nil
	})
	if limit > 0 {
		n = min(n, limit)
	}
	return n, err
}

// SchemaVersion implements MetaStore.
func (w *WALStore) SchemaVersion(ctx context.Context) (int, error) { return w.b.SchemaVersion(ctx) }

// GetMeta implements MetaStore.
func (w *WALStore) GetMeta(ctx context.Context, key string) (string, error) {
	return getOver(w, ctx, w.ov.meta, "meta", string(metaKey(key)),
		func(v []byte) (string, error) { return string(v), nil },
		func(ctx context.Context, _ string) (string, error) { return w.b.GetMeta(ctx, key) })
}

// PutMeta implements MetaStore, on the file after a checkpoint.
func (w *WALStore) PutMeta(ctx context.Context, key, value string) error {
	if key == "" {
		return fmt.Errorf("empty meta key: %w", ErrInvalid)
	}
	return w.flushed(ctx, func() error { return w.b.PutMeta(ctx, key, value) })
}

// NextSequence implements MetaStore, on the file (the log never holds the
// counter, so there is nothing to checkpoint first).
func (w *WALStore) NextSequence(ctx context.Context) (uint64, error) {
	if err := w.writable(); err != nil {
		return 0, err
	}
	return w.b.NextSequence(ctx)
}

// GetAgreement implements AgreementStore.
func (w *WALStore) GetAgreement(ctx context.Context, id string) (AgreementRecord, error) {
	return getOver(w, ctx, w.ov.agreements, "agreement", id, agreementDecoder(id), w.b.GetAgreement)
}

// ListAgreements implements AgreementStore.
func (w *WALStore) ListAgreements(ctx context.Context) ([]AgreementRecord, error) {
	return listOver(w, ctx, w.ov.agreements, "agreement", decodeAgreement, w.b.ListAgreements,
		func(a AgreementRecord) string { return a.ID })
}

// GetStanding implements StandingStore.
func (w *WALStore) GetStanding(ctx context.Context, id string) (StandingRecord, error) {
	return getOver(w, ctx, w.ov.standing, "standing reservation", id, decodeStanding, w.b.GetStanding)
}

// ListStanding implements StandingStore.
func (w *WALStore) ListStanding(ctx context.Context) ([]StandingRecord, error) {
	return listOver(w, ctx, w.ov.standing, "standing reservation", keyless(decodeStanding), w.b.ListStanding,
		func(r StandingRecord) string { return r.ID })
}
