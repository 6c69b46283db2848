package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// markerJob appends a line to marker each time it runs.
func markerJob(marker string) []string {
	return sh("echo ran >> " + marker)
}

func countRuns(t *testing.T, marker string) int {
	t.Helper()
	b, err := os.ReadFile(marker)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "ran\n")
}

// TestProcessStartAfterTornJobDir: a node that died while preparing a job's
// directory (before any supervisor claimed it) left it behind; the job was
// never run, so the next node's Start runs it, once. Defect 10: the old
// executor created an empty spec.json first, and a SIGKILL before the real
// spec was written made every later Start fail with ErrAlreadyStarted, the
// job then reported lost.
func TestProcessStartAfterTornJobDir(t *testing.T) {
	for name, leave := range map[string]func(jobDir string) error{
		"empty spec.json": func(d string) error { return os.WriteFile(filepath.Join(d, specFile), nil, 0o644) },
		"complete spec.json, no supervisor": func(d string) error {
			return writeJSON(filepath.Join(d, specFile), jobSpecFile{JobID: "j", Argv: []string{"false"}})
		},
		"no spec.json": func(string) error { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker")
			p := newProcess(t, dir, 0)
			if err := os.MkdirAll(p.JobDir("j"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := leave(p.JobDir("j")); err != nil {
				t.Fatal(err)
			}
			run(t, p)
			if err := p.Start(context.Background(), Spec{JobID: "j", Argv: markerJob(marker)}); err != nil {
				t.Fatalf("Start after a torn directory: %v", err)
			}
			if x := waitExit(t, p); x.Lost || x.ExitCode != 0 {
				t.Fatalf("exit = %+v", x)
			}
			if n := countRuns(t, marker); n != 1 {
				t.Fatalf("job ran %d times, want 1", n)
			}
		})
	}
}

// TestProcessUnfinishedDirRemoved: a directory still under its temporary
// name was never handed to a supervisor; a new executor removes it.
func TestProcessUnfinishedDirRemoved(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "jobs", "e1", newDirPrefix+"j-123")
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		t.Fatal(err)
	}
	p, err := NewProcess(ProcessConfig{DataDir: dir, Epoch: "e1", SupervisorCommand: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unfinished directory still there: %v", err)
	}
	if got, want := p.JobDir("j"), filepath.Join(dir, "jobs", "e1", "j"); got != want {
		t.Fatalf("JobDir = %s, want %s", got, want)
	}
}

// TestProcessSupervisorsRaceForOneJob: supervisors of two nodes (the first
// died before it could see its supervisor's report) start on one job
// directory; the job runs once and the loser says so.
func TestProcessSupervisorsRaceForOneJob(t *testing.T) {
	for range 5 {
		dir := t.TempDir()
		marker := filepath.Join(dir, "marker")
		p := newProcess(t, dir, 0)
		sf := jobSpecFile{JobID: "j", Argv: markerJob(marker), KillGrace: DefaultKillGrace}
		if err := prepareJobDir(p.JobDir("j"), sf); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.startSupervisor(context.Background(), p.JobDir("j"))
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrAlreadyStarted):
				t.Fatalf("loser's error = %v, want ErrAlreadyStarted", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d supervisors ran the job, want 1 (%v)", won, errs)
		}
		// A later Start (a third node) does not run it either.
		if err := p.Start(context.Background(), Spec{JobID: "j", Argv: markerJob(marker)}); !errors.Is(err, ErrAlreadyStarted) {
			t.Fatalf("Start of a claimed job = %v, want ErrAlreadyStarted", err)
		}
		run(t, p)
		if err := p.Reattach("j"); err != nil {
			t.Fatal(err)
		}
		waitExit(t, p)
		if n := countRuns(t, marker); n != 1 {
			t.Fatalf("job ran %d times, want 1", n)
		}
	}
}
