package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// The SIGKILL tests: `fedsched node` runs as a child process (this test
// binary as fedsched, see TestMain) while clients submit, cancel and
// reserve; it is killed with SIGKILL at random moments (during recovery,
// too) and restarted on the same data directory, and after every restart
// the tests check what the node acknowledged against what it has.
// scripts/crash-soak.sh runs them with many kills.
var (
	crashKills = flag.Int("crash.kills", 50, "SIGKILL rounds of each TestSIGKILL test")
	crashSeed  = flag.Uint64("crash.seed", 0, "seed of the SIGKILL tests' randomness; 0: from the clock (the seed is logged)")
)

// TestSIGKILLSimulated kills a node with the simulated executor. Jobs that
// run when the node dies die with it (the simulated executor has no
// processes): those may end FAILED, lost on restart; nothing else may.
func TestSIGKILLSimulated(t *testing.T) {
	runKillRounds(t, "simulated")
}

// TestSIGKILLProcess kills a node with the process executor: its jobs are
// real processes under supervisors that outlive the node. Each job appends
// its id to a marker file named by its request: no job runs twice, none is
// lost, every COMPLETED job ran.
func TestSIGKILLProcess(t *testing.T) {
	runKillRounds(t, "process")
}

// ledger is what the clients were told, by request key.
type ledger struct {
	mu sync.Mutex
	// submits: key -> job id acknowledged ("" while unacknowledged).
	submits map[string]string
	// reserves: key (the reservation's name) -> acknowledged.
	reserves map[string]bool
	// cancels: job ids whose cancellation was acknowledged.
	cancels map[string]bool
	// acked counts acknowledged requests.
	acked int
}

// crashRun is one test's node, data and clients.
type crashRun struct {
	t        *testing.T
	executor string
	dir      string
	markers  string
	logPath  string
	rng      *rand.Rand
	seed     uint64
	led      ledger
	// current is the node last started (killed when the test ends).
	current *nodeProc
	// extra are more flags for the node; env, more environment for it
	// (and its supervisors).
	extra, env []string
	// seen is every job as the last check saw it.
	seen map[string]*fedschedv1.Job
	// counts for the summary
	kills, lost, duplicated int
}

func runKillRounds(t *testing.T, executor string) {
	if testing.Short() {
		t.Skip("SIGKILL rounds take a while")
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun: go test ./cmd/fedsched -run %s -args -crash.seed %d -crash.kills %d)", seed, t.Name(), seed, *crashKills)
	dir := t.TempDir()
	r := &crashRun{t: t, executor: executor, dir: filepath.Join(dir, "data"), markers: filepath.Join(dir, "markers"),
		logPath: filepath.Join(dir, "node.log"), rng: rand.New(rand.NewPCG(seed, 0x5eed)), seed: seed,
		led: ledger{submits: map[string]string{}, reserves: map[string]bool{}, cancels: map[string]bool{}}, seen: map[string]*fedschedv1.Job{}}
	if err := os.MkdirAll(r.markers, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.current != nil {
			r.current.kill()
		}
	})
	defer func() {
		if t.Failed() {
			if b, err := os.ReadFile(r.logPath); err == nil {
				lines := strings.Split(string(b), "\n")
				t.Logf("last lines of the node's log:\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
			}
		}
	}()
	for round := range *crashKills {
		n := r.startNode()
		if r.rng.IntN(10) == 0 {
			// Kill it while it recovers, before it serves.
			time.Sleep(time.Duration(r.rng.IntN(30)) * time.Millisecond)
			n.kill()
			r.kills++
			continue
		}
		addr := n.waitReady()
		if addr == "" {
			n.kill()
			t.Fatalf("round %d: the node did not become ready", round)
		}
		c := dial(t, addr)
		r.check(c, round)
		if t.Failed() {
			n.kill()
			return
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for client := range 4 {
			wg.Add(1)
			rng := rand.New(rand.NewPCG(seed, uint64(round*16+client+1)))
			go func() { defer wg.Done(); r.client(ctx, c, rng, fmt.Sprintf("r%d-c%d", round, client)) }()
		}
		time.Sleep(time.Duration(20+r.rng.IntN(300)) * time.Millisecond)
		n.kill()
		r.kills++
		stop()
		wg.Wait()
		c.conn.Close()
	}
	// The last start: every job ends, then the final check.
	n := r.startNode()
	defer n.kill()
	addr := n.waitReady()
	if addr == "" {
		t.Fatal("the node did not become ready after the last kill")
	}
	c := dial(t, addr)
	defer c.conn.Close()
	r.check(c, *crashKills)
	r.cancelAll(c)
	r.waitAllEnded(c)
	r.check(c, *crashKills+1)
	if executor == "process" {
		r.checkMarkers()
	}
	r.led.mu.Lock()
	acked := r.led.acked
	r.led.mu.Unlock()
	// scripts/crash-soak.sh reads this line.
	t.Logf("SUMMARY executor=%s kills=%d acknowledged=%d jobs=%d lost=%d duplicated=%d seed=%d",
		executor, r.kills, acked, len(r.seen), r.lost, r.duplicated, seed)
}

// nodeProc is one fedsched node child process.
type nodeProc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{} // closed when its stderr is read to the end
	// exited is closed once the process is reaped.
	exited chan struct{}
}

func (r *crashRun) startNode() *nodeProc {
	r.t.Helper()
	args := []string{"node", "--site", "k", "--data", r.dir, "--listen", "127.0.0.1:0", "--procs", "8",
		"--executor", r.executor, "--kill-grace", "1s", "--insecure"}
	if os.Getuid() == 0 && r.executor != "simulated" {
		// The jobs' user "crash" has no account: run them as root, with
		// the test's consent (docs/security.md).
		args = append(args, "--service-account", "root", "--allow-root-jobs")
	}
	args = append(args, r.extra...)
	cmd := exec.Command(os.Args[0], args...)
	// The supervisors inherit the environment: they are this binary too.
	cmd.Env = append(os.Environ(), "FEDSCHED_TEST_RUN_MAIN=1", "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	cmd.Env = append(cmd.Env, r.env...)
	// Should this test binary die (a timeout), the node dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	log, err := os.OpenFile(r.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	n := &nodeProc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{}), exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(n.exited)
		// Pdeathsig follows the thread that started the child: keep it
		// until the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			close(n.done)
			started <- err
			return
		}
		started <- nil
		<-n.done   // all of stderr read
		cmd.Wait() //nolint:errcheck // killed
	}()
	go func() {
		<-n.exited
		log.Close()
	}()
	if err := <-started; err != nil {
		r.t.Fatal(err)
	}
	r.current = n
	go func() {
		defer close(n.done)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			select {
			case n.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, pipe) //nolint:errcheck // draining
	}()
	return n
}

var listenRE = regexp.MustCompile(`listen=(\S+)`)

// waitReady returns the node's API address once it says "node ready", or
// "" if it exits or takes more than 30 s.
func (n *nodeProc) waitReady() string {
	addr := ""
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l := <-n.lines:
			if m := listenRE.FindStringSubmatch(l); m != nil && strings.Contains(l, "node starting") {
				addr = m[1]
			}
			if strings.Contains(l, "node ready") {
				return addr
			}
		case <-n.done:
			return ""
		case <-timeout:
			return ""
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (n *nodeProc) kill() {
	n.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // may have exited
	<-n.exited
}

type killClient struct {
	conn *grpc.ClientConn
	fedschedv1.SiteServiceClient
}

func dial(t *testing.T, addr string) killClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return killClient{conn, fedschedv1.NewSiteServiceClient(conn)}
}

// client submits, cancels and reserves until ctx ends (or the node dies).
func (r *crashRun) client(ctx context.Context, c killClient, rng *rand.Rand, name string) {
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s-%d", name, i)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		switch x := rng.IntN(10); {
		case x < 6:
			r.submit(cctx, c, rng, key)
		case x < 8:
			r.cancel(cctx, c, rng)
		default:
			r.reserve(cctx, c, rng, key)
		}
		cancel()
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
}

// jobSpec is the job of request key: the process executor's appends its id
// to a marker file named after key.
func (r *crashRun) jobSpec(rng *rand.Rand, key string) *fedschedv1.JobSpec {
	s := &fedschedv1.JobSpec{Procs: int32(1 + rng.IntN(2)), EstimateSeconds: int64(1 + rng.IntN(2)), User: "crash", App: "crash",
		Env: map[string]string{"CRASH_KEY": key}}
	if r.executor == "simulated" {
		s.SimRuntimeSeconds = 1
	} else {
		s.Env["MARKERS"] = r.markers
		s.Command = []string{"sh", "-c", fmt.Sprintf(`echo "$FEDSCHED_JOB_ID" >> "$MARKERS/$CRASH_KEY"; sleep 0.%d`, 1+rng.IntN(5))}
	}
	return s
}

func (r *crashRun) submit(ctx context.Context, c killClient, rng *rand.Rand, key string) {
	spec := r.jobSpec(rng, key)
	r.led.mu.Lock()
	r.led.submits[key] = ""
	r.led.mu.Unlock()
	resp, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: key, Spec: spec})
	if err != nil {
		return
	}
	r.led.mu.Lock()
	r.led.submits[key] = resp.GetJob().GetId()
	r.led.acked++
	r.led.mu.Unlock()
}

func (r *crashRun) cancel(ctx context.Context, c killClient, rng *rand.Rand) {
	r.led.mu.Lock()
	var ids []string
	for _, id := range r.led.submits {
		if id != "" {
			ids = append(ids, id)
		}
	}
	r.led.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	id := ids[rng.IntN(len(ids))]
	resp, err := c.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id})
	if err != nil || resp.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
		// Refused (the job had ended) or not acknowledged.
		return
	}
	r.led.mu.Lock()
	r.led.cancels[id] = true
	r.led.acked++
	r.led.mu.Unlock()
}

func (r *crashRun) reserve(ctx context.Context, c killClient, rng *rand.Rand, key string) {
	start := time.Now().Add(time.Hour + time.Duration(rng.IntN(3600))*time.Second).Truncate(time.Second)
	r.led.mu.Lock()
	r.led.reserves[key] = false
	r.led.mu.Unlock()
	_, err := c.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: key, Procs: 1,
		Start: timestamppb.New(start), End: timestamppb.New(start.Add(10 * time.Minute))})
	if err != nil {
		return
	}
	r.led.mu.Lock()
	r.led.reserves[key] = true
	r.led.acked++
	r.led.mu.Unlock()
}

// listJobs returns every job of the site.
func listJobs(t *testing.T, c killClient) []*fedschedv1.Job {
	t.Helper()
	var all []*fedschedv1.Job
	token := ""
	for {
		resp, err := c.ListJobs(context.Background(), &fedschedv1.ListJobsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		all = append(all, resp.GetJobs()...)
		if token = resp.GetNextPageToken(); token == "" {
			return all
		}
	}
}

func terminalState(s fedschedv1.JobState) bool {
	switch s {
	case fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_DELEGATED:
		return false
	}
	return true
}

// check compares the restarted node's jobs and reservations with the
// ledger and with what the last check saw.
func (r *crashRun) check(c killClient, round int) {
	t := r.t
	t.Helper()
	jobs := listJobs(t, c)
	byKey := map[string][]*fedschedv1.Job{}
	for _, j := range jobs {
		key := j.GetSpec().GetEnv()["CRASH_KEY"]
		byKey[key] = append(byKey[key], j)
		runs := 0
		for _, h := range j.GetHistory() {
			if h.GetTo() == fedschedv1.JobState_JOB_STATE_RUNNING {
				runs++
			}
		}
		if runs > 1 {
			r.duplicated++
			t.Errorf("round %d: job %s went to RUNNING %d times: %v", round, j.GetId(), runs, j.GetHistory())
		}
		if j.GetStartTime() != nil && j.GetEndTime() != nil && j.GetEndTime().AsTime().Before(j.GetStartTime().AsTime()) {
			t.Errorf("round %d: job %s ended at %v, before it started at %v", round, j.GetId(), j.GetEndTime().AsTime(), j.GetStartTime().AsTime())
		}
		if r.executor == "process" && j.GetReason() == fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART {
			r.lost++
			t.Errorf("round %d: job %s lost: %s", round, j.GetId(), j.GetMessage())
		}
		if prev := r.seen[j.GetId()]; prev != nil {
			switch {
			// (A job cancelled while it runs is CANCELLED at once and
			// gets its end time when its process has gone.)
			case terminalState(prev.GetState()) && (j.GetState() != prev.GetState() ||
				prev.GetEndTime() != nil && !j.GetEndTime().AsTime().Equal(prev.GetEndTime().AsTime())):
				t.Errorf("round %d: job %s was %v (ended %v), now %v (ended %v)", round, j.GetId(), prev.GetState(), prev.GetEndTime().AsTime(), j.GetState(), j.GetEndTime().AsTime())
			case prev.GetStartTime() != nil && !j.GetStartTime().AsTime().Equal(prev.GetStartTime().AsTime()):
				t.Errorf("round %d: job %s started at %v, now at %v", round, j.GetId(), prev.GetStartTime().AsTime(), j.GetStartTime().AsTime())
			}
		}
		r.seen[j.GetId()] = j
	}
	r.led.mu.Lock()
	defer r.led.mu.Unlock()
	for key, id := range r.led.submits {
		got := byKey[key]
		switch {
		case len(got) > 1:
			r.duplicated++
			t.Errorf("round %d: request %s made %d jobs", round, key, len(got))
		case id != "" && len(got) == 0:
			r.lost++
			t.Errorf("round %d: acknowledged job %s (request %s) is gone", round, id, key)
		case id != "" && got[0].GetId() != id:
			t.Errorf("round %d: request %s was acknowledged as %s but is %s", round, key, id, got[0].GetId())
		}
	}
	for id := range r.led.cancels {
		if j := r.seen[id]; j == nil || j.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
			r.lost++
			t.Errorf("round %d: acknowledged cancellation of %s is gone: %v", round, id, j.GetState())
		}
	}
	resp, err := c.ListReservations(context.Background(), &fedschedv1.ListReservationsRequest{})
	if err != nil {
		t.Fatalf("list reservations: %v", err)
	}
	names := map[string]int{}
	for _, res := range resp.GetReservations() {
		names[res.GetName()]++
	}
	for key, acked := range r.led.reserves {
		switch n := names[key]; {
		case n > 1:
			r.duplicated++
			t.Errorf("round %d: reservation request %s made %d reservations", round, key, n)
		case acked && n == 0:
			r.lost++
			t.Errorf("round %d: acknowledged reservation %s is gone", round, key)
		}
	}
}

// cancelAll cancels every job that has not ended, so that the last wait
// is short whatever the backlog.
func (r *crashRun) cancelAll(c killClient) {
	for _, j := range listJobs(r.t, c) {
		if terminalState(j.GetState()) {
			continue
		}
		resp, err := c.CancelJob(context.Background(), &fedschedv1.CancelJobRequest{JobId: j.GetId()})
		if err != nil {
			continue // ended meanwhile
		}
		if resp.GetJob().GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED {
			r.led.mu.Lock()
			r.led.cancels[j.GetId()] = true
			r.led.acked++
			r.led.mu.Unlock()
		}
	}
}

// waitAllEnded waits until every job has ended (and every job process).
func (r *crashRun) waitAllEnded(c killClient) {
	deadline := time.Now().Add(90 * time.Second)
	for {
		live := 0
		for _, j := range listJobs(r.t, c) {
			if !terminalState(j.GetState()) {
				live++
			}
		}
		if live == 0 && (r.executor != "process" || r.noSupervisors()) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d jobs still live", live)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noSupervisors reports whether every job's supervisor has written its
// exit record (the jobs of cancelled, never-started jobs have none).
func (r *crashRun) noSupervisors() bool {
	claims, _ := filepath.Glob(filepath.Join(r.dir, "jobs", "*", "*", "claim"))
	for _, c := range claims {
		if _, err := os.Stat(filepath.Join(filepath.Dir(c), "exit.json")); err != nil {
			return false
		}
	}
	return true
}

// checkMarkers checks that every job that ran, ran once, and that the
// node's account matches: a job with a start time ran (or was killed before
// its shell wrote), one that COMPLETED certainly ran, one never started
// never ran.
func (r *crashRun) checkMarkers() {
	t := r.t
	ents, err := os.ReadDir(r.markers)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]string{}
	// opened: the job's shell created its marker and was killed (a cancel)
	// before it wrote: the job started, as whom is not known.
	opened := map[string]bool{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(r.markers, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(string(b))
		if len(lines) == 0 {
			opened[e.Name()] = true
			continue
		}
		if len(lines) != 1 {
			r.duplicated++
			t.Errorf("request %s ran %d times: %v", e.Name(), len(lines), lines)
		}
		ran[e.Name()] = lines[0]
	}
	for _, j := range r.seen {
		key := j.GetSpec().GetEnv()["CRASH_KEY"]
		id, ok := ran[key]
		switch {
		case ok && id != j.GetId():
			t.Errorf("request %s ran as %s, but the node's job is %s", key, id, j.GetId())
		case (ok || opened[key]) && j.GetStartTime() == nil:
			t.Errorf("job %s ran but the node says it never started: %v %s", j.GetId(), j.GetState(), j.GetMessage())
		case opened[key] && j.GetState() == fedschedv1.JobState_JOB_STATE_COMPLETED:
			t.Errorf("job %s COMPLETED but was killed before its command wrote", j.GetId())
		case !ok && j.GetState() == fedschedv1.JobState_JOB_STATE_COMPLETED:
			t.Errorf("job %s COMPLETED but never ran", j.GetId())
		}
	}
}
