package plan

import "errors"

// Errors returned by Plan's mutations. Callers test them with errors.Is.
var (
	// ErrInvalid is returned for a malformed reservation or argument: no
	// processors, an empty slot, or a new end outside the allowed range.
	ErrInvalid = errors.New("invalid reservation")
	// ErrExceedsCapacity is returned when a reservation asks for more
	// processors than the site has.
	ErrExceedsCapacity = errors.New("more processors than the site has")
	// ErrOutsideWindow is returned when a slot does not lie inside its
	// window [release, deadline).
	ErrOutsideWindow = errors.New("slot outside the job's window")
	// ErrNoFit is returned when the processors are not free for the slot.
	ErrNoFit = errors.New("processors not free for the slot")
	// ErrDuplicate is returned when a reservation id is already in the plan.
	ErrDuplicate = errors.New("reservation id already in the plan")
	// ErrUnknownReservation is returned for an id that is not in the plan.
	ErrUnknownReservation = errors.New("no such reservation")
	// ErrHoldExpired is returned by Confirm for a hold that ran out.
	ErrHoldExpired = errors.New("hold expired")
	// ErrUnknownPolicy is returned by ParsePolicy for a name it does not know.
	ErrUnknownPolicy = errors.New("unknown policy")
	// ErrFixed is returned when a policy tries to move, shorten or extend a
	// fixed reservation.
	ErrFixed = errors.New("fixed reservations cannot be changed")
)
