// Package store keeps the durable state of one site node: its jobs, the
// reservations of its plan, the outcomes of its SLAs, the runtime statistics
// of its overbooking model, the idempotency keys of submissions and a little
// metadata.
//
// # Basics
//
// [Store] is the interface the node uses. It is split by aggregate
// ([JobStore], [ReservationStore], [SLAStore], [StatsStore],
// [IdempotencyStore], [MetaStore], [AgreementStore], [StandingStore]) so
// that a consumer can ask for only the part it needs. Two implementations pass the same conformance test:
//
//   - [BoltStore], the durable one: one bbolt file at <data dir>/fedsched.db
//     ([Path]), opened by [OpenBolt]. The file is locked: a second OpenBolt of
//     the same file (from another process, or from this one) fails after
//     Options.LockTimeout with [ErrLocked].
//   - [WALStore], the durable one the node uses by default: the same bbolt
//     file with a write-ahead log in front of it (<data dir>/wal/), opened
//     by [OpenWAL]; see Durability.
//   - [MemStore], in memory, for tests of the node and for the simulator.
//
// Records are plain Go structs ([JobRecord], [ReservationRecord],
// [SLARecord], [IdempotencyRecord]); a JobRecord carries the API's
// fedschedv1.Job message, which is the authoritative state of a job. The
// store copies every record it is given and every record it returns: callers
// own what they pass and what they get.
//
// Several changes that must happen together (a job accepted with its
// reservation, a job ended with its SLA outcome) go through [Store.Apply] in
// one transaction.
//
// # Encoding
//
// Every value is one byte of record format (currently 1) followed by a
// protobuf message: fedschedv1.Job inside the store's own record messages
// (node/store/internal/storepb/records.proto). Protobuf rather than JSON
// because the job already is a protobuf message (one schema, no second
// mapping to keep in sync), because its evolution rules (new field numbers,
// unknown fields kept) let an older node read a newer record, and because it
// is compact and fast. Decoding a corrupted value returns an error wrapping
// [ErrCorrupt]; it never panics (see FuzzDecodeJobRecord).
//
// # Durability
//
// Every method that writes returns only after the write is durable: BoltStore
// commits through bbolt's DB.Batch, and every bbolt commit writes the pages
// and then the meta page with an fdatasync(2) after each (bbolt's NoSync is
// never set). Concurrent writers are coalesced into one transaction and one
// pair of syncs, after waiting at most Options.MaxBatchDelay (1 ms by
// default), which is what gives throughput when many submissions arrive at
// once. A node may
// therefore acknowledge a request as soon as the store method returns.
//
// WALStore keeps that promise with one sync instead of two. Apply encodes
// its changes (the bytes bbolt will hold) as one framed record (length,
// CRC-32C, sequence number), appends it to the open log segment with one
// write and one fdatasync, and only then returns. The changes then sit in
// an in-memory overlay that every Get consults first (a map lookup: the
// idempotency key of every submission is read there) and that List*
// merges with the file. A checkpointer goroutine writes the pending
// records to bbolt in one ordinary transaction (two fsyncs; bbolt's NoSync
// is never set, so its page reuse and meta-page order are its own) that
// also records the last record's sequence number (meta key wal_seq), then
// deletes the log segments that transaction covered; appends meanwhile go
// to a new segment. It runs when the log holds Options.CheckpointRecords
// records or CheckpointBytes bytes, and at every CheckpointInterval;
// an Apply that finds 4 times the thresholds pending checkpoints itself.
// The writes that are not Apply's (PutMeta, PruneIdempotencyKeys) checkpoint
// first and go to bbolt directly; NextSequence goes to bbolt directly.
//
// OpenWAL replays, in order, the records whose sequence number is above the
// file's wal_seq, writes them to the file and deletes the log. A record cut
// short or failing its checksum at the end of the last segment is the torn
// write of a crash (never acknowledged: Apply had not returned) and is
// dropped; a bad record followed by a good one, or a missing record, fails
// the open with [ErrCorrupt] (a read-only open reports it through Check).
// OpenBolt refuses a data directory whose log holds records, so that the
// file is never used without the changes only the log has. A failed log
// write or checkpoint makes every later write fail (a retried fsync can
// report success for data it lost); the log on disk still holds every
// acknowledged change, and a restart replays it.
//
// # Idempotency
//
// [JobStore.PutJobIfNewKey] stores a job under a client's idempotency key
// atomically: the same key with the same body hash returns the job stored
// first (created == false); the same key with a different body hash fails
// with [ErrIdempotencyConflict], which the node maps to gRPC ALREADY_EXISTS
// (the key already names another request; retrying cannot succeed, and
// INVALID_ARGUMENT would wrongly say the request is bad in itself). Keys are
// kept until [IdempotencyStore.PruneIdempotencyKeys] removes them.
//
// # Schema versions
//
// The bbolt layout has a version, kept in the "meta" bucket. [OpenBolt]
// migrates an older file forward through an ordered list of migrations, in
// one transaction, after copying the file to <path>.v<N>.<time>.bak. A file
// newer than this code fails with [ErrSchemaTooNew]. Version history:
//
//	1: buckets meta, jobs, reservations, sla, stats, idempotency.
//	2: adds the indexes jobs_by_state and jobs_by_user for ListJobs.
//	3: adds the bucket agreements (delegation).
//	4: adds the bucket standing: the rules of standing reservations
//	   ([StandingRecord]). Fixed reservations are ReservationRecords
//	   with Fixed set, in the reservations bucket, since v1.
//
// The node keeps only fixed reservations in the reservations bucket; a
// job's reservation is in its JobRecord (fedschedv1.Job.Reservation).
// Nodes before issue 16 also wrote a ReservationRecord per job, which
// nothing read; a node deletes those when it starts (no schema change:
// either kind of node reads either kind of file).
//
// # Caveats
//
// Job ids are ordered bytewise: ListJobs pages in that order, so the node
// should make ids whose byte order is submission order (fixed-width
// sequence numbers). A user name must not contain a NUL byte.
package store
