package forecast

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package. The errors actually returned wrap them
// with the value concerned; test for them with errors.Is.
var (
	// ErrInvalidConfig is returned by Config.Validate, SearchConfig.Validate,
	// EvalConfig.Validate and by the constructors that validate their
	// configuration, when a field is out of range.
	ErrInvalidConfig = errors.New("forecast: invalid configuration")

	// ErrLookAhead is returned by Forecaster.Predict when it is asked to
	// predict at a time earlier than a completion it has already observed:
	// the answer would depend on the future. It is the guard that keeps
	// drivers honest about time order.
	ErrLookAhead = errors.New("forecast: prediction before an observed completion")

	// ErrOutOfOrder is returned by Forecaster.Observe when completions are
	// fed out of time order (a completion earlier than one already seen).
	ErrOutOfOrder = errors.New("forecast: completion out of time order")

	// ErrNoHistory is returned by Forecaster.Predict when there is nothing to
	// predict from: no completed job in any partition of the job and no user
	// estimate to fall back on.
	ErrNoHistory = errors.New("forecast: no history and no estimate")

	// ErrNoJobs is returned by Evaluate and Search when no job of the input
	// qualifies (for Evaluate: positive runtime and a user estimate).
	ErrNoJobs = errors.New("forecast: no usable jobs")

	// ErrUnknownAttr is returned by ParseAttrSet for an attribute name it
	// does not know.
	ErrUnknownAttr = errors.New("forecast: unknown attribute")
)

// errorf returns an error wrapping ErrInvalidConfig with the formatted
// detail.
func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
