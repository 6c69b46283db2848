package store

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// CurrentSchemaVersion is the bbolt layout this code reads and writes.
const CurrentSchemaVersion = 4

// Page sizes of ListJobs.
const (
	// DefaultPageSize is used when JobQuery.PageSize is <= 0.
	DefaultPageSize = 100
	// MaxPageSize caps JobQuery.PageSize.
	MaxPageSize = 1000
)

// Store is the durable state of a site node. Implementations are safe for
// use by several goroutines at once; every write is durable when the method
// returns (see the package doc).
type Store interface {
	// Name identifies the implementation ("bolt", "mem"); for logs and tests.
	Name() string

	JobStore
	ReservationStore
	SLAStore
	StatsStore
	IdempotencyStore
	MetaStore
	AgreementStore
	StandingStore

	// Apply makes all of c durable in one transaction: either every change
	// is applied or none is. Records are validated before anything is
	// written.
	Apply(ctx context.Context, c Changes) error

	// Close releases the store. Calls after Close fail with ErrClosed.
	// Close is safe to call more than once.
	Close() error
}

// FileStore is a Store kept in a data directory (BoltStore, WALStore).
type FileStore interface {
	Store
	// Check verifies the whole store; one line per problem found.
	Check(ctx context.Context) ([]string, error)
	// Path is the path of the store's bbolt file.
	Path() string
}

var (
	_ FileStore = (*BoltStore)(nil)
	_ FileStore = (*WALStore)(nil)
)

// JobStore keeps jobs.
type JobStore interface {
	// GetJob returns the job with the given id, or ErrNotFound.
	GetJob(ctx context.Context, id string) (JobRecord, error)

	// PutJob creates or replaces a job.
	PutJob(ctx context.Context, rec JobRecord) error

	// PutJobIfNewKey stores rec as a new job under an idempotency key, in
	// one transaction. rec.IdempotencyKey and rec.BodyHash are set from key
	// and bodyHash. If key is new, the job and the key are stored and
	// created is true. If key was stored before with the same bodyHash, the
	// job stored then is returned and created is false (nothing is written).
	// If key was stored with another bodyHash, the error wraps
	// ErrIdempotencyConflict. If a job with rec's id exists already, the
	// error wraps ErrJobExists. key must not be empty. The key's creation
	// time is rec.Job.SubmitTime (the node's clock), or the wall clock if
	// that is unset.
	PutJobIfNewKey(ctx context.Context, key string, bodyHash []byte, rec JobRecord) (stored JobRecord, created bool, err error)

	// DeleteJob removes a job and its idempotency key. Deleting a missing
	// job is not an error.
	DeleteJob(ctx context.Context, id string) error

	// ListJobs returns the jobs matching q in ascending order of id, at most
	// q.PageSize of them, and a token for the next page ("" on the last).
	ListJobs(ctx context.Context, q JobQuery) (jobs []JobRecord, nextPageToken string, err error)
}

// ReservationStore keeps the reservations of the site's plan.
type ReservationStore interface {
	// GetReservation returns one reservation, or ErrNotFound.
	GetReservation(ctx context.Context, id string) (ReservationRecord, error)
	// PutReservation creates or replaces a reservation.
	PutReservation(ctx context.Context, r ReservationRecord) error
	// DeleteReservation removes a reservation; a missing one is not an error.
	DeleteReservation(ctx context.Context, id string) error
	// ListReservations returns every reservation in ascending order of id.
	ListReservations(ctx context.Context) ([]ReservationRecord, error)
}

// SLAStore keeps the outcomes of accepted SLAs.
type SLAStore interface {
	// GetSLAOutcome returns the SLA record of a job, or ErrNotFound.
	GetSLAOutcome(ctx context.Context, jobID string) (SLARecord, error)
	// PutSLAOutcome creates or replaces the SLA record of a job.
	PutSLAOutcome(ctx context.Context, r SLARecord) error
	// ListSLAOutcomes returns every SLA record in ascending order of job id.
	ListSLAOutcomes(ctx context.Context) ([]SLARecord, error)
}

// StatsStore keeps opaque blobs of runtime statistics (owned and encoded by
// the overbooking and forecasting code), by name.
type StatsStore interface {
	// GetStats returns the blob stored under name, or ErrNotFound.
	GetStats(ctx context.Context, name string) ([]byte, error)
	// PutStats replaces the blob stored under name.
	PutStats(ctx context.Context, name string, blob []byte) error
}

// IdempotencyStore reads and prunes idempotency keys (they are written by
// JobStore.PutJobIfNewKey).
type IdempotencyStore interface {
	// GetIdempotencyKey returns what is remembered of a key, or ErrNotFound.
	GetIdempotencyKey(ctx context.Context, key string) (IdempotencyRecord, error)
	// PruneIdempotencyKeys forgets every key created before the given time
	// and returns how many it forgot. The jobs stay.
	PruneIdempotencyKeys(ctx context.Context, before time.Time) (int, error)
	// CountIdempotencyKeys counts the keys that start with prefix, stopping
	// at limit (so its cost is bounded by the limit it enforces); limit <= 0
	// counts them all. The node scopes keys by user ("alice/KEY"), so a
	// prefix of "alice/" counts one user's keys.
	CountIdempotencyKeys(ctx context.Context, prefix string, limit int) (int, error)
}

// AgreementStore keeps delegation agreements, on both sides of one: the
// origin's record of where it delegated a job and the peer's record of what
// it promised. Bodies are owned and encoded by the node.
type AgreementStore interface {
	// GetAgreement returns one agreement, or ErrNotFound.
	GetAgreement(ctx context.Context, id string) (AgreementRecord, error)
	// ListAgreements returns every agreement in ascending order of id.
	ListAgreements(ctx context.Context) ([]AgreementRecord, error)
}

// StandingStore keeps the rules of standing reservations (schema v4). Fixed
// reservations are ReservationRecords with Fixed set.
type StandingStore interface {
	// GetStanding returns one rule, or ErrNotFound.
	GetStanding(ctx context.Context, id string) (StandingRecord, error)
	// ListStanding returns every rule in ascending order of id.
	ListStanding(ctx context.Context) ([]StandingRecord, error)
}

// StandingRecord is the rule of a standing reservation: Procs processors
// from Start to End, again every EverySeconds, as long as an instance
// starts before Until (zero: no end), and, if Weekdays is not empty, only on
// those days (UTC).
type StandingRecord struct {
	// ID is unique at the site. Required.
	ID string
	// Name is the operator's name for the rule.
	Name string
	// Procs is the number of processors each instance holds.
	Procs int
	// Start and End are the first instance; each lasts End - Start.
	Start, End time.Time
	// EverySeconds is the period. Required, > 0.
	EverySeconds int64
	// Until: no instance starts at or after it; zero means no end.
	Until time.Time
	// Weekdays, if not empty, keeps only instances starting on these days.
	Weekdays []time.Weekday
}

// AgreementRecord is one stored agreement.
type AgreementRecord struct {
	// ID names the agreement. Required.
	ID string
	// Body is the node's encoding of the agreement.
	Body []byte
}

// MetaStore keeps small facts about the store and the site.
type MetaStore interface {
	// SchemaVersion returns the layout version of the store
	// (CurrentSchemaVersion once open).
	SchemaVersion(ctx context.Context) (int, error)
	// GetMeta returns the value stored under key, or ErrNotFound.
	GetMeta(ctx context.Context, key string) (string, error)
	// PutMeta stores value under key.
	PutMeta(ctx context.Context, key, value string) error
	// NextSequence returns a durable counter's next value: 1, 2, 3, ...
	// never the same value twice, even across restarts. The node makes job
	// ids from it.
	NextSequence(ctx context.Context) (uint64, error)
}

// JobRecord is a job as the node stores it.
type JobRecord struct {
	// Job is the job as users see it and the authoritative state of the job.
	// Required; Job.Id must not be empty.
	Job *fedschedv1.Job
	// IdempotencyKey is the key the job was submitted with; empty if none.
	IdempotencyKey string
	// BodyHash is the hash of the request body submitted with the key.
	BodyHash []byte
}

// ID returns the job's id ("" if Job is nil).
func (r JobRecord) ID() string { return r.Job.GetId() }

// ReservationRecord is a slot [Start, End) on Procs processors in the site's
// plan.
type ReservationRecord struct {
	// ID is unique at the site. Required.
	ID string
	// JobID is the job holding the slot; empty for a fixed reservation.
	JobID string
	// Procs is the number of processors held.
	Procs int
	// Start is the first instant of the slot.
	Start time.Time
	// End is the first instant after the slot.
	End time.Time
	// Overbooked is true when the slot is shorter than the job's estimate.
	Overbooked bool
	// Fixed is true for an operator's fixed reservation.
	Fixed bool
	// Note is free text, for fixed reservations.
	Note string
}

// SLARecord is the outcome of an accepted SLA.
type SLARecord struct {
	// JobID is the job. Required.
	JobID string
	// Outcome is SLA_OUTCOME_OPEN until decided.
	Outcome fedschedv1.SlaOutcome
	// Fee and Penalty are the SLA's terms, in virtual coins.
	Fee, Penalty float64
	// PoF is the probability of failure at acceptance.
	PoF float64
	// DecidedAt is when the outcome was decided; zero while open.
	DecidedAt time.Time
}

// IdempotencyRecord is what the store remembers of one idempotency key.
type IdempotencyRecord struct {
	// Key is the client's key.
	Key string
	// JobID is the job created by the first request with the key.
	JobID string
	// BodyHash is the hash of that request's body.
	BodyHash []byte
	// CreatedAt is when the key was first seen.
	CreatedAt time.Time
}

// JobQuery selects jobs for ListJobs.
type JobQuery struct {
	// States keeps jobs in any of these states; empty keeps all.
	States []fedschedv1.JobState
	// User keeps the jobs of this user; empty keeps all.
	User string
	// PageSize is the most jobs to return; <= 0 means DefaultPageSize, and
	// it is capped at MaxPageSize.
	PageSize int
	// PageToken continues a listing: the token returned with the previous
	// page of the same query; empty starts at the first job.
	PageToken string
	// MaxBytes bounds a page's jobs' encoded size as well as their count:
	// a page ends before the job that would take it past MaxBytes (a page
	// holds at least one job). 0 means no bound.
	MaxBytes int
}

// Changes is a set of writes that Store.Apply makes in one transaction.
// Deletions are applied before puts of the same kind. A job put with an
// IdempotencyKey also records the key (with the job's BodyHash), as
// PutJobIfNewKey does, so that a node deciding many submissions at once can
// make them durable together; the caller must have checked the keys.
type Changes struct {
	// PutJobs creates or replaces jobs.
	PutJobs []JobRecord
	// DeleteJobs removes jobs (and their idempotency keys) by id.
	DeleteJobs []string
	// PutReservations creates or replaces reservations.
	PutReservations []ReservationRecord
	// DeleteReservations removes reservations by id.
	DeleteReservations []string
	// PutSLAOutcomes creates or replaces SLA records.
	PutSLAOutcomes []SLARecord
	// PutStats replaces statistics blobs by name.
	PutStats map[string][]byte
	// PutAgreements creates or replaces agreements.
	PutAgreements []AgreementRecord
	// PutStanding creates or replaces standing reservation rules.
	PutStanding []StandingRecord
	// DeleteStanding removes standing reservation rules by id.
	DeleteStanding []string
	// SiteClock, if not nil, is where the site's clock stood at this
	// change, kept under the meta key SiteClockKey: a site whose clock is
	// not the wall clock (a scaled one) resumes from it after a restart
	// instead of going back to the wall clock's time.
	SiteClock *SiteClock
}

// SiteClockKey is the meta key (GetMeta) of the SiteClock a change keeps,
// in SiteClock.String's form.
const SiteClockKey = "site_clock"

// SiteClock is a reading of a site's scaled clock: its time Site at the
// wall clock's time Wall, running Scale times as fast as the wall clock.
type SiteClock struct {
	Site, Wall time.Time
	Scale      float64
}

// At is the site's time at the wall clock's time wall, the clock having
// run on at its pace since the reading (as a site's time runs on while its
// node is down).
func (c SiteClock) At(wall time.Time) time.Time {
	return c.Site.Add(time.Duration(float64(wall.Sub(c.Wall)) * c.Scale))
}

// String is the stored form: site and wall time in Unix nanoseconds, and
// the scale.
func (c SiteClock) String() string {
	return fmt.Sprintf("%d %d %s", c.Site.UnixNano(), c.Wall.UnixNano(), strconv.FormatFloat(c.Scale, 'g', -1, 64))
}

// ParseSiteClock reads SiteClock.String's form; anything else is
// ErrCorrupt.
func ParseSiteClock(s string) (SiteClock, error) {
	f := strings.Fields(s)
	if len(f) == 3 {
		site, err1 := strconv.ParseInt(f[0], 10, 64)
		wall, err2 := strconv.ParseInt(f[1], 10, 64)
		scale, err3 := strconv.ParseFloat(f[2], 64)
		if err1 == nil && err2 == nil && err3 == nil && scale > 0 && !math.IsInf(scale, 0) {
			return SiteClock{Site: time.Unix(0, site), Wall: time.Unix(0, wall), Scale: scale}, nil
		}
	}
	return SiteClock{}, fmt.Errorf("site clock %q: want \"SITE_NS WALL_NS SCALE\": %w", s, ErrCorrupt)
}

// Path returns the path of the bbolt file in a data directory.
func Path(dataDir string) string { return filepath.Join(dataDir, FileName) }

// FileName is the name of the bbolt file inside the data directory.
const FileName = "fedsched.db"
