package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// What the store can and cannot detect of a damaged file (see
// docs/operations.md, "Corruption"):
//
//   - A damaged page that a read reaches makes bbolt panic; every
//     transaction of BoltStore recovers that panic into an error wrapping
//     ErrCorrupt, and Check walks every page and record before the node
//     serves, so a damaged page is found at start-up, not mid-request.
//   - A damaged meta page is one bbolt itself cannot tell from the last
//     transaction not having been written: it silently opens the file at
//     the transaction before. The high-water mark below catches that.
//   - A value damaged inside a page that still looks valid is caught when
//     its record is decoded (Check decodes them all).
//   - Not detectable: a whole file replaced by an older consistent copy
//     together with its high-water mark file, or damage to both meta pages
//     and the mark file at once.

// MarkSuffix is appended to the store file's name to name its high-water
// mark file: <data dir>/fedsched.db.txid.
const MarkSuffix = ".txid"

// txidMark is the high-water mark of the store's transactions: the id of
// the last committed write transaction, written after every commit to a
// file bbolt does not manage. A store whose file is at an earlier
// transaction than its mark has lost committed (acknowledged) writes.
//
// The mark is written after the commit's own syncs, into the page cache,
// and synced at Close: it survives a crash of the process at once, and a
// crash of the machine once the kernel has written it back (seconds). So it
// is never ahead of what bbolt made durable (no false alarm), and at worst a
// few seconds behind after a power loss, which only narrows what can be
// detected. Syncing it on every commit cost a third fdatasync per commit:
// BenchmarkBoltPutJob (lone writer, 1 ms delay) went from 4.5 to 8.1 ms per
// durable write.
//
// The file has two 16-byte slots (id, CRC-32C of the id, "FSTX"), written
// alternately so that a torn write of one leaves the other intact; the
// larger valid id is the mark.
type txidMark struct {
	mu   sync.Mutex
	f    *os.File
	last uint64
}

const (
	markSlot  = 16
	markMagic = "FSTX"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openMark opens (creating) a mark file and reads its mark (0 for a new or
// unreadable file; valid is false if the file had content but no valid
// slot).
func openMark(path string, readOnly bool) (m *txidMark, mark uint64, valid bool, err error) {
	flag := os.O_RDWR | os.O_CREATE
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if readOnly && errors.Is(err, os.ErrNotExist) {
		return nil, 0, true, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	buf := make([]byte, 2*markSlot)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, 0, false, err
	}
	valid = n == 0
	for i := 0; i+markSlot <= n; i += markSlot {
		if id, ok := decodeMarkSlot(buf[i : i+markSlot]); ok {
			valid = true
			mark = max(mark, id)
		}
	}
	return &txidMark{f: f, last: mark}, mark, valid, nil
}

func decodeMarkSlot(b []byte) (uint64, bool) {
	if string(b[12:16]) != markMagic {
		return 0, false
	}
	if crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:12]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:8]), true
}

// advance records txid durably if it is above the mark.
func (m *txidMark) advance(txid uint64) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if txid <= m.last {
		return nil
	}
	var b [markSlot]byte
	binary.LittleEndian.PutUint64(b[:8], txid)
	binary.LittleEndian.PutUint32(b[8:12], crc32.Checksum(b[:8], castagnoli))
	copy(b[12:], markMagic)
	if _, err := m.f.WriteAt(b[:], int64(txid%2)*markSlot); err != nil {
		return fmt.Errorf("write transaction mark: %w", err)
	}
	m.last = txid
	return nil
}

func (m *txidMark) close() error {
	if m == nil {
		return nil
	}
	err := syscall.Fdatasync(int(m.f.Fd()))
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// corruptAdvice is what an operator should do about a corrupt store.
func corruptAdvice(dataDir string) string {
	return fmt.Sprintf("stop the node, run `fedsched check --data %s` for details, and restore %s and %s%s from your latest backup (docs/operations.md, \"Backup and restore\")",
		dataDir, FileName, FileName, MarkSuffix)
}

// recovered turns a panic of bbolt's read path (a damaged page) into an
// error wrapping ErrCorrupt.
func recovered(r any, path string) error {
	return fmt.Errorf("store %s is damaged (bbolt: %v): %w", path, r, ErrCorrupt)
}

// Check verifies the whole store: bbolt's own page check (every page
// reachable once, free pages consistent), the schema version, every record
// decodes, every job is in its state and user indexes, every index entry
// and idempotency key names a job, and the file is not behind its
// transaction mark. It returns one line per problem found (none: the store
// is consistent); the error is for a check that could not run.
func (s *BoltStore) Check(ctx context.Context) ([]string, error) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if s.markAhead > 0 {
		add("the file is at transaction %d but %s%s records that transaction %d was committed: committed writes were lost (a damaged meta page, or an older copy of the file)",
			s.txidAtOpen, FileName, MarkSuffix, s.markAhead)
	}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		damaged := false
		for err := range tx.Check() {
			add("bbolt: %v", err)
			damaged = true
		}
		if !damaged {
			// (Damaged pages could make the walk panic or mislead.)
			checkRecords(tx, add)
		}
		return nil
	})
	if errors.Is(err, ErrCorrupt) {
		// The check itself hit a damaged page.
		add("%v", err)
		err = nil
	}
	return problems, err
}

// checkRecords decodes every record and checks the references between them.
func checkRecords(tx *bolt.Tx, add func(string, ...any)) {
	if tx.Bucket(bucketMeta) == nil {
		add("the file holds no fedsched store (it is empty, or made by something else)")
		return
	}
	if v, err := schemaVersion(tx); err != nil || v != CurrentSchemaVersion {
		add("schema version %d (err %v), want %d", v, err, CurrentSchemaVersion)
	}
	buckets := map[string]*bolt.Bucket{}
	for _, name := range [][]byte{bucketMeta, bucketJobs, bucketJobsByState, bucketJobsByUser, bucketReservations,
		bucketSLA, bucketStats, bucketIdempotency, bucketAgreements, bucketStanding} {
		b := tx.Bucket(name)
		if b == nil {
			add("bucket %q missing", name)
			continue
		}
		buckets[string(name)] = b
	}
	jobs := buckets[string(bucketJobs)]
	if jobs == nil {
		return
	}
	byState, byUser := buckets[string(bucketJobsByState)], buckets[string(bucketJobsByUser)]
	jobs.ForEach(func(k, v []byte) error { //nolint:errcheck // the callback never fails
		rec, err := decodeJobRecord(v)
		switch {
		case err != nil:
			add("job %q: %v", k, err)
		case rec.ID() != string(k):
			add("job stored under %q has id %q", k, rec.ID())
		default:
			if byState != nil && byState.Get(stateKey(rec.Job.GetState(), rec.ID())) == nil {
				add("job %q (%v) missing from the state index", k, rec.Job.GetState())
			}
			if byUser != nil && byUser.Get(userKey(rec.Job.GetSpec().GetUser(), rec.ID())) == nil {
				add("job %q missing from the user index", k)
			}
		}
		return nil
	})
	each := func(name []byte, check func(k, v []byte) error) {
		if b := buckets[string(name)]; b != nil {
			b.ForEach(func(k, v []byte) error { //nolint:errcheck // the callback never fails
				if err := check(k, v); err != nil {
					add("%s %q: %v", name, k, err)
				}
				return nil
			})
		}
	}
	hasJob := func(id []byte) error {
		if jobs.Get(id) == nil {
			return fmt.Errorf("names job %q, which does not exist", id)
		}
		return nil
	}
	each(bucketJobsByState, func(k, _ []byte) error {
		if len(k) < 4 {
			return errors.New("malformed key")
		}
		return hasJob(k[4:])
	})
	each(bucketReservations, func(_, v []byte) error { _, err := decodeReservation(v); return err })
	each(bucketSLA, func(_, v []byte) error { _, err := decodeSLA(v); return err })
	each(bucketStanding, func(_, v []byte) error { _, err := decodeStanding(v); return err })
	each(bucketAgreements, func(k, v []byte) error { _, err := decodeAgreement(string(k), v); return err })
	each(bucketIdempotency, func(k, v []byte) error {
		ir, err := decodeIdempotency(string(k), v)
		if err != nil {
			return err
		}
		return hasJob([]byte(ir.JobID))
	})
}
