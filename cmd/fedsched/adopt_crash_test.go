package main

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestSIGKILLAfterStartAdopts: `fedsched node` (process executor, FCFS)
// is killed with SIGKILL after its executor started two jobs and before it
// stored that. The state such a crash leaves is made exactly: the node is
// killed while the jobs wait for their release, and the executor is handed
// them on the node's data directory, as the node would have. One job's kill
// time passes while the node is down (its supervisor kills it); the other
// still runs at the restart. The restarted node adopts both as they really
// ran: each started when the node handed it over (its kill time less its
// slot), the first ended when its
// supervisor killed it having had its whole estimate (SLA met, not
// "overbooked"), the second holds its processors until its supervisor's
// kill, not for a fresh estimate from the restart.
func TestSIGKILLAfterStartAdopts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for a few seconds")
	}
	dir := t.TempDir()
	r := &crashRun{t: t, executor: "process", dir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "node.log"),
		rng: rand.New(rand.NewPCG(1, 1)), extra: []string{"--policy", "fcfs"}}
	t.Cleanup(func() {
		if r.current != nil {
			r.current.kill()
		}
	})
	n := r.startNode()
	addr := n.waitReady()
	if addr == "" {
		t.Fatal("the node did not become ready")
	}
	c := dial(t, addr)
	ctx := context.Background()
	submit := func(est int64) string {
		resp, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: est, User: "crash",
			Command: []string{"sleep", "600"}, Release: timestamppb.New(time.Now().Add(time.Hour)),
			Deadline: timestamppb.New(time.Now().Add(2 * time.Hour)), Fee: 10, Penalty: 5}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetJob().GetId()
	}
	short, long := submit(2), submit(600)
	n.kill()
	c.conn.Close()

	// What the node's start (node.go) hands the executor, then dies.
	st, err := store.OpenWAL(r.dir, &store.Options{ReadOnly: true, LockTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := node.StoreEpoch(ctx, st, false)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	acc := executor.Accounts{}
	if os.Getuid() == 0 {
		acc = executor.Accounts{AllowRoot: true, ServiceAccount: "root"}
	}
	ex, err := executor.NewProcess(executor.ProcessConfig{DataDir: r.dir, Epoch: epoch, SupervisorCommand: []string{os.Args[0], "supervise"},
		SupervisorEnv: []string{"FEDSCHED_TEST_RUN_MAIN=1"}, KillGrace: time.Second, Accounts: acc})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Truncate(time.Second)
	// The kill comes one second after the slot's last second (start).
	shortKill, longKill := t0.Add(3*time.Second), t0.Add(601*time.Second)
	for id, kill := range map[string]time.Time{short: shortKill, long: longKill} {
		if err := ex.Start(ctx, executor.Spec{JobID: id, Argv: []string{"sleep", "600"}, Deadline: kill, Procs: 1, User: "crash"}); err != nil {
			t.Fatal(err)
		}
	}
	// The short job's supervisor kills it while the node is down.
	jobDir := ex.JobDir(short)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(jobDir, "exit.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the short job's supervisor did not kill it at its deadline")
		}
	}
	time.Sleep(1500 * time.Millisecond) // the restart comes clearly later

	n = r.startNode()
	addr = n.waitReady()
	if addr == "" {
		t.Fatal("the node did not become ready after the restart")
	}
	c = dial(t, addr)
	defer c.conn.Close()
	get := func(id string) *fedschedv1.Job {
		resp, err := c.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetJob()
	}
	var s *fedschedv1.Job
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s = get(short); terminalState(s.GetState()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the short job never ended: %v %s", s.GetState(), s.GetMessage())
		}
	}
	near := func(got *timestamppb.Timestamp, want time.Time) bool {
		d := got.AsTime().Sub(want)
		return got != nil && d >= -time.Second && d <= 2*time.Second
	}
	if s.GetState() != fedschedv1.JobState_JOB_STATE_KILLED || s.GetReason() != fedschedv1.Reason_REASON_KILLED_END_OF_RESERVATION ||
		s.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
		t.Errorf("short job: %v %v SLA %v %q; want KILLED at the end of its reservation, SLA met", s.GetState(), s.GetReason(), s.GetSlaOutcome(), s.GetMessage())
	}
	if !near(s.GetStartTime(), t0) || !near(s.GetEndTime(), shortKill) || s.GetEndTime().AsTime().Before(s.GetStartTime().AsTime()) {
		t.Errorf("short job ran [%v, %v]; its process ran [%v, %v]", s.GetStartTime().AsTime(), s.GetEndTime().AsTime(), t0, shortKill)
	}
	l := get(long)
	if l.GetState() != fedschedv1.JobState_JOB_STATE_RUNNING || !near(l.GetStartTime(), t0) ||
		!near(l.GetReservation().GetEnd(), longKill.Add(-time.Second)) {
		t.Errorf("long job: %v started %v, reservation %v to %v; want RUNNING since %v, held until %v", l.GetState(), l.GetStartTime().AsTime(),
			l.GetReservation().GetStart().AsTime(), l.GetReservation().GetEnd().AsTime(), t0, longKill.Add(-time.Second))
	}
	if _, err := c.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: long}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); get(long).GetEndTime() == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long job's process did not end after its cancel")
		}
	}
}
