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
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"google.golang.org/protobuf/proto"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// The bucket tree of schema version 4:
//
//	meta/
//	  schema_version  -> decimal ASCII, e.g. "4"
//	  u/<key>         -> PutMeta values
//	  (the bucket's own sequence is NextSequence's counter)
//	jobs/             <job id> -> JobRecord
//	jobs_by_state/    <state as 4-byte big-endian><job id> -> empty   (since v2)
//	jobs_by_user/     <user> 0x00 <job id> -> empty                   (since v2)
//	reservations/     <reservation id> -> ReservationRecord
//	sla/              <job id> -> SlaRecord
//	stats/            <name> -> format byte + blob
//	idempotency/      <key> -> IdempotencyRecord
//	agreements/       <agreement id> -> format byte + body               (since v3)
//	standing/         <reservation id> -> StandingRecord                  (since v4)
var (
	// bucketMeta holds the schema version, PutMeta values and the sequence.
	bucketMeta = []byte("meta")
	// keySchemaVersion is the key of the schema version in bucketMeta.
	keySchemaVersion = []byte("schema_version")
	// metaUserPrefix prefixes PutMeta keys in bucketMeta, away from ours.
	metaUserPrefix = []byte("u/")
	// bucketJobs holds the jobs by id.
	bucketJobs = []byte("jobs")
	// bucketJobsByState indexes job ids by state (schema v2).
	bucketJobsByState = []byte("jobs_by_state")
	// bucketJobsByUser indexes job ids by user (schema v2).
	bucketJobsByUser = []byte("jobs_by_user")
	// bucketReservations holds the reservations by id.
	bucketReservations = []byte("reservations")
	// bucketSLA holds the SLA records by job id.
	bucketSLA = []byte("sla")
	// bucketStats holds the statistics blobs by name.
	bucketStats = []byte("stats")
	// bucketIdempotency holds the idempotency keys.
	bucketIdempotency = []byte("idempotency")
	// bucketAgreements holds delegation agreements by id (schema v3).
	bucketAgreements = []byte("agreements")
	// bucketStanding holds the rules of standing reservations by id
	// (schema v4).
	bucketStanding = []byte("standing")
)

// v1Buckets are the buckets of schema version 1; migrations add the rest.
var v1Buckets = [][]byte{bucketMeta, bucketJobs, bucketReservations, bucketSLA, bucketStats, bucketIdempotency}

// Options configure OpenBolt. A nil *Options means the defaults.
type Options struct {
	// LockTimeout is how long OpenBolt waits for the file lock that another
	// process (or another open in this process) holds before failing with
	// ErrLocked. 0 means DefaultLockTimeout; it is never infinite.
	LockTimeout time.Duration
	// MaxBatchDelay is how long a write waits for concurrent writes to
	// share its transaction and fsync (bbolt's DB.MaxBatchDelay). 0 means
	// DefaultMaxBatchDelay; negative means no wait: each write commits at
	// once, for a single writer that groups its own commits (the node's
	// event loop). A lone writer otherwise pays the whole delay on every
	// write; concurrent writers share one fsync. See BenchmarkBoltPutJob.
	MaxBatchDelay time.Duration
	// Logger receives migration and backup messages. nil discards them.
	Logger *slog.Logger
	// ReadOnly opens the file for Check alone (`fedsched check`): with a
	// shared lock, so that it fails with ErrLocked while a node has the
	// file, and without migrating or writing anything.
	ReadOnly bool
	// CheckpointRecords, CheckpointBytes and CheckpointInterval are for
	// OpenWAL (OpenBolt refuses them): its checkpointer writes the log to
	// the file when the log holds this many records, or this many bytes,
	// and at least once per interval, whichever comes first. 0 means
	// DefaultCheckpointRecords, DefaultCheckpointBytes and
	// DefaultCheckpointInterval; negative is invalid.
	CheckpointRecords  int
	CheckpointBytes    int64
	CheckpointInterval time.Duration
}

// Defaults of Options.
const (
	// DefaultLockTimeout is the LockTimeout used when Options leaves it
	// zero.
	DefaultLockTimeout = time.Second
	// DefaultMaxBatchDelay is the MaxBatchDelay used when Options leaves it
	// zero. On the project's 2-core development machine (ext4),
	// BenchmarkBoltPutJob measured 75 to 100 durable writes a second for a
	// lone writer with bbolt's own default of 10 ms, 250 to 600 with 1 ms,
	// and 11,000 to 14,000 a second with 16 concurrent writers at 1 ms
	// (writes that arrive during one commit's fsync form the next batch).
	DefaultMaxBatchDelay = time.Millisecond
)

// BoltStore is the durable Store: one bbolt file. Make one with OpenBolt.
type BoltStore struct {
	db      *bolt.DB
	path    string
	dataDir string
	closed  atomic.Bool
	// noBatch: each write commits alone, in the caller's goroutine
	// (MaxBatchDelay < 0), where a panic of bbolt can be recovered.
	noBatch bool
	// mark is the transaction high-water mark (nil when read-only).
	mark *txidMark
	// markAhead is the mark found at open when it was above the file's
	// transaction txidAtOpen (read-only opens only: others fail).
	markAhead, txidAtOpen uint64
}

var _ Store = (*BoltStore)(nil)

// OpenBolt opens (creating if needed) the store file of a data directory,
// Path(dataDir), creating the directory with mode 0700 if it does not exist.
// An older schema is migrated after a backup copy of the file is written
// next to it; see the package doc. IMPORTANT: the file is locked for as long
// as the store is open; Close it.
func OpenBolt(dataDir string, opts *Options) (*BoltStore, error) {
	if opts != nil && (opts.CheckpointRecords != 0 || opts.CheckpointBytes != 0 || opts.CheckpointInterval != 0) {
		return nil, fmt.Errorf("open store: the checkpoint settings are the write-ahead log's (OpenWAL); OpenBolt has none: %w", ErrInvalid)
	}
	return openBolt(dataDir, opts, true)
}

// openBolt is OpenBolt; with guardLog it refuses a data directory whose
// write-ahead log holds records (OpenWAL must replay them: the file alone
// misses acknowledged changes).
func openBolt(dataDir string, opts *Options, guardLog bool) (*BoltStore, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	path := Path(dataDir)
	// The free-page list is not written at each commit (it is rebuilt
	// from the pages when the file is opened) and is kept as a map: each
	// commit then writes and syncs fewer pages, and the cost of a commit
	// grows less with the file (docs/PERFORMANCE.md, BenchmarkNodeThroughput:
	// durable submits +40 % at 1k and 10k jobs). etcd runs bbolt the same
	// way. Files stay readable with or without the setting.
	db, err := openDB(path, &bolt.Options{Timeout: o.LockTimeout, ReadOnly: o.ReadOnly, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: no lock after %v; is another fedsched node using data dir %s? %w",
			path, o.LockTimeout, dataDir, ErrLocked)
	}
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
			err = fmt.Errorf("%w: %w", err, ErrCorrupt)
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("open store %s: %w; %s", path, err, corruptAdvice(dataDir))
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	switch {
	case o.MaxBatchDelay == 0:
		db.MaxBatchDelay = DefaultMaxBatchDelay
	case o.MaxBatchDelay < 0:
		db.MaxBatchDelay = 0
	default:
		db.MaxBatchDelay = o.MaxBatchDelay
	}
	s := &BoltStore{db: db, path: path, dataDir: dataDir, noBatch: o.MaxBatchDelay < 0}
	fail := func(err error) (*BoltStore, error) {
		s.mark.close() //nolint:errcheck // failing anyway
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	txid, err := s.txid()
	if err != nil {
		return fail(err)
	}
	mark, at, valid, err := openMark(path+MarkSuffix, o.ReadOnly)
	if err != nil {
		return fail(err)
	}
	s.mark = mark
	if !valid {
		o.Logger.Warn("transaction mark unreadable; rewriting it (a rollback of the file before now cannot be detected)", "path", path+MarkSuffix)
	}
	if at > txid {
		if !o.ReadOnly {
			return fail(fmt.Errorf("the file is at transaction %d but %s%s records that transaction %d was committed: "+
				"committed writes were lost (a damaged meta page, or an older copy of the file): %w; %s "+
				"(or, to accept the loss, delete %s%s)", txid, FileName, MarkSuffix, at, ErrCorrupt, corruptAdvice(dataDir), path, MarkSuffix))
		}
		s.markAhead, s.txidAtOpen = at, txid
	}
	if guardLog {
		if err := logIsEmpty(dataDir); err != nil {
			return fail(err)
		}
	}
	if o.ReadOnly {
		s.mark.close() //nolint:errcheck // read only
		s.mark = nil
		return s, nil
	}
	if err := s.upgrade(o.Logger); err != nil {
		return fail(err)
	}
	if txid, err = s.txid(); err == nil {
		err = s.mark.advance(txid)
	}
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// logIsEmpty fails if the write-ahead log of dataDir holds a record.
func logIsEmpty(dataDir string) error {
	dir := filepath.Join(dataDir, LogDirName)
	segs, err := listSegments(dir)
	if err != nil {
		return err
	}
	for _, sg := range segs {
		b, err := os.ReadFile(sg.path)
		if err != nil {
			return fmt.Errorf("read the write-ahead log: %w", err)
		}
		if slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
			return fmt.Errorf("the write-ahead log %s may hold changes: open the store with its log (store.log: true) to replay them: %w", dir, ErrLogNotReplayed)
		}
	}
	return nil
}

// openDB is bolt.Open with bbolt's panics on a damaged file turned into
// errors.
func openDB(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, recovered(r, path)
		}
	}()
	return bolt.Open(path, 0o600, opts)
}

// txid returns the id of the file's last committed transaction.
func (s *BoltStore) txid() (uint64, error) {
	var id int
	err := s.view(context.Background(), func(tx *bolt.Tx) error {
		id = tx.ID()
		return nil
	})
	return uint64(max(id, 0)), err
}

// Name returns "bolt".
func (s *BoltStore) Name() string { return "bolt" }

// Path returns the path of the store's file.
func (s *BoltStore) Path() string { return s.path }

// Close closes the file and releases its lock. It is safe to call more than
// once.
func (s *BoltStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.db.Close()
	if merr := s.mark.close(); err == nil {
		err = merr
	}
	return err
}

// view runs fn in a read-only transaction. A panic of bbolt (a damaged
// page) becomes an error wrapping ErrCorrupt.
func (s *BoltStore) view(ctx context.Context, fn func(*bolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			err = recovered(r, s.path)
		}
	}()
	return mapBoltErr(s.db.View(fn))
}

// batch runs fn in a write transaction shared with concurrent callers (or
// alone, with noBatch) and returns once it is durable, and the transaction
// mark with it. fn may run more than once: it must assign its results
// afresh on every run. A panic of bbolt in fn becomes an error wrapping
// ErrCorrupt (and, with noBatch, in the commit too; a batch commits on
// bbolt's own goroutine).
func (s *BoltStore) batch(ctx context.Context, fn func(*bolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	var txid int
	guarded := func(tx *bolt.Tx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = recovered(r, s.path)
			}
		}()
		txid = tx.ID()
		return fn(tx)
	}
	if s.noBatch {
		defer func() {
			if r := recover(); r != nil {
				err = recovered(r, s.path)
			}
		}()
		err = s.db.Update(guarded)
	} else {
		err = s.db.Batch(guarded)
	}
	if err != nil {
		return mapBoltErr(err)
	}
	return s.mark.advance(uint64(max(txid, 0)))
}

func mapBoltErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w (%v)", ErrClosed, err)
	}
	return err
}

// bucket returns a top-level bucket that must exist.
func bucket(tx *bolt.Tx, name []byte) (*bolt.Bucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("bucket %q missing: %w", name, ErrCorrupt)
	}
	return b, nil
}

func stateKey(state fedschedv1.JobState, id string) []byte {
	k := make([]byte, 4, 4+len(id))
	binary.BigEndian.PutUint32(k, uint32(state))
	return append(k, id...)
}

func userKey(user, id string) []byte {
	k := make([]byte, 0, len(user)+1+len(id))
	k = append(k, user...)
	k = append(k, 0)
	return append(k, id...)
}

// GetJob implements JobStore.
func (s *BoltStore) GetJob(ctx context.Context, id string) (JobRecord, error) {
	var rec JobRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		rec, err = getJob(tx, id)
		return err
	})
	return rec, err
}

func getJob(tx *bolt.Tx, id string) (JobRecord, error) {
	b, err := bucket(tx, bucketJobs)
	if err != nil {
		return JobRecord{}, err
	}
	v := b.Get([]byte(id))
	if v == nil {
		return JobRecord{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	rec, err := decodeJobRecord(v)
	if err != nil {
		return JobRecord{}, fmt.Errorf("job %q: %w", id, err)
	}
	return rec, nil
}

// putJob writes an encoded job and keeps the indexes in step. The index
// keys of the version it replaces are read with indexedFields (not a decode
// of the whole job), and a key that stays the same is left alone: a
// rewrite of an old job does not dirty its user's index page, nor its
// state's when the state did not change (bbolt copies a page's every
// entry into memory to change one).
func putJob(tx *bolt.Tx, id string, enc []byte) error {
	state, user, err := indexedFields(enc)
	if err != nil {
		return fmt.Errorf("job %q: %w", id, err)
	}
	jobs, err := bucket(tx, bucketJobs)
	if err != nil {
		return err
	}
	oldState, oldUser, had := storedIndexFields(jobs, id)
	if err := jobs.Put([]byte(id), enc); err != nil {
		return err
	}
	byState, byUser, err := indexBuckets(tx)
	if err != nil {
		return err
	}
	if err := moveIndexKey(byState, had, stateKey(oldState, id), stateKey(state, id)); err != nil {
		return err
	}
	return moveIndexKey(byUser, had, userKey(oldUser, id), userKey(user, id))
}

// moveIndexKey replaces the index key old (if had) by key. When they are
// equal the key is only written if it is missing.
func moveIndexKey(b *bolt.Bucket, had bool, old, key []byte) error {
	if had && bytes.Equal(old, key) {
		if b.Get(key) != nil {
			return nil
		}
	} else if had {
		if err := b.Delete(old); err != nil {
			return err
		}
	}
	return b.Put(key, nil)
}

// storedIndexFields is the state and user of the stored version of job id
// (indexedFields), ok false when there is none or it cannot be read: an
// old version we cannot read leaves index entries we cannot name, which
// is harmless, since ListJobs checks every candidate's record.
func storedIndexFields(jobs *bolt.Bucket, id string) (state fedschedv1.JobState, user string, ok bool) {
	v := jobs.Get([]byte(id))
	if v == nil {
		return 0, "", false
	}
	state, user, err := indexedFields(v)
	return state, user, err == nil
}

// indexBuckets are the jobs' indexes by state and by user.
func indexBuckets(tx *bolt.Tx) (byState, byUser *bolt.Bucket, err error) {
	if byState, err = bucket(tx, bucketJobsByState); err != nil {
		return nil, nil, err
	}
	if byUser, err = bucket(tx, bucketJobsByUser); err != nil {
		return nil, nil, err
	}
	return byState, byUser, nil
}

func indexJob(tx *bolt.Tx, rec JobRecord) error {
	byState, byUser, err := indexBuckets(tx)
	if err != nil {
		return err
	}
	if err := byState.Put(stateKey(rec.Job.GetState(), rec.ID()), nil); err != nil {
		return err
	}
	return byUser.Put(userKey(rec.Job.GetSpec().GetUser(), rec.ID()), nil)
}

// unindexJob removes the index entries of the stored version of a job, if
// any.
func unindexJob(tx *bolt.Tx, id string) error {
	jobs, err := bucket(tx, bucketJobs)
	if err != nil {
		return err
	}
	state, user, ok := storedIndexFields(jobs, id)
	if !ok {
		return nil // nothing to clean, or nothing we can name
	}
	byState, byUser, err := indexBuckets(tx)
	if err != nil {
		return err
	}
	if err := byState.Delete(stateKey(state, id)); err != nil {
		return err
	}
	return byUser.Delete(userKey(user, id))
}

func deleteJob(tx *bolt.Tx, id string) error {
	old, err := getJob(tx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if err := unindexJob(tx, id); err != nil {
		return err
	}
	if old.IdempotencyKey != "" {
		idem, err := bucket(tx, bucketIdempotency)
		if err != nil {
			return err
		}
		if v := idem.Get([]byte(old.IdempotencyKey)); v != nil {
			if ir, err := decodeIdempotency(old.IdempotencyKey, v); err != nil || ir.JobID == id {
				if err := idem.Delete([]byte(old.IdempotencyKey)); err != nil {
					return err
				}
			}
		}
	}
	jobs, err := bucket(tx, bucketJobs)
	if err != nil {
		return err
	}
	return jobs.Delete([]byte(id))
}

// PutJob implements JobStore.
func (s *BoltStore) PutJob(ctx context.Context, rec JobRecord) error {
	return s.Apply(ctx, Changes{PutJobs: []JobRecord{rec}})
}

// PutJobIfNewKey implements JobStore.
func (s *BoltStore) PutJobIfNewKey(ctx context.Context, key string, bodyHash []byte, rec JobRecord) (JobRecord, bool, error) {
	if key == "" {
		return JobRecord{}, false, fmt.Errorf("empty idempotency key: %w", ErrInvalid)
	}
	rec.IdempotencyKey, rec.BodyHash = key, slices.Clone(bodyHash)
	enc, err := encodeJobRecord(rec)
	if err != nil {
		return JobRecord{}, false, err
	}
	ienc, err := encodeIdempotency(IdempotencyRecord{JobID: rec.ID(), BodyHash: bodyHash, CreatedAt: keyCreatedAt(rec)})
	if err != nil {
		return JobRecord{}, false, err
	}
	var (
		stored  JobRecord
		created bool
	)
	err = s.batch(ctx, func(tx *bolt.Tx) error {
		stored, created = JobRecord{}, false // fn may run twice
		idem, err := bucket(tx, bucketIdempotency)
		if err != nil {
			return err
		}
		if v := idem.Get([]byte(key)); v != nil {
			ir, err := decodeIdempotency(key, v)
			if err != nil {
				return fmt.Errorf("idempotency key %q: %w", key, err)
			}
			existing, err := getJob(tx, ir.JobID)
			switch {
			case err == nil:
				if !bytes.Equal(ir.BodyHash, bodyHash) {
					return fmt.Errorf("key %q (job %s): %w", key, ir.JobID, ErrIdempotencyConflict)
				}
				stored = existing
				return nil
			case !errors.Is(err, ErrNotFound):
				return err
			}
			// A key whose job is gone no longer protects anything: reuse it.
		}
		if _, err := getJob(tx, rec.ID()); err == nil {
			return fmt.Errorf("job %q: %w", rec.ID(), ErrJobExists)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := putJob(tx, rec.ID(), enc); err != nil {
			return err
		}
		if err := idem.Put([]byte(key), ienc); err != nil {
			return err
		}
		stored, created = rec, true
		return nil
	})
	if err != nil {
		return JobRecord{}, false, err
	}
	if created {
		// Return a copy the caller owns, as decoded from what was written.
		stored, err = decodeJobRecord(enc)
	}
	return stored, created, err
}

// DeleteJob implements JobStore.
func (s *BoltStore) DeleteJob(ctx context.Context, id string) error {
	return s.Apply(ctx, Changes{DeleteJobs: []string{id}})
}

// ListJobs implements JobStore. It walks the user index when a user is
// given, the state index when only states are given, and the jobs bucket
// otherwise; all three are ordered by job id.
func (s *BoltStore) ListJobs(ctx context.Context, q JobQuery) ([]JobRecord, string, error) {
	return s.listJobs(ctx, q, nil)
}

// listJobs is ListJobs over the jobs of the file with ov laid on top: the
// encoded job (nil: deleted) of every id the write-ahead log has changed
// since its last checkpoint (WALStore). The jobs of ov are merged in order
// of id; only those the page returns are decoded.
func (s *BoltStore) listJobs(ctx context.Context, q JobQuery, ov map[string][]byte) ([]JobRecord, string, error) {
	after, err := q.after()
	if err != nil {
		return nil, "", err
	}
	var cands []enc // ov's jobs > after that match q, by id
	for id, v := range ov {
		if v == nil || id <= after {
			continue
		}
		state, user, err := indexedFields(v)
		if err != nil {
			return nil, "", fmt.Errorf("job %q: %w", id, err)
		}
		if (q.User == "" || user == q.User) && (len(q.States) == 0 || slices.Contains(q.States, state)) {
			cands = append(cands, enc{[]byte(id), v})
		}
	}
	slices.SortFunc(cands, func(a, b enc) int { return bytes.Compare(a.key, b.key) })
	var (
		out  []JobRecord
		next string
		used int
	)
	err = s.view(ctx, func(tx *bolt.Tx) error {
		ids, err := jobIDs(tx, q, after)
		if err != nil {
			return err
		}
		// fromFile is the file's next matching job that ov leaves alone.
		fromFile := func() (JobRecord, bool, error) {
			for id, ok := ids(); ok; id, ok = ids() {
				if _, changed := ov[id]; changed {
					continue
				}
				rec, err := getJob(tx, id)
				if errors.Is(err, ErrNotFound) {
					continue // a stale index entry
				}
				if err != nil {
					return JobRecord{}, false, err
				}
				if q.matches(rec.Job) {
					return rec, true, nil
				}
			}
			return JobRecord{}, false, nil
		}
		head, more, err := fromFile()
		for err == nil && (more || len(cands) > 0) {
			var rec JobRecord
			if more && (len(cands) == 0 || head.ID() < string(cands[0].key)) {
				rec = head
				head, more, err = fromFile()
			} else {
				if rec, err = decodeJobRecord(cands[0].val); err != nil {
					return fmt.Errorf("job %q: %w", cands[0].key, err)
				}
				cands = cands[1:]
			}
			if q.pageFull(out, used, rec) {
				next = q.makePageToken(out[len(out)-1].ID())
				return nil
			}
			out = append(out, rec)
			used += proto.Size(rec.Job)
		}
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// jobIDs returns an iterator over candidate job ids > after in ascending
// order: a superset of the jobs matching q, chosen from the best index.
func jobIDs(tx *bolt.Tx, q JobQuery, after string) (func() (string, bool), error) {
	switch {
	case q.User != "":
		b, err := bucket(tx, bucketJobsByUser)
		if err != nil {
			return nil, err
		}
		return prefixIDs(b.Cursor(), userKey(q.User, ""), after), nil
	case len(q.States) > 0:
		b, err := bucket(tx, bucketJobsByState)
		if err != nil {
			return nil, err
		}
		states := slices.Clone(q.States)
		slices.Sort(states)
		states = slices.Compact(states)
		var its []func() (string, bool)
		for _, st := range states {
			its = append(its, prefixIDs(b.Cursor(), stateKey(st, ""), after))
		}
		return mergeIDs(its), nil
	default:
		b, err := bucket(tx, bucketJobs)
		if err != nil {
			return nil, err
		}
		return prefixIDs(b.Cursor(), nil, after), nil
	}
}

// prefixIDs iterates the keys of c that start with prefix and whose rest (a
// job id) is > after, yielding the rest.
func prefixIDs(c *bolt.Cursor, prefix []byte, after string) func() (string, bool) {
	seek := append(slices.Clone(prefix), after...)
	k, _ := c.Seek(seek)
	if k != nil && after != "" && bytes.Equal(k, seek) {
		k, _ = c.Next()
	}
	return func() (string, bool) {
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return "", false
		}
		id := string(k[len(prefix):])
		k, _ = c.Next()
		return id, true
	}
}

// mergeIDs merges ascending iterators of distinct ids into one.
func mergeIDs(its []func() (string, bool)) func() (string, bool) {
	heads := make([]string, len(its))
	live := make([]bool, len(its))
	for i, it := range its {
		heads[i], live[i] = it()
	}
	return func() (string, bool) {
		best := -1
		for i := range its {
			if live[i] && (best < 0 || heads[i] < heads[best]) {
				best = i
			}
		}
		if best < 0 {
			return "", false
		}
		id := heads[best]
		heads[best], live[best] = its[best]()
		return id, true
	}
}

// GetReservation returns one reservation, or ErrNotFound.
func (s *BoltStore) GetReservation(ctx context.Context, id string) (ReservationRecord, error) {
	return getRecord(s, ctx, bucketReservations, "reservation", id, decodeReservation)
}

// PutReservation implements ReservationStore.
func (s *BoltStore) PutReservation(ctx context.Context, r ReservationRecord) error {
	return s.Apply(ctx, Changes{PutReservations: []ReservationRecord{r}})
}

// DeleteReservation implements ReservationStore.
func (s *BoltStore) DeleteReservation(ctx context.Context, id string) error {
	return s.Apply(ctx, Changes{DeleteReservations: []string{id}})
}

// ListReservations returns every reservation in ascending order of id.
func (s *BoltStore) ListReservations(ctx context.Context) ([]ReservationRecord, error) {
	return listRecords(s, ctx, bucketReservations, "reservation", decodeReservation)
}

// GetSLAOutcome implements SLAStore.
func (s *BoltStore) GetSLAOutcome(ctx context.Context, jobID string) (SLARecord, error) {
	var r SLARecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketSLA)
		if err != nil {
			return err
		}
		v := b.Get([]byte(jobID))
		if v == nil {
			return fmt.Errorf("SLA of job %q: %w", jobID, ErrNotFound)
		}
		r, err = decodeSLA(v)
		return err
	})
	return r, err
}

// PutSLAOutcome implements SLAStore.
func (s *BoltStore) PutSLAOutcome(ctx context.Context, r SLARecord) error {
	return s.Apply(ctx, Changes{PutSLAOutcomes: []SLARecord{r}})
}

// ListSLAOutcomes implements SLAStore.
func (s *BoltStore) ListSLAOutcomes(ctx context.Context) ([]SLARecord, error) {
	var out []SLARecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketSLA)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			r, err := decodeSLA(v)
			if err != nil {
				return fmt.Errorf("SLA of job %q: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// GetStats implements StatsStore.
func (s *BoltStore) GetStats(ctx context.Context, name string) ([]byte, error) {
	return getRecord(s, ctx, bucketStats, "statistics", name, decodeStats)
}

// decodeStats decodes a stored statistics blob: a format byte and the
// blob.
func decodeStats(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != recordFormat {
		return nil, fmt.Errorf("unknown record format: %w", ErrCorrupt)
	}
	return slices.Clone(v[1:]), nil
}

// PutStats implements StatsStore.
func (s *BoltStore) PutStats(ctx context.Context, name string, blob []byte) error {
	return s.Apply(ctx, Changes{PutStats: map[string][]byte{name: blob}})
}

// GetIdempotencyKey implements IdempotencyStore.
func (s *BoltStore) GetIdempotencyKey(ctx context.Context, key string) (IdempotencyRecord, error) {
	var r IdempotencyRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketIdempotency)
		if err != nil {
			return err
		}
		v := b.Get([]byte(key))
		if v == nil {
			return fmt.Errorf("idempotency key %q: %w", key, ErrNotFound)
		}
		r, err = decodeIdempotency(key, v)
		return err
	})
	return r, err
}

// PruneIdempotencyKeys implements IdempotencyStore.
func (s *BoltStore) PruneIdempotencyKeys(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		n = 0
		b, err := bucket(tx, bucketIdempotency)
		if err != nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; {
			r, err := decodeIdempotency(string(k), v)
			if err != nil {
				return fmt.Errorf("idempotency key %q: %w", k, err)
			}
			if !r.CreatedAt.Before(before) {
				k, v = c.Next()
				continue
			}
			// Cursor.Delete leaves the cursor on the next item in bbolt, but
			// re-seeking is the documented-safe way to continue.
			next := slices.Clone(k)
			if err := c.Delete(); err != nil {
				return err
			}
			n++
			k, v = c.Seek(next)
		}
		return nil
	})
	return n, err
}

// CountIdempotencyKeys implements IdempotencyStore: a cursor walk over the
// prefix's keys, which bbolt keeps sorted.
func (s *BoltStore) CountIdempotencyKeys(ctx context.Context, prefix string, limit int) (int, error) {
	var n int
	err := s.view(ctx, func(tx *bolt.Tx) error {
		n = 0
		b, err := bucket(tx, bucketIdempotency)
		if err != nil {
			return err
		}
		p := []byte(prefix)
		c := b.Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && (limit <= 0 || n < limit); k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// SchemaVersion implements MetaStore.
func (s *BoltStore) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		v, err = schemaVersion(tx)
		return err
	})
	return v, err
}

// metaKey is the bucketMeta key of the MetaStore key key (PutMeta's
// keys and the SiteClock a change keeps), under metaUserPrefix.
func metaKey(key string) []byte {
	return append(slices.Clone(metaUserPrefix), key...)
}

// GetMeta implements MetaStore.
func (s *BoltStore) GetMeta(ctx context.Context, key string) (string, error) {
	var val string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		v := b.Get(metaKey(key))
		if v == nil {
			return fmt.Errorf("meta %q: %w", key, ErrNotFound)
		}
		val = string(v)
		return nil
	})
	return val, err
}

// PutMeta implements MetaStore.
func (s *BoltStore) PutMeta(ctx context.Context, key, value string) error {
	if key == "" {
		return fmt.Errorf("empty meta key: %w", ErrInvalid)
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(metaKey(key), []byte(value))
	})
}

// NextSequence implements MetaStore.
func (s *BoltStore) NextSequence(ctx context.Context) (uint64, error) {
	var n uint64
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		n, err = b.NextSequence()
		return err
	})
	return n, err
}

// Apply implements Store.
func (s *BoltStore) Apply(ctx context.Context, c Changes) error {
	e, err := encodeChanges(c)
	if err != nil {
		return err
	}
	return s.batch(ctx, func(tx *bolt.Tx) error { return applyEncoded(tx, e) })
}

// encChanges is a Changes validated and encoded: the values are the bytes
// bbolt stores, and the write-ahead log (WALStore) logs exactly these.
type encChanges struct {
	deleteJobs []string
	// jobs are encoded JobRecords by id; idems[i] is the idempotency key
	// recorded with jobs[i] (an empty key: none).
	jobs, idems        []enc
	deleteReservations []string
	reservations       []enc
	sla                []enc
	// stats and agreements carry their format byte.
	stats, agreements []enc
	deleteStanding    []string
	standing          []enc
	// siteClock is SiteClock.String's form; nil leaves it.
	siteClock []byte
}

// encodeChanges validates and encodes c. Statistics are put in order of
// name, so that the same Changes encode the same way.
func encodeChanges(c Changes) (encChanges, error) {
	if err := validateChanges(c); err != nil {
		return encChanges{}, err
	}
	encode := func(n int, f func(i int) (string, []byte, error)) ([]enc, error) {
		out := make([]enc, 0, n)
		for i := range n {
			k, v, err := f(i)
			if err != nil {
				return nil, err
			}
			out = append(out, enc{[]byte(k), v})
		}
		return out, nil
	}
	e := encChanges{deleteJobs: c.DeleteJobs, deleteReservations: c.DeleteReservations, deleteStanding: c.DeleteStanding}
	var err error
	if e.jobs, err = encode(len(c.PutJobs), func(i int) (string, []byte, error) {
		b, err := encodeJobRecord(c.PutJobs[i])
		return c.PutJobs[i].ID(), b, err
	}); err != nil {
		return encChanges{}, err
	}
	if e.idems, err = encode(len(c.PutJobs), func(i int) (string, []byte, error) {
		rec := c.PutJobs[i]
		if rec.IdempotencyKey == "" {
			return "", nil, nil
		}
		b, err := encodeIdempotency(IdempotencyRecord{JobID: rec.ID(), BodyHash: rec.BodyHash, CreatedAt: keyCreatedAt(rec)})
		return rec.IdempotencyKey, b, err
	}); err != nil {
		return encChanges{}, err
	}
	if e.reservations, err = encode(len(c.PutReservations), func(i int) (string, []byte, error) {
		b, err := encodeReservation(c.PutReservations[i])
		return c.PutReservations[i].ID, b, err
	}); err != nil {
		return encChanges{}, err
	}
	if e.sla, err = encode(len(c.PutSLAOutcomes), func(i int) (string, []byte, error) {
		b, err := encodeSLA(c.PutSLAOutcomes[i])
		return c.PutSLAOutcomes[i].JobID, b, err
	}); err != nil {
		return encChanges{}, err
	}
	if e.standing, err = encode(len(c.PutStanding), func(i int) (string, []byte, error) {
		b, err := encodeStanding(c.PutStanding[i])
		return c.PutStanding[i].ID, b, err
	}); err != nil {
		return encChanges{}, err
	}
	for _, name := range slices.Sorted(maps.Keys(c.PutStats)) {
		e.stats = append(e.stats, enc{[]byte(name), append([]byte{recordFormat}, c.PutStats[name]...)})
	}
	for _, a := range c.PutAgreements {
		e.agreements = append(e.agreements, enc{[]byte(a.ID), append([]byte{recordFormat}, a.Body...)})
	}
	if c.SiteClock != nil {
		e.siteClock = []byte(c.SiteClock.String())
	}
	return e, nil
}

// applyEncoded writes e inside tx: deletions before puts of the same kind.
func applyEncoded(tx *bolt.Tx, e encChanges) error {
	for _, id := range e.deleteJobs {
		if err := deleteJob(tx, id); err != nil {
			return err
		}
	}
	idem, err := bucket(tx, bucketIdempotency)
	if err != nil {
		return err
	}
	for i, j := range e.jobs {
		if err := putJob(tx, string(j.key), j.val); err != nil {
			return err
		}
		if k := e.idems[i]; len(k.key) > 0 {
			if err := idem.Put(k.key, k.val); err != nil {
				return err
			}
		}
	}
	if err := writeBucket(tx, bucketReservations, e.deleteReservations, e.reservations); err != nil {
		return err
	}
	if err := writeBucket(tx, bucketSLA, nil, e.sla); err != nil {
		return err
	}
	if err := writeBucket(tx, bucketAgreements, nil, e.agreements); err != nil {
		return err
	}
	if len(e.deleteStanding) > 0 || len(e.standing) > 0 {
		if err := writeBucket(tx, bucketStanding, e.deleteStanding, e.standing); err != nil {
			return err
		}
	}
	if err := writeBucket(tx, bucketStats, nil, e.stats); err != nil {
		return err
	}
	if e.siteClock != nil {
		meta, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return meta.Put(metaKey(SiteClockKey), e.siteClock)
	}
	return nil
}

// GetAgreement returns one agreement, or ErrNotFound.
func (s *BoltStore) GetAgreement(ctx context.Context, id string) (AgreementRecord, error) {
	return getRecord(s, ctx, bucketAgreements, "agreement", id, agreementDecoder(id))
}

// ListAgreements returns every agreement in ascending order of id.
func (s *BoltStore) ListAgreements(ctx context.Context) ([]AgreementRecord, error) {
	var out []AgreementRecord
	err := s.eachRecord(ctx, bucketAgreements, func(k, v []byte) error {
		a, err := decodeAgreement(string(k), v)
		out = append(out, a)
		return err
	})
	return out, err
}

// GetStanding returns one standing reservation rule, or ErrNotFound.
func (s *BoltStore) GetStanding(ctx context.Context, id string) (StandingRecord, error) {
	return getRecord(s, ctx, bucketStanding, "standing reservation", id, decodeStanding)
}

// ListStanding returns every standing reservation rule in ascending order
// of id.
func (s *BoltStore) ListStanding(ctx context.Context) ([]StandingRecord, error) {
	return listRecords(s, ctx, bucketStanding, "standing reservation", decodeStanding)
}

// getRecord reads one record by key from a bucket and decodes it: the one
// shape of every Get of the store. what names the record in errors.
func getRecord[T any](s *BoltStore, ctx context.Context, name []byte, what, id string, decode func([]byte) (T, error)) (T, error) {
	var out T
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, name)
		if err != nil {
			return err
		}
		v := b.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%s %q: %w", what, id, ErrNotFound)
		}
		if out, err = decode(v); err != nil {
			return fmt.Errorf("%s %q: %w", what, id, err)
		}
		return nil
	})
	return out, err
}

// listRecords decodes every record of a bucket in key order.
func listRecords[T any](s *BoltStore, ctx context.Context, name []byte, what string, decode func([]byte) (T, error)) ([]T, error) {
	var out []T
	err := s.eachRecord(ctx, name, func(k, v []byte) error {
		r, err := decode(v)
		if err != nil {
			return fmt.Errorf("%s %q: %w", what, k, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// eachRecord calls f with every key and value of a bucket, in key order.
func (s *BoltStore) eachRecord(ctx context.Context, name []byte, f func(k, v []byte) error) error {
	return s.view(ctx, func(tx *bolt.Tx) error {
		b, err := bucket(tx, name)
		if err != nil {
			return err
		}
		return b.ForEach(f)
	})
}

// agreementDecoder decodes the agreement stored under id.
func agreementDecoder(id string) func([]byte) (AgreementRecord, error) {
	return func(v []byte) (AgreementRecord, error) { return decodeAgreement(id, v) }
}

// enc is one encoded record: its key and its stored value.
type enc struct {
	key, val []byte
}

// writeBucket deletes then puts records in one bucket, inside tx.
func writeBucket(tx *bolt.Tx, name []byte, deletes []string, puts []enc) error {
	b, err := bucket(tx, name)
	if err != nil {
		return err
	}
	for _, id := range deletes {
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
	}
	for _, e := range puts {
		if err := b.Put(e.key, e.val); err != nil {
			return err
		}
	}
	return nil
}
