package config

import "errors"

// ErrInvalid is wrapped by every error of Load, Parse, ApplyEnv, ApplyFlags,
// Resolve and Validate that is due to a bad value (as opposed to, say, an
// unreadable file). The message names the field.
var ErrInvalid = errors.New("invalid configuration")
