package store

import "errors"

// Errors returned by Store methods. They are wrapped with context: test
// with errors.Is.
var (
	// ErrNotFound is returned when the job, reservation, SLA outcome,
	// statistics blob, idempotency key or metadata key asked for does not
	// exist.
	ErrNotFound = errors.New("not found")

	// ErrIdempotencyConflict is returned by PutJobIfNewKey when the key was
	// already used with a different request body.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

	// ErrJobExists is returned by PutJobIfNewKey when a job with the record's
	// id already exists under another (or no) idempotency key.
	ErrJobExists = errors.New("job id already exists")

	// ErrInvalid is returned when a record or query is malformed: an empty id
	// or key, a nil job, a user name with a NUL byte.
	ErrInvalid = errors.New("invalid record")

	// ErrInvalidPageToken is returned by ListJobs for a page token it did not
	// make, or made for other filters.
	ErrInvalidPageToken = errors.New("invalid page token")

	// ErrCorrupt is returned when a stored value cannot be decoded or the
	// file's layout is not one this code knows.
	ErrCorrupt = errors.New("corrupt record")

	// ErrLocked is returned by OpenBolt when another process (or another
	// open in this one) holds the database file.
	ErrLocked = errors.New("database is locked by another process")

	// ErrSchemaTooNew is returned by OpenBolt for a file written by a newer
	// version of fedsched than this one.
	ErrSchemaTooNew = errors.New("database schema is newer than this fedsched")

	// ErrLogNotReplayed is returned by OpenBolt for a data directory whose
	// write-ahead log holds records the file does not have yet: only
	// OpenWAL (store.log: true) replays them.
	ErrLogNotReplayed = errors.New("the write-ahead log holds changes the file does not have")

	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("store is closed")
)
