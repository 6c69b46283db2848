package sim

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

// TraceAliases are the short names of the embedded traces.
var TraceAliases = map[string]string{
	"kth":    traces.KTH,
	"hpc2n":  traces.HPC2N,
	"nasa":   traces.NASA,
	"lublin": traces.Lublin,
	"ctc":    traces.CTC,
	"sdsc":   traces.SDSC,
}

// LoadTrace reads a trace by path, falling back to the embedded traces by
// alias (kth, hpc2n, nasa, lublin, ctc, sdsc) or file name when no such file exists.
func LoadTrace(name string, opts swf.Options) (*swf.Trace, error) {
	if name == "" {
		return nil, fmt.Errorf("no trace named: %w", ErrBadConfig)
	}
	if _, err := os.Stat(name); err == nil {
		return swf.ReadFile(name, opts)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("trace %s: %w", name, err)
	}
	embedded, ok := TraceAliases[strings.ToLower(name)]
	if !ok {
		embedded = name
	}
	rc, err := traces.Open(embedded)
	if err != nil {
		return nil, fmt.Errorf("trace %q is neither a file nor an embedded trace: %w", name, err)
	}
	defer rc.Close()
	return swf.Read(rc, embedded, opts)
}

// FromSWF turns trace jobs into replay jobs: the submit time is the release,
// the run time the actual runtime (negative means 0), the requested time the
// estimate and the processors those of swf.Job.Procs. A job without an
// estimate gets its actual runtime as estimate (exact estimates), so that a
// trace without field 9 still replays; reports say so. Jobs have no deadline
// and no money; the SLA models set those.
func FromSWF(in []swf.Job) []Job {
	out := make([]Job, len(in))
	for i, j := range in {
		est := j.ReqTime
		if est <= 0 {
			est = max(j.Runtime, 1)
		}
		out[i] = Job{
			ID:       j.ID,
			Submit:   j.Submit,
			Runtime:  max(j.Runtime, 0),
			Estimate: est,
			Procs:    int(j.Procs()),
			Deadline: plan.Forever,
			User:     idString(j.User),
			Group:    idString(j.Group),
			App:      idString(j.Executable),
			Queue:    idString(j.Queue),
		}
	}
	return out
}

func idString(v int64) string {
	if v < 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}
