package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/executor/slurmtest"
)

// testAccounts is the tests' consent to run their jobs, which name no
// user, as root when the tests run as root (CI does).
var testAccounts = Accounts{AllowRoot: true}

var slurmTestSeq atomic.Int64

// testJobID is unique across test runs sharing one Slurm.
func testJobID(t *testing.T) string {
	return fmt.Sprintf("t%d-%d.%06d", os.Getpid(), time.Now().UnixNano()%1e9, slurmTestSeq.Add(1))
}

func newTestSlurm(t *testing.T, dir string) (*Slurm, func()) {
	t.Helper()
	s, err := NewSlurm(SlurmConfig{DataDir: dir, Partition: "fedsched", PollInterval: 200 * time.Millisecond, Accounts: testAccounts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func waitSlurmExit(t *testing.T, s *Slurm, within time.Duration) Exit {
	t.Helper()
	select {
	case e := <-s.Exits():
		return e
	case <-time.After(within):
		t.Fatalf("no exit within %v", within)
	}
	return Exit{}
}

// slurmJobsNamed lists the Slurm job ids whose name is name.
func slurmJobsNamed(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "-t", "all", "-n", name, "-o", "%i").Output()
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	return strings.Fields(string(out))
}

func squeueState(t *testing.T, sid string) string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "-t", "all", "-j", sid, "-o", "%T").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func waitSlurmState(t *testing.T, sid, want string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if squeueState(t, sid) == want {
			return
		}
	}
	t.Fatalf("Slurm job %s never reached %s (now %q)", sid, want, squeueState(t, sid))
}

func TestSlurmRunsJobsAndMapsExitCodes(t *testing.T) {
	slurmtest.Require(t)
	dir := t.TempDir()
	s, stop := newTestSlurm(t, dir)
	defer stop()
	work := t.TempDir()
	ok, bad := testJobID(t), testJobID(t)
	if err := s.Start(context.Background(), Spec{JobID: ok, Procs: 3, Workdir: work, Env: map[string]string{"GREETING": "hello"},
		Argv:     []string{"/bin/sh", "-c", `echo "$GREETING $FEDSCHED_JOB_ID $FEDSCHED_PROCS $SLURM_NTASKS $(pwd)"; echo oops >&2`},
		Deadline: time.Now().Add(5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background(), Spec{JobID: bad, Argv: []string{"/bin/sh", "-c", "exit 3"}}); err != nil {
		t.Fatal(err)
	}
	// Slurm knows each job by its fedsched id, once.
	for _, id := range []string{ok, bad} {
		if ids := slurmJobsNamed(t, id); len(ids) != 1 {
			t.Fatalf("squeue shows %v named %s, want one job", ids, id)
		}
	}
	if err := s.Start(context.Background(), Spec{JobID: ok, Argv: []string{"true"}}); err == nil {
		t.Fatal("a second Start of the same job succeeded")
	}
	got := map[string]Exit{}
	for range 2 {
		e := waitSlurmExit(t, s, 30*time.Second)
		got[e.JobID] = e
	}
	if e := got[ok]; e.ExitCode != 0 || e.Killed || e.Lost || e.ProviderFailed {
		t.Errorf("ok job: %+v, want a clean exit 0", e)
	}
	if e := got[bad]; e.ExitCode != 3 || e.Killed || e.Lost || e.ProviderFailed {
		t.Errorf("failing job: %+v, want exit 3", e)
	}
	out, _ := os.ReadFile(filepath.Join(s.JobDir(ok), "stdout"))
	if want := fmt.Sprintf("hello %s 3 3 %s\n", ok, work); string(out) != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	if errOut, _ := os.ReadFile(filepath.Join(s.JobDir(ok), "stderr")); string(errOut) != "oops\n" {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestSlurmScriptAndOutputPaths(t *testing.T) {
	slurmtest.Require(t)
	s, stop := newTestSlurm(t, t.TempDir())
	defer stop()
	work := t.TempDir()
	id := testJobID(t)
	outPath := filepath.Join(work, "out-100%.txt")
	script := "#!/bin/bash\n#SBATCH --comment=ignored-by-cli-precedence\necho from-script $BASH_VERSION | cut -c1-11\n"
	if err := s.Start(context.Background(), Spec{JobID: id, Script: []byte(script), Stdout: outPath, Stderr: outPath}); err != nil {
		t.Fatal(err)
	}
	if e := waitSlurmExit(t, s, 30*time.Second); e.ExitCode != 0 {
		t.Fatalf("exit %+v", e)
	}
	if b, err := os.ReadFile(outPath); err != nil || string(b) != "from-script\n" {
		t.Fatalf("output %q, %v", b, err)
	}
	// The comment is fedsched's (command-line options win over #SBATCH).
	if sid, err := s.findByName(context.Background(), id); err != nil || sid == "" {
		t.Fatalf("job not found by name and comment: %q %v", sid, err)
	}
}

func TestSlurmKillDeadlineTimeoutAndExternalCancel(t *testing.T) {
	slurmtest.Require(t)
	s, stop := newTestSlurm(t, t.TempDir())
	defer stop()
	ctx := context.Background()
	killed, late, timeout, external := testJobID(t), testJobID(t), testJobID(t), testJobID(t)
	long := []string{"sleep", "300"}
	for _, sp := range []Spec{
		{JobID: killed, Argv: long},
		{JobID: late, Argv: long, Deadline: time.Now().Add(2 * time.Second)},
		{JobID: timeout, Argv: long, Deadline: time.Now().Add(10 * time.Minute)},
		{JobID: external, Argv: long},
	} {
		if err := s.Start(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	sid := func(id string) string {
		ids := slurmJobsNamed(t, id)
		if len(ids) != 1 {
			t.Fatalf("job %s: Slurm jobs %v", id, ids)
		}
		return ids[0]
	}
	for _, id := range []string{killed, timeout, external} {
		waitSlurmState(t, sid(id), "RUNNING")
	}
	if err := s.Kill(killed); err != nil {
		t.Fatal(err)
	}
	// Slurm's own time limit (the backstop while the node is down) ends in
	// TIMEOUT: cut it to now.
	if out, err := exec.Command("scontrol", "update", "JobId="+sid(timeout), "TimeLimit=0").CombinedOutput(); err != nil {
		t.Fatalf("scontrol update: %v %s", err, out)
	}
	if out, err := exec.Command("scancel", sid(external)).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v %s", err, out)
	}
	got := map[string]Exit{}
	for range 4 {
		e := waitSlurmExit(t, s, 40*time.Second)
		got[e.JobID] = e
	}
	if e := got[killed]; !e.Killed || e.Cause != CauseRequest {
		t.Errorf("killed job: %+v, want killed on request", e)
	}
	if e := got[late]; !e.Killed || e.Cause != CauseDeadline {
		t.Errorf("job past its deadline: %+v, want killed at the deadline", e)
	}
	if e := got[timeout]; !e.Killed || e.Cause != CauseDeadline || !strings.Contains(e.Detail, "TIMEOUT") {
		t.Errorf("timed-out job: %+v, want killed at the deadline (TIMEOUT)", e)
	}
	if e := got[external]; e.Killed || !e.ProviderFailed {
		t.Errorf("job cancelled behind fedsched's back: %+v, want a provider failure", e)
	}
	if err := s.Kill(killed); err == nil {
		t.Error("Kill of a reported job succeeded")
	}
}

// TestSlurmReattach: a new executor on the same data directory follows the
// jobs an earlier one submitted, including one whose Slurm id was never
// recorded (found by name and comment), and reports a job Slurm never had
// as lost; nothing is submitted twice.
func TestSlurmReattach(t *testing.T) {
	slurmtest.Require(t)
	dir := t.TempDir()
	first, err := NewSlurm(SlurmConfig{DataDir: dir, Partition: "fedsched", Accounts: testAccounts})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b, never := testJobID(t), testJobID(t), testJobID(t)
	for _, id := range []string{a, b} {
		if err := first.Start(ctx, Spec{JobID: id, Argv: []string{"sh", "-c", "sleep 2; exit 7"}}); err != nil {
			t.Fatal(err)
		}
	}
	// b's record of its Slurm id was lost (the node died between sbatch and
	// writing it); never's spec was written but sbatch never ran.
	if err := os.Remove(filepath.Join(first.JobDir(b), slurmFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(first.JobDir(never), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(first.JobDir(never), specFile), jobSpecFile{JobID: never, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}

	s, stop := newTestSlurm(t, dir)
	defer stop()
	for _, id := range []string{a, b, never} {
		if err := s.Reattach(id); err != nil {
			t.Fatal(err)
		}
		if err := s.Reattach(id); err != nil {
			t.Fatalf("second Reattach: %v", err)
		}
	}
	if err := s.Reattach("no-such-job"); err == nil {
		t.Error("Reattach of an unknown job succeeded")
	}
	// The node asks to start a job it had started (it died before storing
	// that): refused, so it re-attaches instead.
	if err := s.Start(ctx, Spec{JobID: b, Argv: []string{"true"}}); err == nil {
		t.Error("Start of a submitted job succeeded")
	}
	got := map[string]Exit{}
	for range 3 {
		e := waitSlurmExit(t, s, 30*time.Second)
		got[e.JobID] = e
	}
	for _, id := range []string{a, b} {
		if e := got[id]; e.ExitCode != 7 || e.Lost {
			t.Errorf("re-attached job %s: %+v, want exit 7", id, e)
		}
		if ids := slurmJobsNamed(t, id); len(ids) != 1 {
			t.Errorf("job %s submitted %d times to Slurm", id, len(ids))
		}
	}
	if e := got[never]; !e.Lost || !strings.Contains(e.Detail, "no job named") {
		t.Errorf("never-submitted job: %+v, want lost with a reason", e)
	}
}

func TestSlurmCapacityFollowsDrain(t *testing.T) {
	slurmtest.Require(t)
	s, err := NewSlurm(SlurmConfig{DataDir: t.TempDir(), Accounts: testAccounts})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if p, err := s.Partition(ctx); err != nil || p != "fedsched" {
		t.Fatalf("default partition %q, %v; want fedsched", p, err)
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total, usable, err := s.CPUs(ctx)
	if err != nil || total == 0 || usable != total {
		t.Fatalf("CPUs = %d, %d, %v; want all usable", total, usable, err)
	}
	last := nodes[len(nodes)-1]
	drain := exec.Command("scontrol", "update", "NodeName="+last.Name, "State=DRAIN", "Reason=fedsched-test")
	if out, err := drain.CombinedOutput(); err != nil {
		t.Fatalf("drain: %v %s", err, out)
	}
	defer exec.Command("scontrol", "update", "NodeName="+last.Name, "State=RESUME").Run()
	if _, u, err := s.CPUs(ctx); err != nil || u != total-last.CPUs {
		t.Fatalf("usable CPUs with %s drained = %d, %v; want %d", last.Name, u, err, total-last.CPUs)
	}
	if out, err := exec.Command("scontrol", "update", "NodeName="+last.Name, "State=RESUME").CombinedOutput(); err != nil {
		t.Fatalf("resume: %v %s", err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, u, err := s.CPUs(ctx)
		if err == nil && u == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usable CPUs after resume = %d, %v; want %d", u, err, total)
		}
	}
}

// TestSlurmRunsAsTheJobsUser: from a root node, a job runs in Slurm as its
// user (sbatch --uid/--gid); a user without an account here cannot start.
func TestSlurmRunsAsTheJobsUser(t *testing.T) {
	slurmtest.Require(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the node must run as root to submit for another user")
	}
	s, stop := newTestSlurm(t, t.TempDir())
	defer stop()
	// t.TempDir's parent is private to root: the job's user could not
	// reach it.
	out, err := os.MkdirTemp("", "fedsched-slurm-user")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(out)
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	id := testJobID(t)
	path := filepath.Join(out, "id.txt")
	if err := s.Start(context.Background(), Spec{JobID: id, User: "nobody", Workdir: out, Stdout: path, Stderr: path,
		Argv: []string{"id", "-un"}}); err != nil {
		t.Fatal(err)
	}
	if e := waitSlurmExit(t, s, 30*time.Second); e.ExitCode != 0 {
		t.Fatalf("exit %+v", e)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "nobody\n" {
		t.Errorf("the job ran as %q (%v), want nobody", b, err)
	}
	err = s.Start(context.Background(), Spec{JobID: testJobID(t), User: "no-such-user-here", Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "no account") {
		t.Errorf("start for an unknown user: %v, want an error saying it has no account", err)
	}
}

// TestSlurmRefusesImpossibleRequests: with EnforcePartLimits=ALL, sbatch
// refuses what the partition can never run, and the start fails at once
// with Slurm's message (rather than a job pending for ever).
func TestSlurmRefusesImpossibleRequests(t *testing.T) {
	slurmtest.Require(t)
	s, err := NewSlurm(SlurmConfig{DataDir: t.TempDir(), Partition: "fedsched", Accounts: testAccounts})
	if err != nil {
		t.Fatal(err)
	}
	id := testJobID(t)
	err = s.Start(context.Background(), Spec{JobID: id, Procs: 100000, Argv: []string{"true"}})
	if !errors.Is(err, ErrStartFailed) || !strings.Contains(err.Error(), "sbatch") {
		t.Fatalf("start of a job wider than the partition: %v, want ErrStartFailed with sbatch's message", err)
	}
	if ids := slurmJobsNamed(t, id); len(ids) != 0 {
		t.Errorf("a refused job is in Slurm: %v", ids)
	}
}
