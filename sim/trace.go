package sim

import (
	"strconv"

	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/swf"
)

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
