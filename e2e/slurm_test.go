package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/executor/slurmtest"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// The tests in this file run real `fedsched node` processes in front of
// the local Slurm that scripts/slurm-up.sh starts (.ci/run does), and
// crash them with SIGKILL. They skip, saying so, where there is no Slurm.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// fedschedBinary builds cmd/fedsched once per test process.
func fedschedBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fedsched-e2e-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "fedsched")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/fedsched").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// procNode is a `fedsched node` process.
type procNode struct {
	t    *testing.T
	args []string
	addr string
	log  string
	cmd  *exec.Cmd
	conn *grpc.ClientConn
	cl   fedschedv1.SiteServiceClient
}

// startProcNode runs `fedsched node --listen <free port> args...` and waits
// until it serves.
func startProcNode(t *testing.T, args ...string) *procNode {
	t.Helper()
	n := &procNode{t: t, addr: freePort(t), log: filepath.Join(t.TempDir(), "node.log")}
	// Plaintext on loopback, and jobs as root: the test's jobs are root's.
	n.args = append([]string{"node", "--listen", n.addr, "--insecure", "--allow-root-jobs"}, args...)
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	n.conn, n.cl = conn, fedschedv1.NewSiteServiceClient(conn)
	t.Cleanup(func() {
		n.stop(syscall.SIGTERM)
		conn.Close()
		if t.Failed() {
			b, _ := os.ReadFile(n.log)
			t.Logf("log of fedsched %s:\n%s", strings.Join(n.args, " "), b)
		}
	})
	n.start()
	return n
}

func (n *procNode) start() {
	t := n.t
	t.Helper()
	logf, err := os.OpenFile(n.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	n.cmd = exec.Command(fedschedBinary(t), n.args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := n.cl.GetSite(ctx, &fedschedv1.GetSiteRequest{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(n.log)
			t.Fatalf("node did not serve within 20 s: %v\n%s", err, b)
		}
	}
}

// stop sends sig and waits for the process.
func (n *procNode) stop(sig syscall.Signal) {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	n.cmd.Process.Signal(sig) //nolint:errcheck // it may have exited
	n.cmd.Wait()              //nolint:errcheck // killed on purpose
	n.cmd = nil
}

func (n *procNode) site() *fedschedv1.Site {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := n.cl.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	if err != nil {
		n.t.Fatal(err)
	}
	return r.GetSite()
}

func (n *procNode) submit(spec *fedschedv1.JobSpec) *fedschedv1.Job {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := n.cl.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
	if err != nil {
		n.t.Fatal(err)
	}
	return r.GetJob()
}

func (n *procNode) job(id string) *fedschedv1.Job {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := n.cl.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: id})
	if err != nil {
		n.t.Fatal(err)
	}
	return r.GetJob()
}

func (n *procNode) waitJob(id, what string, within time.Duration, ok func(*fedschedv1.Job) bool) *fedschedv1.Job {
	n.t.Helper()
	deadline := time.Now().Add(within)
	for {
		j := n.job(id)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("job %s not %s within %v: %s", id, what, within, brief(j))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func cmdSpec(procs int32, estimate int64, argv ...string) *fedschedv1.JobSpec {
	return &fedschedv1.JobSpec{Procs: procs, EstimateSeconds: estimate, User: "root", Command: argv}
}

// slurmNamed lists the Slurm jobs named name: "ID STATE" each.
func slurmNamed(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "-t", "all", "-n", name, "-o", "%i %T").Output()
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestSlurmSiteSurvivesSIGKILL: a site in front of Slurm is killed with
// SIGKILL while its jobs run in Slurm; restarted, it re-attaches every one
// of them (no second submission) and records their real ends.
func TestSlurmSiteSurvivesSIGKILL(t *testing.T) {
	slurmtest.Require(t)
	site := fmt.Sprintf("sk%d", os.Getpid())
	n := startProcNode(t, "--site", site, "--data", t.TempDir(), "--executor", "slurm", "--slurm-poll-interval", "200ms")
	if s := n.site(); s.GetExecutor() != "slurm" || s.GetProcs() < 4 {
		t.Fatalf("site %+v: want the slurm executor with the partition's CPUs", s)
	}
	var ids []string
	for i := range 3 {
		j := n.submit(cmdSpec(2, 60, "sh", "-c", fmt.Sprintf("sleep 4; exit %d", i)))
		ids = append(ids, j.GetId())
	}
	for _, id := range ids {
		j := n.waitJob(id, "running", 20*time.Second, inState(fedschedv1.JobState_JOB_STATE_RUNNING))
		got := slurmNamed(t, id)
		if len(got) != 1 || !strings.HasSuffix(got[0], "RUNNING") && !strings.HasSuffix(got[0], "PENDING") {
			t.Fatalf("squeue -n %s: %q, want one live Slurm job named after the fedsched job", id, got)
		}
		// The job's message names its Slurm job.
		if sid, _, _ := strings.Cut(got[0], " "); !strings.Contains(j.GetMessage(), "Slurm job "+sid) {
			t.Errorf("RUNNING message %q does not name Slurm job %s", j.GetMessage(), sid)
		}
	}
	n.stop(syscall.SIGKILL)
	n.start()
	for i, id := range ids {
		j := n.waitJob(id, "ended", 30*time.Second, terminal)
		if j.ExitCode == nil || j.GetExitCode() != int32(i) {
			t.Errorf("job %s after the restart: %s, want exit %d", id, brief(j), i)
		}
		if got := slurmNamed(t, id); len(got) != 1 {
			t.Errorf("job %s was submitted to Slurm %d times: %q", id, len(got), got)
		}
	}
}

// TestSlurmSiteCancelAndDrain: cancelling a job cancels its Slurm job; a
// drained Slurm node shrinks the site's plan and its return restores it.
func TestSlurmSiteCancelAndDrain(t *testing.T) {
	slurmtest.Require(t)
	n := startProcNode(t, "--site", fmt.Sprintf("dr%d", os.Getpid()), "--data", t.TempDir(), "--executor", "slurm", "--slurm-poll-interval", "200ms")
	j := n.submit(cmdSpec(1, 120, "sleep", "100"))
	n.waitJob(j.GetId(), "running", 20*time.Second, inState(fedschedv1.JobState_JOB_STATE_RUNNING))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.cl.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: j.GetId()}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := slurmNamed(t, j.GetId())
		if len(got) == 1 && strings.HasSuffix(got[0], "CANCELLED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Slurm job of cancelled %s: %q, want CANCELLED", j.GetId(), got)
		}
	}
	n.waitJob(j.GetId(), "cancelled with its end", 20*time.Second, func(j *fedschedv1.Job) bool {
		return j.GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED && j.GetEndTime() != nil
	})

	procs := n.site().GetProcs()
	waitFree := func(what string, ok func(free int32) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			free := n.site().GetFreeProcs()
			if ok(free) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("free processors %d of %d: want %s", free, procs, what)
			}
		}
	}
	// Another test may be running jobs in the partition: wait for the
	// plan to be idle before measuring.
	waitFree("all", func(f int32) bool { return f == procs })
	node := "n2"
	if out, err := exec.Command("scontrol", "update", "NodeName="+node, "State=DRAIN", "Reason=fedsched-e2e").CombinedOutput(); err != nil {
		t.Fatalf("drain: %v %s", err, out)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			exec.Command("scontrol", "update", "NodeName="+node, "State=RESUME").Run() //nolint:errcheck // checked below
		}
	}
	defer resume()
	waitFree("fewer after the drain", func(f int32) bool { return f < procs })
	resume()
	waitFree("all after the node returned", func(f int32) bool { return f == procs })
}

// TestSlurmAndProcessSitesDelegate: a two-site federation, one site in
// front of Slurm and one running processes, delegating to each other.
func TestSlurmAndProcessSitesDelegate(t *testing.T) {
	slurmtest.Require(t)
	pid := os.Getpid()
	gs, gp := freePort(t), freePort(t)
	sl := startProcNode(t, "--site", fmt.Sprintf("slurm%d", pid), "--data", t.TempDir(), "--executor", "slurm", "--procs", "4",
		"--slurm-poll-interval", "200ms", "--gossip", gs)
	pr := startProcNode(t, "--site", fmt.Sprintf("proc%d", pid), "--data", t.TempDir(), "--executor", "process", "--procs", "2",
		"--gossip", gp, "--join", gs)
	// Wait for each to see the other.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a, err1 := sl.cl.GetSite(ctx, &fedschedv1.GetSiteRequest{})
		cancel()
		_ = a
		fc := fedschedv1.NewFederationServiceClient(pr.conn)
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		m, err2 := fc.ListMembers(ctx, &fedschedv1.ListMembersRequest{})
		cancel()
		if err1 == nil && err2 == nil && len(m.GetMembers()) >= 2 {
			fc = fedschedv1.NewFederationServiceClient(sl.conn)
			ctx, cancel = context.WithTimeout(context.Background(), time.Second)
			m, err2 = fc.ListMembers(ctx, &fedschedv1.ListMembersRequest{})
			cancel()
			if err2 == nil && len(m.GetMembers()) >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the two sites did not see each other within 30 s")
		}
	}
	// Too wide for the process site: delegated to the Slurm site, where
	// Slurm runs it.
	out := t.TempDir()
	toSlurm := pr.submit(&fedschedv1.JobSpec{Procs: 4, EstimateSeconds: 30, User: "root", Workdir: out, Output: "wave-%j.out",
		Script: []byte("#!/bin/sh\n#FEDSCHED --procs 4\necho ran in slurm as $FEDSCHED_JOB_ID on $FEDSCHED_PROCS\necho oops >&2\n")})
	if toSlurm.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("4-processor job at the 2-processor site: %s, want DELEGATED", brief(toSlurm))
	}
	// The Slurm site is full for a minute; an SLA job due in 40 s goes to
	// the process site.
	fillJob := sl.submit(cmdSpec(4, 60, "sleep", "60"))
	sl.waitJob(fillJob.GetId(), "running", 20*time.Second, inState(fedschedv1.JobState_JOB_STATE_RUNNING))
	spec := cmdSpec(1, 5, "sh", "-c", "echo ran as process $FEDSCHED_JOB_ID")
	spec.Deadline = timestamppb.New(time.Now().Add(40 * time.Second))
	spec.Fee, spec.Penalty = 1, 1
	toProc := sl.submit(spec)
	if toProc.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("SLA job at the full Slurm site: %s, want DELEGATED", brief(toProc))
	}
	a := pr.waitJob(toSlurm.GetId(), "completed", 40*time.Second, inState(fedschedv1.JobState_JOB_STATE_COMPLETED))
	b := sl.waitJob(toProc.GetId(), "completed", 40*time.Second, inState(fedschedv1.JobState_JOB_STATE_COMPLETED))
	checkRoute(t, a, pr.site().GetName(), sl.site().GetName())
	checkRoute(t, b, sl.site().GetName(), pr.site().GetName())
	// Each origin reads the output of its delegated job from the peer
	// that ran it; the job knew itself by the id its user was given.
	wantA := fmt.Sprintf("ran in slurm as %s on 4\noops\n", a.GetId())
	if got := logs(t, pr, a.GetId()); got != wantA {
		t.Errorf("logs of %s at its origin: %q, want %q", a.GetId(), got, wantA)
	}
	if b, err := os.ReadFile(filepath.Join(out, "wave-"+a.GetId()+".out")); err != nil || string(b) != wantA {
		t.Errorf("--output file: %q, %v", b, err)
	}
	if got, want := logs(t, sl, b.GetId()), "ran as process "+b.GetId()+"\n"; got != want {
		t.Errorf("logs of %s at its origin: %q, want %q", b.GetId(), got, want)
	}
	// The Slurm site's Slurm job for the delegated job carries the Slurm
	// site's own id of it, which names the origin's job in its route.
	sq, err := exec.Command("squeue", "-h", "-t", "all", "-o", "%j %k").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sq), sl.site().GetName()+".") {
		t.Errorf("squeue shows no job of the Slurm site:\n%s", sq)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sl.cl.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: fillJob.GetId()}) //nolint:errcheck // cleanup
}

// logs reads a job's whole output through the site's API, following it.
func logs(t *testing.T, n *procNode, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := n.cl.GetJobOutput(ctx, &fedschedv1.GetJobOutputRequest{JobId: id, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for {
		c, err := st.Recv()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			t.Fatalf("logs %s: %v", id, err)
		}
		b.Write(c.GetData())
	}
}
