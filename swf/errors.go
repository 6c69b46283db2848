package swf

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package. Test for them with errors.Is; the errors
// actually returned wrap them with the file, line or value concerned.
var (
	// ErrMalformed is wrapped by every *LineError: a job line that does not
	// have 18 fields, has a field that is not a finite number representable
	// as int64, or is longer than MaxLineLength. With
	// Options.SkipMalformed such lines are counted in Trace.Skipped instead.
	ErrMalformed = errors.New("swf: malformed job line")

	// ErrInvalidOption is wrapped by ParseRule4 (and other option parsers)
	// when a textual option, e.g. from a command-line flag, is not recognised.
	ErrInvalidOption = errors.New("swf: invalid option")
)

// LineError reports a malformed line of an SWF file. It exists so that
// callers can point the user at the exact place in the trace: its message is
// "file:line: reason", e.g. "KTH.swf:1234: expected 18 fields, got 17".
// errors.Is(err, ErrMalformed) is true for every LineError, and the
// underlying reason (for instance a *strconv.NumError) stays reachable with
// errors.Is and errors.As.
type LineError struct {
	File string // name of the trace as given to Read, or the path given to ReadFile
	Line int    // 1-based line number in the (decompressed) file
	Err  error  // what is wrong with the line
}

// Error formats the error as "file:line: reason".
func (e *LineError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s:%d: malformed job line", e.File, e.Line)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap exposes both ErrMalformed and the specific reason to errors.Is and
// errors.As.
func (e *LineError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMalformed}
	}
	return []error{ErrMalformed, e.Err}
}
