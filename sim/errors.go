package sim

import "errors"

// Errors returned by Run.
var (
	// ErrUnsorted is returned when the jobs are not sorted by submit time.
	ErrUnsorted = errors.New("jobs not sorted by submit time")
	// ErrDuplicateJob is returned when two jobs share an id.
	ErrDuplicateJob = errors.New("duplicate job id")
	// ErrBadConfig is returned for an experiment configuration that cannot
	// be run (an unknown strategy, more runs than the trace has jobs).
	ErrBadConfig = errors.New("bad experiment configuration")
	// ErrAborted is returned by a replay that FedConfig.Abort stopped.
	ErrAborted = errors.New("replay aborted")
)
