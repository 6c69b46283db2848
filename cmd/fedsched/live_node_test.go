package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// liveNode is a `fedsched node` child process.
type liveNode struct {
	cmd    *exec.Cmd
	addr   string
	client fedschedv1.SiteServiceClient
	stderr *strings.Builder
}

// startLiveNode starts `fedsched node --listen ADDR args...` as a child
// process and waits until it logs "node ready". The test stops it with
// SIGTERM (or the caller kills it).
func startLiveNode(t *testing.T, args ...string) *liveNode {
	t.Helper()
	addr := freeAddr(t)
	if !slices.Contains(args, "--tls-cert") {
		// Plaintext on loopback, the client claiming the OS user, who may
		// be root: the test's consent (docs/security.md).
		args = append(args, "--insecure")
		if i := slices.Index(args, "--executor"); i < 0 || i+1 >= len(args) || args[i+1] != "simulated" {
			args = append(args, "--allow-root-jobs") // the simulated executor refuses it: it runs nothing
		}
	}
	cmd := exec.Command(os.Args[0], append([]string{"node", "--listen", addr}, args...)...)
	cmd.Env = append(os.Environ(), "FEDSCHED_TEST_RUN_MAIN=1", "GORACE=atexit_sleep_ms=0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &liveNode{cmd: cmd, addr: addr, stderr: &strings.Builder{}}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		once := false
		for sc.Scan() {
			n.stderr.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "node ready") {
				once = true
				close(ready)
			}
		}
		if !once {
			close(ready)
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // may have exited
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }() //nolint:errcheck // stopped
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill() //nolint:errcheck // stuck
			<-done
		}
	})
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("node never ready")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	n.client = fedschedv1.NewSiteServiceClient(conn)
	return n
}

// ended polls job id until it is terminal.
func (n *liveNode) ended(t *testing.T, id string) *fedschedv1.Job {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r, err := n.client.GetJob(context.Background(), &fedschedv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetJob().GetState() {
		case fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING:
			continue
		}
		return r.GetJob()
	}
	t.Fatalf("job %s never ended", id)
	return nil
}

// TestLiveOutcomes runs real commands under the process executor: a
// non-zero exit is FAILED (the SLA MET: the user's failure), a command
// that cannot start is FAILED with its cause and exit code 127 (the SLA
// VIOLATED), and a job that exits exactly at its estimate is COMPLETED.
func TestLiveOutcomes(t *testing.T) {
	n := startLiveNode(t, "--site", "out", "--data", t.TempDir(), "--procs", "4", "--executor", "process", "--kill-grace", "1s")
	submit := func(est string, argv ...string) string {
		out := mustRun(t, append([]string{"submit", "--addr", n.addr, "--procs", "1", "--estimate", est, "--deadline", "+1h", "--fee", "1", "--penalty", "1", "--"}, argv...)...)
		f := strings.Fields(out)
		if len(f) < 2 || f[0] != "id" {
			t.Fatalf("submit printed %q", out)
		}
		return f[1]
	}
	exit3 := submit("30s", "sh", "-c", "exit 3")
	missing := submit("30s", "/nonexistent/program")
	exact := submit("1s", "sleep", "1")
	j := n.ended(t, exit3)
	if j.GetState() != fedschedv1.JobState_JOB_STATE_FAILED || j.GetReason() != fedschedv1.Reason_REASON_EXITED ||
		j.GetExitCode() != 3 || j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
		t.Errorf("exit 3: %v %v code %d sla %v %q", j.GetState(), j.GetReason(), j.GetExitCode(), j.GetSlaOutcome(), j.GetMessage())
	}
	j = n.ended(t, missing)
	if j.GetState() != fedschedv1.JobState_JOB_STATE_FAILED || j.GetReason() != fedschedv1.Reason_REASON_FAILED_START || j.ExitCode == nil ||
		j.GetExitCode() != 127 || j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED || !strings.Contains(j.GetMessage(), "/nonexistent/program") {
		t.Errorf("missing program: %v %v code %v sla %v %q", j.GetState(), j.GetReason(), j.ExitCode, j.GetSlaOutcome(), j.GetMessage())
	}
	j = n.ended(t, exact)
	if j.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED || j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
		t.Errorf("sleep 1 with a 1 s estimate: %v %v %q", j.GetState(), j.GetSlaOutcome(), j.GetMessage())
	}
}

// TestGossipOnEveryInterface: `--gossip :PORT` (the documented form) binds
// every interface, as Go's listeners read ":PORT", and the site serves.
func TestGossipOnEveryInterface(t *testing.T) {
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	// Every interface is not loopback: a federating node there needs its
	// certificates and gossip key.
	p := t.TempDir()
	mustRun(t, "tls", "ca", "create", "--dir", p)
	mustRun(t, "tls", "cert", "create", "--dir", p, "--site", "g")
	mustRun(t, "tls", "cert", "create", "--dir", p, "--operator", "ops")
	mustRun(t, "tls", "gossip-key", "--out", filepath.Join(p, "gossip.key"))
	n := startLiveNode(t, "--site", "g", "--data", t.TempDir(), "--procs", "2", "--executor", "simulated", "--gossip", ":"+port,
		"--tls-ca", filepath.Join(p, "ca.pem"), "--tls-cert", filepath.Join(p, "site-g.pem"), "--tls-key", filepath.Join(p, "site-g-key.pem"),
		"--gossip-key", filepath.Join(p, "gossip.key"))
	if !strings.Contains(n.stderr.String(), "node ready") {
		t.Fatalf("node with --gossip :%s did not start:\n%s", port, n.stderr.String())
	}
	out := mustRun(t, "peers", "--addr", n.addr, "--tls-ca", filepath.Join(p, "ca.pem"),
		"--tls-cert", filepath.Join(p, "operator-ops.pem"), "--tls-key", filepath.Join(p, "operator-ops-key.pem"))
	if !strings.Contains(out, "g") || !strings.Contains(out, "alive") {
		t.Errorf("peers: %s", out)
	}
}

// TestRestartedSeedRejoins: a seed started without --join, which another
// site joined, rejoins the federation after a SIGKILL and a restart with
// the same command line: it remembers its last members.
func TestRestartedSeedRejoins(t *testing.T) {
	seedGossip, peerGossip := freeAddr(t), freeAddr(t)
	seedDir := t.TempDir()
	seedArgs := []string{"--site", "seed", "--data", seedDir, "--procs", "2", "--executor", "simulated", "--gossip", seedGossip}
	seed := startLiveNode(t, seedArgs...)
	peer := startLiveNode(t, "--site", "peer", "--data", t.TempDir(), "--procs", "2", "--executor", "simulated", "--gossip", peerGossip, "--join", seedGossip)
	// A third site: the others are never alone, so they do not go back to
	// their seed by themselves.
	third := startLiveNode(t, "--site", "third", "--data", t.TempDir(), "--procs", "2", "--executor", "simulated", "--gossip", freeAddr(t), "--join", seedGossip)
	sees := func(n *liveNode, site string) bool {
		out, err := run(t, "peers", "--addr", n.addr)
		if err != nil {
			return false
		}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == site && f[1] == "alive" {
				return true
			}
		}
		return false
	}
	waitSees := func(n *liveNode, site string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !sees(n, site); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never sees %s alive", n.addr, site)
			}
		}
	}
	waitSees(seed, "peer")
	waitSees(seed, "third")
	waitSees(peer, "third")
	time.Sleep(3 * time.Second) // the seed stores its members every 2 s
	// Stopped (it leaves the federation) and restarted as it was started.
	if err := seed.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	seed.cmd.Wait() //nolint:errcheck // stopped
	seed = startLiveNode(t, seedArgs...)
	waitSees(seed, "peer")
	waitSees(peer, "seed")
	waitSees(third, "seed")
}
