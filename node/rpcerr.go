package node

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo that every error
// status of the node carries.
const ErrorDomain = "fedsched.v1"

// errorTable is THE mapping between the node's errors and gRPC: the status
// code and the ErrorInfo reason of each sentinel. ToStatus uses the first
// row whose error matches with errors.Is; FromStatus uses the first row with
// the reason, so the node's own sentinels come before the store's.
//
// Choices:
//   - A reused idempotency key with a different body is ALREADY_EXISTS: the
//     key already names another request, so a retry cannot succeed;
//     INVALID_ARGUMENT would say the request is bad in itself, which it is
//     not (with a fresh key it is fine).
//   - Cancelling a finished job is FAILED_PRECONDITION: the job's state,
//     not the request, is in the way.
//   - Load shedding is RESOURCE_EXHAUSTED (retry later, with backoff);
//     starting or stopping is UNAVAILABLE (retry, perhaps elsewhere).
//   - A reservation refused because accepted work is in the way is
//     FAILED_PRECONDITION: the site's state, not the request, is in the
//     way (displacing, or a later retry, may succeed). Its status also
//     carries a fedschedv1.ReservationConflict detail (see ToStatus).
var errorTable = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrInvalidJob, codes.InvalidArgument, "INVALID_JOB"},
	{ErrInvalidRequest, codes.InvalidArgument, "INVALID_REQUEST"},
	{ErrInvalidReservation, codes.InvalidArgument, "INVALID_RESERVATION"},
	{store.ErrInvalidPageToken, codes.InvalidArgument, "INVALID_PAGE_TOKEN"},
	{ErrJobNotFound, codes.NotFound, "JOB_NOT_FOUND"},
	{ErrReservationNotFound, codes.NotFound, "RESERVATION_NOT_FOUND"},
	{store.ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{ErrIdempotencyConflict, codes.AlreadyExists, "IDEMPOTENCY_KEY_REUSED"},
	{store.ErrIdempotencyConflict, codes.AlreadyExists, "IDEMPOTENCY_KEY_REUSED"},
	{ErrJobFinished, codes.FailedPrecondition, "JOB_FINISHED"},
	{ErrNoOutput, codes.FailedPrecondition, "NO_OUTPUT"},
	{ErrReservationConflict, codes.FailedPrecondition, "RESERVATION_CONFLICT"},
	{store.ErrLocked, codes.FailedPrecondition, "DATA_DIR_LOCKED"},
	{store.ErrSchemaTooNew, codes.FailedPrecondition, "SCHEMA_TOO_NEW"},
	{store.ErrLogNotReplayed, codes.FailedPrecondition, "STORE_LOG_NOT_REPLAYED"},
	{ErrDataDirMismatch, codes.FailedPrecondition, "DATA_DIR_MISMATCH"},
	{store.ErrCorrupt, codes.DataLoss, "STORE_CORRUPT"},
	{ErrOverloaded, codes.ResourceExhausted, "OVERLOADED"},
	{ErrLimitReached, codes.ResourceExhausted, "LIMIT_REACHED"},
	{ErrNoAccount, codes.FailedPrecondition, "NO_ACCOUNT"},
	{ErrQueueNotDisclosed, codes.FailedPrecondition, "QUEUE_NOT_DISCLOSED"},
	{ErrNotWaiting, codes.FailedPrecondition, "JOB_NOT_WAITING"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	{store.ErrClosed, codes.Unavailable, "UNAVAILABLE"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
	{context.Canceled, codes.Canceled, "CANCELLED"},
}

// reasonInternal is the ErrorInfo reason of an error in no row of the table.
const reasonInternal = "INTERNAL"

// ToStatus converts an error of a handler into the error a gRPC handler
// returns: a status with the code of the first matching row of the table,
// the error's text as message, and an ErrorInfo naming the sentinel. An
// error already carrying a status (from a gRPC call the handler made) keeps
// it. Any other error becomes INTERNAL. ToStatus(nil) is nil.
//
// A *ReservationConflictError also gets a fedschedv1.ReservationConflict
// detail, and its job ids in the ErrorInfo's metadata ("job_ids",
// "running_job_ids", "held_job_ids", "reservation_ids": comma-separated);
// read it back with ReservationConflictOf.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	code, reason := codes.Internal, reasonInternal
	matched := false
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			code, reason, matched = row.code, row.reason, true
			break
		}
	}
	if !matched {
		if _, ok := status.FromError(err); ok {
			return err
		}
	}
	st := status.New(code, err.Error())
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}
	details := []protoadapt.MessageV1{info}
	var conflict *ReservationConflictError
	if errors.As(err, &conflict) {
		info.Metadata = map[string]string{
			"job_ids":         strings.Join(conflict.Jobs, ","),
			"running_job_ids": strings.Join(conflict.Running, ","),
			"held_job_ids":    strings.Join(conflict.Held, ","),
			"reservation_ids": strings.Join(conflict.Reservations, ","),
		}
		details = append(details, conflict.Detail())
	}
	if withInfo, derr := st.WithDetails(details...); derr == nil {
		st = withInfo
	}
	return st.Err()
}

// ReservationConflictOf returns the ReservationConflict detail of an error
// status from CreateReservation (or of a *ReservationConflictError), and
// whether there was one.
func ReservationConflictOf(err error) (*fedschedv1.ReservationConflict, bool) {
	var conflict *ReservationConflictError
	if errors.As(err, &conflict) {
		return conflict.Detail(), true
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	for _, d := range st.Details() {
		if c, ok := d.(*fedschedv1.ReservationConflict); ok {
			return c, true
		}
	}
	return nil, false
}

// CodeOf returns the gRPC code ToStatus gives err.
func CodeOf(err error) codes.Code {
	return status.Code(ToStatus(err))
}

// FromStatus converts an error returned by a gRPC call to the node back into
// one that errors.Is matches against the node's sentinels (ErrJobNotFound,
// ErrIdempotencyConflict, ...), by the ErrorInfo reason the node attached.
// It returns a *RemoteError for any status error, and err unchanged
// otherwise (nil stays nil).
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return err
	}
	re := &RemoteError{status: st}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != ErrorDomain {
			continue
		}
		re.Reason = info.GetReason()
		for _, row := range errorTable {
			if row.reason == re.Reason {
				re.sentinel = row.err
				break
			}
		}
		break
	}
	return re
}

// RemoteError is an error status received from a node. errors.Is matches it
// against the sentinel its reason names; status.FromError still sees the
// status.
type RemoteError struct {
	// Reason is the ErrorInfo reason ("JOB_NOT_FOUND", ...); empty if the
	// status carried none (it did not come from a node).
	Reason   string
	status   *status.Status
	sentinel error
}

// Error returns the status message.
func (e *RemoteError) Error() string { return e.status.Message() }

// Code returns the status code.
func (e *RemoteError) Code() codes.Code { return e.status.Code() }

// Unwrap returns the sentinel named by Reason, or nil.
func (e *RemoteError) Unwrap() error { return e.sentinel }

// GRPCStatus returns the status, for status.FromError and status.Code.
func (e *RemoteError) GRPCStatus() *status.Status { return e.status }
