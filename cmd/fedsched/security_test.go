package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSocketJobRunsAsItsUser: a non-root user submits a job on the node's
// Unix socket, with no certificate and no --user; the node (running as
// root) knows the user from the kernel and runs the job as that user: the
// job's `id -u` prints the user's uid. Root's own job is refused without
// --allow-root-jobs.
func TestSocketJobRunsAsItsUser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the local socket identifies callers with SO_PEERCRED, which needs Linux")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root: the test creates a user and the node switches jobs to their users' accounts only when it runs as root; run the tests as root (CI does) to exercise it")
	}
	u := testUser(t, "fedsched-test")
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	// The job's user runs the CLI: the binary and the socket must be
	// reachable for it.
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "fedsched")
	copyFile(t, os.Args[0], bin, 0o755)
	data := filepath.Join(dir, "data")
	sock := filepath.Join(data, "fedsched.sock")

	node := exec.Command(bin, "node", "--site", "u", "--data", data, "--procs", "2")
	node.Env = append(os.Environ(), "FEDSCHED_TEST_RUN_MAIN=1")
	var nodeLog strings.Builder
	node.Stderr = &nodeLog
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node.Process.Signal(syscall.SIGTERM) //nolint:errcheck // may have exited
		node.Wait()                          //nolint:errcheck // stopped
		if t.Failed() {
			t.Logf("node log:\n%s", nodeLog.String())
		}
	})
	cli := func(cred *syscall.Credential, args ...string) (string, error) {
		c := exec.Command(bin, append([]string{args[0], "--socket", sock}, args[1:]...)...)
		c.Env = append(os.Environ(), "FEDSCHED_TEST_RUN_MAIN=1")
		c.Dir = dir
		if cred != nil {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		out, err := c.CombinedOutput()
		return string(out), err
	}
	asUser := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := cli(asUser, "status"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the node's socket never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The job prints its uid, and anything of the node's it can read: the
	// store, the listing of the data and jobs directories (other jobs'
	// names), its own spec.json (which the node keeps, with the
	// environment, 0600).
	probe := fmt.Sprintf(`id -u
cat %[1]s/fedsched.db >/dev/null 2>&1 && echo read-the-store
ls %[1]s >/dev/null 2>&1 && echo listed-the-data-directory
ls %[1]s/jobs/* >/dev/null 2>&1 && echo listed-the-job-directories
cat ../spec.json >/dev/null 2>&1 && echo read-spec.json
true`, data)
	out, err := cli(asUser, "submit", "--procs", "1", "--estimate", "1m", "--json", "--", "sh", "-c", probe)
	if err != nil {
		t.Fatalf("submit as %s: %v\n%s", u.Username, err, out)
	}
	var job struct {
		ID, User, State string
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatalf("submit output: %v\n%s", err, out)
	}
	if job.User != u.Username {
		t.Errorf("job user %q, want %q (the socket's caller)", job.User, u.Username)
	}
	for job.State != "COMPLETED" {
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", job.ID, job.State)
		}
		time.Sleep(100 * time.Millisecond)
		out, err := cli(asUser, "status", job.ID, "--json")
		if err != nil {
			t.Fatalf("status as %s: %v\n%s", u.Username, err, out)
		}
		if err := json.Unmarshal([]byte(out), &job); err != nil {
			t.Fatalf("status output: %v\n%s", err, out)
		}
		if job.State == "FAILED" || job.State == "REJECTED" {
			t.Fatalf("job %s: %s\n%s", job.ID, job.State, out)
		}
	}
	outs, _ := filepath.Glob(filepath.Join(data, "jobs", "*", job.ID, "stdout")) // jobs/<store epoch>/<id>
	if len(outs) != 1 {
		t.Fatalf("the job's stdout: found %v", outs)
	}
	stdout, err := os.ReadFile(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(stdout)); got != u.Uid {
		t.Errorf("the job printed %q, want only its uid %s (user %s): it must not read the node's files", got, u.Uid, u.Username)
	}

	// Root on the socket is an operator, but its job would run as root.
	out, err = cli(nil, "submit", "--procs", "1", "--estimate", "1m", "--", "true")
	if err == nil || !strings.HasPrefix(out, "FailedPrecondition") || !strings.Contains(out, "allow-root-jobs") {
		t.Errorf("root's job: %v\n%s\nwant FailedPrecondition naming --allow-root-jobs", err, out)
	}
}

// testUser returns the local user name, creating it (and removing it at
// the end) if it does not exist.
func testUser(t *testing.T, name string) *user.User {
	t.Helper()
	if u, err := user.Lookup(name); err == nil {
		return u
	}
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create the test user %s with useradd: %v: %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() }) //nolint:errcheck // best effort
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Fatal(err)
	}
}
