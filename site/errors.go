package site

import "errors"

// ErrInvalid is returned for a configuration the agent cannot run with.
var ErrInvalid = errors.New("invalid site agent configuration")
