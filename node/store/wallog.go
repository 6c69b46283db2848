package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The write-ahead log of a WALStore is a directory of segment files,
// LogDirName in the data directory, named by a generation number that
// grows by one per segment (16 hex digits, ".log"). A segment is made
// ahead of use and filled with zeros (preallocated), so that an append
// overwrites blocks the file already has: fdatasync then writes the data
// alone, not the file's size as well (an ext4 journal commit each time;
// docs/PERFORMANCE.md). It holds records one after the other, then zeros,
// each record framed as
//
//	[0:4]   payload length n, little-endian uint32
//	[4:8]   CRC-32C (Castagnoli) of bytes [0:4] and [8:16+n]
//	[8:16]  sequence number, little-endian uint64 (1, 2, 3, ...: one more
//	        than the record before it, across segments)
//	[16:]   payload: one Apply's changes (encChanges.appendTo)
//
// Each record is written with one write and made durable with one
// fdatasync before Apply returns, so a crash can damage only the last
// record: a torn tail, never acknowledged, which Open drops. A header of
// zeros ends a segment. A bad record followed by a good one (in its
// segment or a later one), or zeros followed by a good record in the same
// segment, is damage of the disk or of the file, not a tear, and Open
// refuses to guess.

// LogDirName is the directory of the write-ahead log in a data directory.
const LogDirName = "wal"

// frameHeader is the size of a record's header.
const frameHeader = 16

// logSuffix ends the name of every segment file.
const logSuffix = ".log"

// appendFrame appends the record (seq, payload) to b.
func appendFrame(b []byte, seq uint64, payload []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = append(b, payload...)
	crc := crc32.Update(crc32.Checksum(b[start:start+4], castagnoli), castagnoli, b[start+8:])
	binary.LittleEndian.PutUint32(b[start+4:], crc)
	return b
}

// errBadFrame is a record that is cut short or fails its checksum.
var errBadFrame = errors.New("bad record")

// decodeFrame reads the record at the start of b: its sequence number, its
// payload (a slice of b) and its whole size. A record cut short or whose
// checksum fails is errBadFrame.
func decodeFrame(b []byte) (seq uint64, payload []byte, size int, err error) {
	if len(b) < frameHeader {
		return 0, nil, 0, fmt.Errorf("%w: %d bytes, short of a header", errBadFrame, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-frameHeader) {
		return 0, nil, 0, fmt.Errorf("%w: length %d past the end of the file", errBadFrame, n)
	}
	size = frameHeader + int(n)
	crc := crc32.Update(crc32.Checksum(b[:4], castagnoli), castagnoli, b[8:size])
	if crc != binary.LittleEndian.Uint32(b[4:]) {
		return 0, nil, 0, fmt.Errorf("%w: checksum mismatch", errBadFrame)
	}
	return binary.LittleEndian.Uint64(b[8:]), b[frameHeader:size], size, nil
}

// goodFrameAfter reports whether a good record with a sequence number
// above prev starts anywhere in b at or after from: if so, a bad record
// before it is not the torn tail of the last write.
func goodFrameAfter(b []byte, from int, prev uint64) bool {
	for off := from; off+frameHeader <= len(b); off++ {
		seq := binary.LittleEndian.Uint64(b[off+8:])
		if seq <= prev || seq-prev > 1<<32 {
			continue // cheap filter before the checksum
		}
		if _, _, _, err := decodeFrame(b[off:]); err == nil {
			return true
		}
	}
	return false
}

// segmentName is the file name of segment gen.
func segmentName(gen uint64) string { return fmt.Sprintf("%016x%s", gen, logSuffix) }

// segment is one segment file.
type segment struct {
	path string
	gen  uint64
}

// listSegments returns the segments of a log directory in order (none if
// the directory does not exist). Other files are an error: the directory
// is the store's.
func listSegments(dir string) ([]segment, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("write-ahead log: %w", err)
	}
	var segs []segment
	for _, e := range ents {
		name := e.Name()
		gen, err := strconv.ParseUint(strings.TrimSuffix(name, logSuffix), 16, 64)
		if !strings.HasSuffix(name, logSuffix) || err != nil || segmentName(gen) != name {
			return nil, fmt.Errorf("write-ahead log %s: unexpected file %q: %w", dir, name, ErrCorrupt)
		}
		segs = append(segs, segment{path: filepath.Join(dir, name), gen: gen})
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmp.Compare(a.gen, b.gen) })
	return segs, nil
}

// logRecord is one decoded record of the log.
type logRecord struct {
	seq  uint64
	e    encChanges
	size int
}

// logScan is what readLog found.
type logScan struct {
	// recs are the records after the checkpoint, in order.
	recs []logRecord
	// last is the sequence number of the last good record (0: none).
	last uint64
	// torn describes a torn tail that was dropped ("" if none).
	torn string
}

// readLog reads every segment of dir and returns the records whose
// sequence number is above after (the last one bbolt holds). A bad record
// is dropped as a torn tail if no good record follows it; otherwise, or
// if a record is missing, it is an error wrapping ErrCorrupt.
func readLog(dir string, after uint64) (logScan, error) {
	var out logScan
	segs, err := listSegments(dir)
	if err != nil {
		return out, err
	}
	data := make([][]byte, len(segs))
	for i, sg := range segs {
		if data[i], err = os.ReadFile(sg.path); err != nil {
			return out, fmt.Errorf("write-ahead log: %w", err)
		}
	}
	for i, sg := range segs {
		if err := out.scan(data[i], sg.path, after); err != nil {
			return out, err
		}
	}
	if len(out.recs) > 0 && out.recs[0].seq != after+1 {
		return out, fmt.Errorf("write-ahead log %s: the store holds the changes up to record %d but the log starts at record %d: records %d to %d are missing: %w",
			dir, after, out.recs[0].seq, after+1, out.recs[0].seq-1, ErrCorrupt)
	}
	return out, nil
}

// scan reads the records of one segment into out (see readLog).
func (out *logScan) scan(data []byte, path string, after uint64) error {
	// A bad record is a torn tail, and zeros the rest of the segment's
	// preallocation, if no good record follows in the segment. A later
	// segment's records must continue the sequence (below), so damage
	// at the end of a segment before another is caught there.
	goodAfter := func(off int) bool { return goodFrameAfter(data, off+1, out.last) }
	for off := 0; off < len(data); {
		if zeroHeader(data[off:]) {
			if goodAfter(off) {
				return fmt.Errorf("write-ahead log %s: a header of zeros at offset %d, after record %d, and good records follow: %w",
					path, off, out.last, ErrCorrupt)
			}
			return nil // the segment's end
		}
		seq, payload, size, err := decodeFrame(data[off:])
		if err != nil {
			if !goodAfter(off) {
				out.torn = fmt.Sprintf("%s: record at offset %d (%v)", path, off, err)
				return nil
			}
			return fmt.Errorf("write-ahead log %s: record at offset %d, after record %d: %w, and good records follow: %w",
				path, off, out.last, err, ErrCorrupt)
		}
		// Records the file holds are skipped whatever their order (a
		// crash can keep some of the segments a checkpoint deleted);
		// the others must follow one another.
		if n := len(out.recs); seq > after && n > 0 && seq != out.recs[n-1].seq+1 {
			return fmt.Errorf("write-ahead log %s: record %d at offset %d follows record %d: %w", path, seq, off, out.recs[n-1].seq, ErrCorrupt)
		}
		out.last = max(out.last, seq)
		if seq > after {
			e, err := decodeEncChanges(payload)
			if err != nil {
				return fmt.Errorf("write-ahead log %s: record %d at offset %d: %w", path, seq, off, err)
			}
			out.recs = append(out.recs, logRecord{seq: seq, e: e, size: size})
		}
		off += size
	}
	return nil
}

// zeroHeader reports whether b starts with a header of zeros (or fewer
// bytes, all zeros): the preallocated rest of a segment.
func zeroHeader(b []byte) bool {
	for _, c := range b[:min(len(b), frameHeader)] {
		if c != 0 {
			return false
		}
	}
	return true
}

// appendTo appends the log payload of e to b: each list as a uvarint count
// and its items, every string or byte slice as a uvarint length and its
// bytes, in the order of the fields of encChanges; the site clock last,
// with a flag byte.
func (e encChanges) appendTo(b []byte) []byte {
	strs := func(b []byte, l []string) []byte {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, s := range l {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		return b
	}
	encs := func(b []byte, l []enc) []byte {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, x := range l {
			b = binary.AppendUvarint(b, uint64(len(x.key)))
			b = append(b, x.key...)
			b = binary.AppendUvarint(b, uint64(len(x.val)))
			b = append(b, x.val...)
		}
		return b
	}
	b = strs(b, e.deleteJobs)
	b = encs(b, e.jobs)
	b = encs(b, e.idems)
	b = strs(b, e.deleteReservations)
	b = encs(b, e.reservations)
	b = encs(b, e.sla)
	b = encs(b, e.stats)
	b = encs(b, e.agreements)
	b = strs(b, e.deleteStanding)
	b = encs(b, e.standing)
	if e.siteClock == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(e.siteClock)))
	return append(b, e.siteClock...)
}

// decodeEncChanges reads appendTo's form and checks every record in it as
// Apply would have (so that a checkpoint can always write it): anything
// else is an error wrapping ErrCorrupt. It never panics. The result does
// not share memory with b.
func decodeEncChanges(b []byte) (encChanges, error) {
	d := payloadReader{b: b}
	var e encChanges
	e.deleteJobs = d.strs()
	e.jobs = d.encs()
	e.idems = d.encs()
	e.deleteReservations = d.strs()
	e.reservations = d.encs()
	e.sla = d.encs()
	e.stats = d.encs()
	e.agreements = d.encs()
	e.deleteStanding = d.strs()
	e.standing = d.encs()
	switch flag := d.byte(); flag {
	case 0:
	case 1:
		e.siteClock = d.bytes()
		if d.err == nil {
			if _, err := ParseSiteClock(string(e.siteClock)); err != nil {
				d.fail("%v", err)
			}
		}
	default:
		d.fail("site clock flag %d", flag)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the changes", len(d.b))
	}
	if d.err != nil {
		return encChanges{}, d.err
	}
	if err := e.check(); err != nil {
		return encChanges{}, err
	}
	return e, nil
}

// check verifies that every record of e decodes and is keyed as Apply
// keys it.
func (e encChanges) check() error {
	bad := func(what string, key []byte, err error) error {
		return fmt.Errorf("log record: %s %q: %w", what, key, errors.Join(err, ErrCorrupt))
	}
	nonEmpty := func(what string, ids []string) error {
		for _, id := range ids {
			if id == "" {
				return bad(what, nil, errors.New("empty id"))
			}
		}
		return nil
	}
	if err := errors.Join(nonEmpty("deleted job", e.deleteJobs), nonEmpty("deleted reservation", e.deleteReservations),
		nonEmpty("deleted standing reservation", e.deleteStanding)); err != nil {
		return err
	}
	if len(e.idems) != len(e.jobs) {
		return bad("jobs", nil, fmt.Errorf("%d jobs but %d idempotency keys", len(e.jobs), len(e.idems)))
	}
	for i, j := range e.jobs {
		rec, err := decodeJobRecord(j.val)
		if err == nil && rec.ID() != string(j.key) {
			err = fmt.Errorf("holds job %q", rec.ID())
		}
		if err == nil {
			err = validateJob(rec)
		}
		if err != nil {
			return bad("job", j.key, err)
		}
		if k := e.idems[i]; len(k.key) > 0 {
			if _, err := decodeIdempotency(string(k.key), k.val); err != nil {
				return bad("idempotency key", k.key, err)
			}
		} else if len(k.val) > 0 {
			return bad("idempotency key", k.key, errors.New("a value without a key"))
		}
	}
	type kind struct {
		what   string
		l      []enc
		decode func([]byte) error
	}
	for _, k := range []kind{
		{"reservation", e.reservations, func(v []byte) error { _, err := decodeReservation(v); return err }},
		{"SLA of job", e.sla, func(v []byte) error { _, err := decodeSLA(v); return err }},
		{"statistics", e.stats, func(v []byte) error { _, err := decodeStats(v); return err }},
		{"agreement", e.agreements, func(v []byte) error { _, err := decodeAgreement("", v); return err }},
		{"standing reservation", e.standing, func(v []byte) error { _, err := decodeStanding(v); return err }},
	} {
		for _, x := range k.l {
			err := k.decode(x.val)
			if err == nil && len(x.key) == 0 {
				err = errors.New("empty id")
			}
			if err != nil {
				return bad(k.what, x.key, err)
			}
		}
	}
	return nil
}

// payloadReader reads appendTo's form; the first error sticks.
type payloadReader struct {
	b   []byte
	err error
}

func (d *payloadReader) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("log record: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
	}
}

func (d *payloadReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad length")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a list's length, each item taking at least min bytes.
func (d *payloadReader) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("%d items in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *payloadReader) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("cut short")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *payloadReader) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d past the end", n)
		return nil
	}
	v := slices.Clone(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *payloadReader) strs() []string {
	n := d.count(1)
	var out []string
	for range n {
		v := d.bytes()
		if d.err != nil {
			return nil
		}
		out = append(out, string(v))
	}
	return out
}

func (d *payloadReader) encs() []enc {
	n := d.count(2)
	var out []enc
	for range n {
		k, v := d.bytes(), d.bytes()
		if d.err != nil {
			return nil
		}
		if v == nil {
			v = []byte{}
		}
		out = append(out, enc{key: k, val: v})
	}
	return out
}
