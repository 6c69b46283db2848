package node

import (
	"bytes"
	"fmt"
	"maps"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// batchSpec completes an executor spec with what every executor passes to
// a job, as a batch system does (docs/operations.md, "The job's
// environment"): its processors, its user, and the environment variables
// FEDSCHED_JOB_ID (the id the user was given, also when a peer runs the
// job), FEDSCHED_PROCS, and USER and HOME unless the job sets them.
func (n *Node) batchSpec(es *executor.Spec, lj *liveJob) {
	spec := lj.job().GetSpec()
	es.Procs = lj.pj.Procs
	es.User = spec.GetUser()
	env := make(map[string]string, len(spec.GetEnv())+4)
	maps.Copy(env, spec.GetEnv())
	env["FEDSCHED_JOB_ID"] = n.userJobID(lj)
	env["FEDSCHED_PROCS"] = strconv.Itoa(lj.pj.Procs)
	if _, ok := env["USER"]; !ok && es.User != "" {
		env["USER"] = es.User
	}
	if _, ok := env["HOME"]; !ok && es.User != "" && n.cfg.Executor != config.ExecutorSimulated {
		if u, err := user.Lookup(es.User); err == nil && u.HomeDir != "" {
			env["HOME"] = u.HomeDir
		}
	}
	es.Env = env
	es.Script = spec.GetScript()
	if n.cfg.Executor != config.ExecutorSimulated {
		es.Stdout, es.Stderr = outputPaths(spec, env["FEDSCHED_JOB_ID"], n.jobDir(lj.job().GetId()))
	}
}

// jobDir is the executor's directory of a job.
func (n *Node) jobDir(id string) string {
	if d, ok := n.deps.Executor.(executor.JobDirs); ok {
		return d.JobDir(id)
	}
	return filepath.Join(n.cfg.DataDir, jobsSubdir, id)
}

// outputPaths returns where a job's output and error go: the spec's
// patterns expanded, or the executor's default (empty strings).
func outputPaths(spec *fedschedv1.JobSpec, userJobID, jobDir string) (stdout, stderr string) {
	base := spec.GetWorkdir()
	if base == "" {
		base = jobDir
	}
	expand := func(pattern string) string {
		if pattern == "" {
			return ""
		}
		p := ExpandOutputPattern(pattern, userJobID, spec.GetUser())
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		return p
	}
	stdout, stderr = expand(spec.GetOutput()), expand(spec.GetError())
	if stderr == "" {
		stderr = stdout
	}
	return stdout, stderr
}

// ExpandOutputPattern replaces, as sbatch does in --output, "%j" by the
// job id, "%u" by the user and "%%" by "%"; other characters stay.
func ExpandOutputPattern(pattern, jobID, user string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c != '%' || i+1 == len(pattern) {
			b.WriteByte(c)
			continue
		}
		switch pattern[i+1] {
		case 'j':
			b.WriteString(jobID)
		case 'u':
			b.WriteString(user)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte(c)
			continue
		}
		i++
	}
	return b.String()
}

// userJobID is the id the job's user was given: the origin's id of a job
// this site runs for a peer, the job's own id otherwise.
func (n *Node) userJobID(lj *liveJob) string {
	id := lj.job().GetId()
	if o := lj.job().GetOriginSite(); o == "" || o == n.cfg.Site {
		return id
	}
	for _, a := range n.agreements {
		if a.Role == rolePeer && a.PeerJobID == id {
			return a.JobID
		}
	}
	return id
}

// maxScript bounds a job's script.
const maxScript = 1 << 20

// checkBatchFields checks a spec's command, script and output patterns.
func checkBatchFields(s *fedschedv1.JobSpec, executorKind string) error {
	if len(s.GetScript()) > maxScript {
		return fmt.Errorf("script: %d bytes, at most %d: %w", len(s.GetScript()), maxScript, ErrInvalidJob)
	}
	if bytes.IndexByte(s.GetScript(), 0) >= 0 {
		return fmt.Errorf("script: contains a NUL byte (not a text file?): %w", ErrInvalidJob)
	}
	for _, f := range []struct{ name, v string }{{"output", s.GetOutput()}, {"error", s.GetError()}} {
		if len(f.v) > maxArgLen || !utf8.ValidString(f.v) || containsNUL(f.v) {
			return fmt.Errorf("%s: at most %d bytes of UTF-8 without NUL: %w", f.name, maxArgLen, ErrInvalidJob)
		}
	}
	if executorKind != config.ExecutorSimulated && len(s.GetCommand()) == 0 && len(s.GetScript()) == 0 {
		return fmt.Errorf("a command or a script is required: the site runs jobs (executor %s): %w", executorKind, ErrInvalidJob)
	}
	return nil
}
