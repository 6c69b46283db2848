package executor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/executor/slurmtest"
	"github.com/fedsched/fedsched/node/executor/supervisortest"
)

// slurmStartEnv turns the test binary into a node that starts one job
// with the Slurm executor and exits (TestMain): the crash cases kill it
// with SIGKILL during that start.
const slurmStartEnv = "FEDSCHED_EXECUTOR_TEST_SLURM_START"

// runSlurmStart is the child's part: FEDSCHED_EXECUTOR_TEST_SLURM_START
// holds "<data dir>|<job id>|<marker file>".
func runSlurmStart(arg string) int {
	f := strings.Split(arg, "|")
	if len(f) != 3 {
		return 2
	}
	s, err := NewSlurm(SlurmConfig{DataDir: f[0], Partition: "fedsched", Accounts: testAccounts})
	if err != nil {
		return 1
	}
	if err := s.Start(context.Background(), Spec{JobID: f[1], Argv: markerJob(f[2])}); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// TestSlurmStartCutAtEachPoint: the node is stopped (Start's ctx ends) or
// killed (SIGKILL of a process that runs Start) while sbatch is at each
// point of a submission: before it reached slurmctld, and after slurmctld
// queued the job but before sbatch answered (the real sbatch, paused; see
// slurmtest.PausingSbatch). A new executor on the same data directory then
// takes over as the node does (node.adoptStarted, node.start): Started,
// then Reattach, or Start again. The job is submitted to Slurm exactly
// once, runs once and exits 0: never lost, failed or cancelled. Also when
// the node died before sbatch, with spec.json created and still empty.
//
// Before the fix a stop killed sbatch: before the submission the job was
// never submitted, and the next Start refused it (spec.json existed) and
// re-attached nothing: lost; after it, the failed Start cancelled the
// queued job, which the next node found by name, cancelled. A crash before
// the submission lost the job the same way; the parent-death signal keeps
// the crashed node's sbatch from queueing it a second time after the new
// node did.
func TestSlurmStartCutAtEachPoint(t *testing.T) {
	slurmtest.Require(t)
	for _, point := range []string{slurmtest.BeforeSubmit, slurmtest.AfterSubmit} {
		for _, crash := range []bool{false, true} {
			name := point + "/stop"
			if crash {
				name = point + "/sigkill"
			}
			t.Run(name, func(t *testing.T) { slurmStartCut(t, point, crash) })
		}
	}
	// Killed between creating spec.json and writing it.
	t.Run(specCreated+"/sigkill", func(t *testing.T) { slurmStartCut(t, specCreated, true) })
}

// specCreated is the point of a crash before sbatch: spec.json created,
// still empty.
const specCreated = "spec-created"

func slurmStartCut(t *testing.T, point string, crash bool) {
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "marker")
	id := testJobID(t)
	var wrapper string
	if point != specCreated {
		wrapper = slurmtest.PausingSbatch(t, point)
	}
	s, err := NewSlurm(SlurmConfig{DataDir: dir, Partition: "fedsched", Accounts: testAccounts})
	if err != nil {
		t.Fatal(err)
	}
	jobDir := s.JobDir(id)
	spec := Spec{JobID: id, Argv: markerJob(marker)}
	t.Cleanup(func() {
		supervisortest.Resume(jobDir) //nolint:errcheck // a failed test's leftover
		for _, sid := range slurmJobsNamed(t, id) {
			exec.Command("scancel", sid).Run() //nolint:errcheck // a failed test's leftover
		}
	})

	if point == specCreated {
		if err := os.MkdirAll(jobDir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(jobDir, specFile), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if crash {
		// A node (this binary) starts the job; it is killed while sbatch
		// is paused.
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), slurmStartEnv+"="+dir+"|"+id+"|"+marker, "PATH="+wrapper+":"+os.Getenv("PATH"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := supervisortest.WaitPaused(jobDir, 30*time.Second); err != nil {
			cmd.Process.Kill() //nolint:errcheck // failing anyway
			cmd.Wait()         //nolint:errcheck // killed
			t.Fatal(err)
		}
		sbatch := supervisortest.PausedPID(jobDir)
		cmd.Process.Kill() //nolint:errcheck // checked by Wait
		cmd.Wait()         //nolint:errcheck // killed
		// sbatch dies with the node that ran it.
		if !slurmtest.ProcessGone(sbatch, 5*time.Second) {
			t.Errorf("sbatch (pid %d) runs on after its node was killed", sbatch)
		}
	} else {
		t.Setenv("PATH", wrapper+":"+os.Getenv("PATH"))
		ctx, stop := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- s.Start(ctx, spec) }()
		if err := supervisortest.WaitPaused(jobDir, 30*time.Second); err != nil {
			stop()
			t.Fatal(err)
		}
		stop()
		// (A Start bound to ctx kills sbatch here.)
		time.Sleep(300 * time.Millisecond)
		if err := supervisortest.Resume(jobDir); err != nil {
			t.Fatal(err)
		}
		// The submission in flight is finished and recorded.
		if err := <-errc; err != nil {
			t.Fatalf("Start cut by the stop: %v, want the job submitted", err)
		}
		if _, err := os.Stat(filepath.Join(jobDir, slurmFile)); err != nil {
			t.Fatalf("the submission was not recorded: %v", err)
		}
	}

	// The next node.
	next, stopNext := newTestSlurm(t, dir)
	defer stopNext()
	rec, err := next.Started(id)
	if err != nil {
		t.Fatal(err)
	}
	if wantStarted := !crash || point == slurmtest.AfterSubmit; rec.Started != wantStarted {
		t.Errorf("Started after the cut: %v, want %v", rec.Started, wantStarted)
	}
	if rec.Started {
		err = next.Reattach(id)
	} else if err = next.Start(context.Background(), spec); errors.Is(err, ErrAlreadyStarted) {
		err = next.Reattach(id)
	}
	if err != nil {
		t.Fatal(err)
	}
	// A cut sbatch still alive would submit the job now, again.
	if err := supervisortest.Resume(jobDir); err != nil {
		t.Fatal(err)
	}
	e := waitSlurmExit(t, next, 60*time.Second)
	if e.JobID != id || e.Lost || e.Killed || e.ProviderFailed || e.ExitCode != 0 {
		t.Errorf("exit %+v (%s), want job %s exited 0", e, e.Detail, id)
	}
	if crash {
		// Whatever of the first node's sbatch lived has had its chance.
		slurmtest.ProcessGone(supervisortest.PausedPID(jobDir), 5*time.Second)
	}
	if ids := slurmJobsNamed(t, id); len(ids) != 1 {
		t.Errorf("job %s submitted %d times to Slurm (%v), want once", id, len(ids), ids)
	}
	if n := countRuns(t, marker); n != 1 {
		t.Errorf("job %s ran %d times, want once", id, n)
	}
}

// TestSlurmStartCutIgnoresAnotherStore: a data directory made afresh (a new
// store: another epoch) counts job ids from 1 again, and Slurm may still
// know the earlier store's job of the same id. A start of the new store's
// job, cut before sbatch, is not taken for that one: it is submitted, and
// runs.
func TestSlurmStartCutIgnoresAnotherStore(t *testing.T) {
	slurmtest.Require(t)
	id := testJobID(t)
	t.Cleanup(func() {
		for _, sid := range slurmJobsNamed(t, id) {
			exec.Command("scancel", sid).Run() //nolint:errcheck // a failed test's leftover
		}
	})
	old, err := NewSlurm(SlurmConfig{DataDir: t.TempDir(), Epoch: "old", Partition: "fedsched", Accounts: testAccounts})
	if err != nil {
		t.Fatal(err)
	}
	oldMarker := filepath.Join(t.TempDir(), "marker")
	if err := old.Start(context.Background(), Spec{JobID: id, Argv: markerJob(oldMarker)}); err != nil {
		t.Fatal(err)
	}

	dir, marker := t.TempDir(), filepath.Join(t.TempDir(), "marker")
	s, err := NewSlurm(SlurmConfig{DataDir: dir, Epoch: "new", Partition: "fedsched", PollInterval: 200 * time.Millisecond, Accounts: testAccounts})
	if err != nil {
		t.Fatal(err)
	}
	// The new store's start of the job was cut before sbatch.
	spec := Spec{JobID: id, Argv: markerJob(marker)}
	if err := os.MkdirAll(s.JobDir(id), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(s.JobDir(id), specFile), jobSpecFile{JobID: id, Argv: spec.Argv}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Started(id); err != nil || rec.Started {
		t.Fatalf("Started: %+v, %v; want not started (the Slurm job of that name is another store's)", rec, err)
	}
	if err := s.Start(context.Background(), spec); err != nil {
		t.Fatalf("Start again: %v, want the job submitted", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { stop(); <-done }()
	if e := waitSlurmExit(t, s, 60*time.Second); e.JobID != id || e.Lost || e.ExitCode != 0 {
		t.Errorf("exit %+v, want job %s exited 0", e, id)
	}
	if n := countRuns(t, marker); n != 1 {
		t.Errorf("the new store's job ran %d times, want once", n)
	}
}
