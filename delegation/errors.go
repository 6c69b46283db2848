package delegation

import "errors"

// Errors of the delegation protocol.
var (
	// ErrTransition is returned when an event is not allowed in an
	// agreement's state (e.g. agreeing to a rejected quote).
	ErrTransition = errors.New("transition not allowed")
)

// ErrInvalid is returned for a policy name or setting that does not exist.
var ErrInvalid = errors.New("invalid delegation setting")
