package overbook

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrBadSample: a runtime observation with a non-positive estimate or a
	// negative actual runtime.
	ErrBadSample = errors.New("overbook: bad runtime sample")

	// ErrLengthMismatch: parallel slices of different lengths.
	ErrLengthMismatch = errors.New("overbook: length mismatch")

	// ErrBadConfig: an invalid configuration value (negative, NaN, out of
	// range).
	ErrBadConfig = errors.New("overbook: bad configuration")

	// ErrBadFactor: an ageing factor outside (0, 1].
	ErrBadFactor = errors.New("overbook: ageing factor outside (0, 1]")

	// ErrCorrupt: serialised statistics that do not decode to a valid value.
	ErrCorrupt = errors.New("overbook: corrupt serialised statistics")

	// ErrBadWindow: a time window whose end precedes its start (slot end
	// before the start, planned start before the release).
	ErrBadWindow = errors.New("overbook: bad time window")

	// ErrBadStep: a non-positive time-grid step.
	ErrBadStep = errors.New("overbook: time step must be positive")

	// ErrBadEstimate: a non-positive runtime estimate.
	ErrBadEstimate = errors.New("overbook: runtime estimate must be positive")

	// ErrTooManyBins: a distribution would need more than MaxDistBins bins;
	// choose a coarser step (see DefaultStep).
	ErrTooManyBins = errors.New("overbook: distribution needs too many bins")

	// ErrNilRand: a random model was called without a random source.
	ErrNilRand = errors.New("overbook: nil *rand.Rand")
)
