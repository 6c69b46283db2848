package main

import (
	"fmt"

	"github.com/fedsched/fedsched/sim"
	"github.com/fedsched/fedsched/swf"
)

// traceFlagHelp documents what --trace accepts, for every command that
// reads a trace.
const traceFlagHelp = "SWF trace: a file path (plain or gzip), or an embedded trace: kth, hpc2n, nasa, lublin, ctc, sdsc (or its file name)"

// loadTrace reads a trace by path or embedded name, with CLI error codes.
func loadTrace(name string, opts swf.Options) (*swf.Trace, error) {
	if name == "" {
		return nil, fmt.Errorf("InvalidArgument: --trace is required (%s)", traceFlagHelp)
	}
	tr, err := sim.LoadTrace(name, opts)
	if err != nil {
		return nil, fmt.Errorf("NotFound: %w (%s)", err, traceFlagHelp)
	}
	return tr, nil
}
