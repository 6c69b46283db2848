package node

import (
	"maps"
	"os/user"
	"strconv"

	"github.com/fedsched/fedsched/node/executor"
)

// batchSpec completes an executor spec with what every executor passes to
// a job, as a batch system does (docs/operations.md, "The job's
// environment"): its processors, its user, and the environment variables
// FEDSCHED_JOB_ID (the id the user was given, also when a peer runs the
// job), FEDSCHED_PROCS, and USER and HOME unless the job sets them.
func (n *Node) batchSpec(es *executor.Spec, lj *liveJob) {
	spec := lj.job.GetSpec()
	es.Procs = lj.pj.Procs
	es.User = spec.GetUser()
	env := make(map[string]string, len(spec.GetEnv())+4)
	maps.Copy(env, spec.GetEnv())
	env["FEDSCHED_JOB_ID"] = n.userJobID(lj)
	env["FEDSCHED_PROCS"] = strconv.Itoa(lj.pj.Procs)
	if _, ok := env["USER"]; !ok && es.User != "" {
		env["USER"] = es.User
	}
	if _, ok := env["HOME"]; !ok && es.User != "" {
		if u, err := user.Lookup(es.User); err == nil && u.HomeDir != "" {
			env["HOME"] = u.HomeDir
		}
	}
	es.Env = env
}

// userJobID is the id the job's user was given: the origin's id of a job
// this site runs for a peer, the job's own id otherwise.
func (n *Node) userJobID(lj *liveJob) string {
	id := lj.job.GetId()
	if o := lj.job.GetOriginSite(); o == "" || o == n.cfg.Site {
		return id
	}
	for _, a := range n.agreements {
		if a.Role == rolePeer && a.PeerJobID == id {
			return a.JobID
		}
	}
	return id
}
