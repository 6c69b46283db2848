package node

import (
	"errors"

	"github.com/fedsched/fedsched/node/executor"
)

// Errors of the node's API. Handlers return them wrapped with context;
// ToStatus turns them into gRPC statuses (see rpcerr.go for the codes).
var (
	// ErrInvalidJob is returned by SubmitJob for a spec that cannot be a job:
	// procs or estimate below 1, deadline before release, negative fee or
	// penalty, no user, no command for the process executor.
	ErrInvalidJob = errors.New("invalid job spec")

	// ErrInvalidRequest is returned for a malformed request other than the
	// job spec: a missing job id, a negative page size.
	ErrInvalidRequest = errors.New("invalid request")

	// ErrJobNotFound is returned for a job id the site does not know.
	ErrJobNotFound = errors.New("job not found")

	// ErrIdempotencyConflict is returned by SubmitJob when its idempotency
	// key was used before with a different spec.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

	// ErrJobFinished is returned by CancelJob for a job that already reached
	// a terminal state other than CANCELLED.
	ErrJobFinished = errors.New("job already finished")

	// ErrNoOutput is returned by GetJobOutput for a job that has no output
	// to read: the simulated executor ran it, it never started, or its
	// output file is gone.
	ErrNoOutput = errors.New("job has no output")

	// ErrOverloaded is returned when the node sheds load: its intake queue
	// is full, or a watcher cannot keep up with events.
	ErrOverloaded = errors.New("site overloaded")

	// ErrUnavailable is returned while the node is starting (recovering its
	// state) or shutting down.
	ErrUnavailable = errors.New("site unavailable")

	// ErrInvalidReservation is returned by CreateReservation for a request
	// that cannot be a reservation: procs out of range, end not after
	// start, a start in the past, a period shorter than the slot, ...
	ErrInvalidReservation = errors.New("invalid reservation")

	// ErrReservationNotFound is returned for a reservation id the site does
	// not know (or that is over).
	ErrReservationNotFound = errors.New("reservation not found")

	// ErrReservationConflict is returned by CreateReservation when accepted
	// work or other fixed reservations stand in the way. The error is a
	// *ReservationConflictError listing them.
	ErrReservationConflict = errors.New("reservation conflicts with accepted work")

	// ErrNoAccount is returned for a job whose user has no account to run
	// as at this site (or would run as root without the operator's
	// consent).
	ErrNoAccount = executor.ErrNoAccount

	// ErrQueueNotDisclosed is returned by PeerQueue and Take when the
	// site's operator has not opted in to disclose its queue
	// (delegation.disclose_queue).
	ErrQueueNotDisclosed = errors.New("queue not disclosed")

	// ErrNotWaiting is returned by Take for a job that no longer waits in
	// the site's queue (it started, ended, was cancelled or is being
	// delegated).
	ErrNotWaiting = errors.New("job no longer waits")

	// ErrLimitReached is returned when a caller reaches one of the site's
	// limits (pending jobs, watches, idempotency keys).
	ErrLimitReached = errors.New("limit reached")

	// ErrDataDirMismatch is returned by Launch and CheckDataDir when the
	// job directories of a data directory do not belong to its store: an
	// emptied or replaced store, or one that lost committed writes.
	ErrDataDirMismatch = errors.New("job directories do not match the store")
)
