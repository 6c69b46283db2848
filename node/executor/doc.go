// Package executor starts the jobs a site node has decided to run, ends them
// at the end of their reservations, and reports how they ended.
//
// # Basics
//
// [Executor] is the one interface; the node drives whichever implementation
// its configuration names, and a batch-system adapter can be added later:
//
//   - [Process] runs a job's command as a local process group, each under a
//     small supervising process, so that jobs outlive a restart of the node
//     and a new node can [Executor.Reattach] to them. The supervisor is
//     fedsched itself, re-executed with a hidden subcommand whose body is
//     [RunSupervisor].
//   - [Slurm] submits each job to a Slurm partition (sbatch), follows all
//     jobs with one squeue per poll, cancels with scancel, maps Slurm's end
//     states, re-attaches after a restart through slurm.json or the job's
//     name and comment, and reports the partition's usable CPUs
//     ([CapacityReporter]). A start cut short by a stop finishes its sbatch;
//     one cut by a crash (sbatch dies with the node) is submitted again
//     only if Slurm has no job of that name and comment. See docs/slurm.md.
//   - [Simulated] pretends: a job "runs" for its given runtime on a
//     [clock.Clock], possibly a scaled one, and then exits 0.
//
// Lifecycle: make an executor with its constructor (no goroutine starts),
// call Run(ctx) on a goroutine you own, and read [Exit] reports from
// Exits(). Start, Kill and Reattach may be called from any goroutine, before
// or while Run runs; reports are only delivered while Run runs. Run returns
// when ctx is cancelled, and every goroutine of the executor has stopped by
// then. Jobs of a Process executor keep running after Run returns (that is
// the point: a new node re-attaches to them); jobs of a Simulated executor
// are gone.
//
// Each job ends with exactly one Exit: it exited by itself, it was killed
// (at its deadline, the end of its reservation, or by Kill), or it was lost
// (its outcome can no longer be known).
//
// # Files of a job (Process)
//
// Each job has a directory <data dir>/jobs/<job id>/:
//
//	spec.json        what to run, written by the executor before starting
//	claim            the pid (and start time) of the one supervisor that
//	                 took the job, created exclusively before it starts it
//	supervisor.json  the supervisor's pid (and start time) and the job's
//	                 process group, written by the supervisor once the job runs
//	exit.json        how the job ended, written atomically by the supervisor
//	stdout, stderr   the job's output
//	supervisor.log   the supervisor's own messages
//
// # A start cut short
//
// Once the supervisor is started, a job's start is not undone: when Start's
// ctx ends (the node stops) before the supervisor reports, the supervisor
// is left to go on, as it would be had the node died. The directory then
// tells the next node where the start was ([SupervisorStep]): without a
// claim the job has not started, and the next Start runs it (should the
// earlier supervisor get to its claim too, only one claim is made, and the
// other supervisor leaves the job); with a claim the job is taken, and
// [Process.Started] and [Executor.Reattach] follow it to its exit.json, also
// while the supervisor is still starting it (it lives: the claim names it).
// Kill of such a job reaches the supervisor that claimed it, which then
// does not start the job, or (the signal reaching it a moment late) ends it
// at once, and records the kill.
//
// # Caveats
//
// The Process executor works in wall-clock time: Spec.Deadline is a wall
// time, and reported times come from the wall clock. Run it with a time
// scale of 1. It needs a Unix system; liveness checks that guard against pid
// reuse read /proc and are skipped where /proc is missing.
//
// The service manager must not kill the node's whole process tree when it
// stops the node (systemd: KillMode=process or mixed), or the jobs die with
// it.
package executor
