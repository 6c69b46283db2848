package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

// traceAliases are the short names of the embedded traces.
var traceAliases = map[string]string{
	"kth":    traces.KTH,
	"hpc2n":  traces.HPC2N,
	"nasa":   traces.NASA,
	"lublin": traces.Lublin,
}

// traceFlagHelp documents what --trace accepts, for every command that
// reads a trace.
const traceFlagHelp = "SWF trace: a file path (plain or gzip), or an embedded trace: kth, hpc2n, nasa, lublin (or its file name)"

// loadTrace reads a trace by path, falling back to the embedded traces by
// alias or file name when no such file exists.
func loadTrace(name string, opts swf.Options) (*swf.Trace, error) {
	if name == "" {
		return nil, fmt.Errorf("InvalidArgument: --trace is required (%s)", traceFlagHelp)
	}
	if _, err := os.Stat(name); err == nil {
		return swf.ReadFile(name, opts)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("trace %s: %w", name, err)
	}
	embedded, ok := traceAliases[strings.ToLower(name)]
	if !ok {
		embedded = name
	}
	rc, err := traces.Open(embedded)
	if err != nil {
		return nil, fmt.Errorf("NotFound: trace %q is neither a file nor an embedded trace (%s): %w", name, traceFlagHelp, err)
	}
	defer rc.Close()
	return swf.Read(rc, embedded, opts)
}
