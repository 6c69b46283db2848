package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// newSlurmExecutor builds the slurm executor and checks that Slurm answers
// and that the partition exists. It returns the site's processors: cfg.Procs
// if set, otherwise all CPUs of the partition.
func newSlurmExecutor(ctx context.Context, cfg config.Config, epoch string, log *slog.Logger) (executor.Executor, int, error) {
	s, err := executor.NewSlurm(executor.SlurmConfig{DataDir: cfg.DataDir, Epoch: epoch, Partition: cfg.Slurm.Partition, PollInterval: cfg.Slurm.PollInterval, Logger: log,
		Accounts: executor.Accounts{AllowRoot: cfg.Jobs.AllowRoot, ServiceAccount: cfg.Jobs.ServiceAccount}})
	if err != nil {
		return nil, 0, err
	}
	total, usable, err := s.CPUs(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("slurm executor: %w: %w (is SLURM_CONF set and slurmctld up?)", ErrUnavailable, err)
	}
	part, _ := s.Partition(ctx)
	procs := cfg.Procs
	if procs == 0 {
		procs = total
	}
	log.Info("slurm executor", "partition", part, "partition_cpus", total, "usable_cpus", usable, "procs", procs)
	return s, procs, nil
}

// capacity carries out a change of the processors the executor's batch
// system would start jobs on: the agent takes processors out of service
// (Agent.NodeDown) and returns them (NodeUp). Only idle processors are
// taken (the first idle one each time): a drained Slurm node lets its
// running jobs finish, so the rest follow as those jobs end (applied again
// every turn). The agent's decisions about the waiting jobs they displace
// are written (applyOwn): placed again, or failed, SLA violated, when no
// slot remains in their windows: the provider lost the processors.
func (n *Node) capacity(now int64) {
	want := max(0, n.procs-n.usable)
	changed := false
	for n.agent.Down() > want && n.agent.NodeUp(now) {
		changed = true
	}
	for n.agent.Down() < want && n.site.Busy()+n.agent.Down() < n.procs {
		n.agent.NodeDown(now, n.site.Busy())
		changed = true
	}
	if changed {
		n.applyOwn(now)
	}
}

// failNode fails a waiting job the processors lost left no slot for.
func (n *Node) failNode(lj *liveJob, now int64) {
	n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_FAILED_NODE,
		"processors of the site were lost (a batch-system node drained or failed) and no slot remains in the job's window",
		fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
}

// runsAs names what runs a job in the batch system ("; Slurm job 42"), for
// the job's RUNNING message; empty for other executors.
func (n *Node) runsAs(jobID string) string {
	if d, ok := n.deps.Executor.(executor.Describer); ok {
		if what := d.Describe(jobID); what != "" {
			return "; " + what
		}
	}
	return ""
}
