package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// crashChildEnv names the data directory of the crash test's writer
// (crashChild).
const crashChildEnv = "FEDSCHED_WAL_CRASH_DIR"

// crashChange is the i-th change of the crash test's writer: job k-<i>
// with idempotency key "u/<i>", the counter "last" = i, and on every
// tenth change the deletion of job k-<i-5> (and its key).
func crashChange(i int) Changes {
	rec := job(crashJobID(i), "u", fedschedv1.JobState_JOB_STATE_PENDING)
	rec.IdempotencyKey, rec.BodyHash = "u/"+strconv.Itoa(i), []byte{byte(i)}
	c := Changes{PutJobs: []JobRecord{rec}, PutStats: map[string][]byte{"last": []byte(strconv.Itoa(i))}}
	if i%10 == 0 && i >= 5 {
		c.DeleteJobs = []string{crashJobID(i - 5)}
	}
	return c
}

func crashJobID(i int) string { return fmt.Sprintf("k-%07d", i) }

// deletedBy is the change that deletes job i (0: none).
func deletedBy(i int) int {
	if (i+5)%10 == 0 {
		return i + 5
	}
	return 0
}

// TestMain makes the test binary the crash test's writer when
// crashChildEnv is set (TestWALCrash re-executes it so), as node/executor
// and cmd/fedsched make theirs a supervisor or fedsched.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}

// crashChild is the writer the crash test kills: it continues the history
// from the store's counter, checkpointing often, and prints the number of
// every change once Apply has returned. It returns only on an error.
func crashChild(dir string) int {
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "opening") // the crash test may kill the open
	out.Flush()
	w, err := OpenWAL(dir, &Options{CheckpointRecords: 1 + rand.IntN(40), CheckpointInterval: time.Duration(1+rand.IntN(5)) * time.Millisecond})
	if err != nil {
		fmt.Fprintln(out, "open:", err)
		out.Flush()
		return 3
	}
	ctx := context.Background()
	next := 1
	if v, err := w.GetStats(ctx, "last"); err == nil {
		last, _ := strconv.Atoi(string(v))
		next = last + 1
	}
	for i := next; ; i++ {
		if err := w.Apply(ctx, crashChange(i)); err != nil {
			fmt.Fprintln(out, "apply:", err)
			out.Flush()
			return 3
		}
		fmt.Fprintln(out, "ack", i)
		out.Flush()
	}
}

// TestWALCrash kills a writer (a child process, SIGKILL) at random points,
// during appends, checkpoints and opens, again and again on one data
// directory;
// after each kill the store opens, holds every change the writer was told
// was durable, nothing after the one it was writing, and passes Check.
func TestWALCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILL rounds take a while") // as cmd/fedsched's; CI runs without -short
	}
	dir := t.TempDir()
	kills := 25
	acked := 0
	for k := range kills {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of acknowledgements, plus a random
		// part of a millisecond: mid-append, mid-sync or mid-checkpoint.
		// One kill in three comes within 3 ms of the open instead, in its
		// replay, its deletion of the old segments or its new segment.
		want := 20 + rand.IntN(400)
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || sc.Text() != "opening" {
			t.Fatalf("child: %q", sc.Text())
		}
		if k%3 == 2 {
			want = 0
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		}
		seen := 0
		for seen < want && sc.Scan() {
			var i int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d", &i); err != nil {
				t.Fatalf("child: %q", sc.Text())
			}
			if i != acked+1 {
				t.Fatalf("child acknowledged %d after %d", i, acked)
			}
			acked = i
			seen++
		}
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		// Acknowledgements printed before the kill count too.
		for sc.Scan() {
			var i int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d", &i); err == nil && i == acked+1 {
				acked = i
			}
		}
		cmd.Wait()
		if seen < want {
			t.Fatalf("kill %d: child stopped after %d acknowledgements", k, seen)
		}
		acked = verifyCrashStore(t, dir, acked)
	}
	t.Logf("%d kills, %d changes acknowledged", kills, acked)
}

// verifyCrashStore checks dir after a kill: every acknowledged change is
// there, the change in flight (acked+1) is there or not as a whole, and
// nothing later; Check finds nothing wrong. It returns the store's
// counter (acked or acked+1), where the next writer continues.
func verifyCrashStore(t *testing.T, dir string, acked int) int {
	t.Helper()
	ctx := context.Background()
	w, err := OpenWAL(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("after %d acknowledged: %v", acked, err)
	}
	defer w.Close()
	problems, err := w.Check(ctx)
	if err != nil || len(problems) > 0 {
		t.Fatalf("check after %d acknowledged: %v %v", acked, problems, err)
	}
	v, err := w.GetStats(ctx, "last")
	if err != nil {
		t.Fatalf("counter: %v", err)
	}
	last, _ := strconv.Atoi(string(v))
	if last != acked && last != acked+1 {
		t.Fatalf("counter %d, %d acknowledged", last, acked)
	}
	for i := 1; i <= last+1; i++ {
		_, err := w.GetJob(ctx, crashJobID(i))
		want := i <= last && (deletedBy(i) == 0 || deletedBy(i) > last)
		if got := err == nil; got != want || (err != nil && !errors.Is(err, ErrNotFound)) {
			t.Fatalf("job %d after %d acknowledged (store at %d): present %v (%v), want %v", i, acked, last, got, err, want)
		}
		_, err = w.GetIdempotencyKey(ctx, "u/"+strconv.Itoa(i))
		if got := err == nil; got != want {
			t.Fatalf("key %d after %d acknowledged (store at %d): present %v (%v), want %v", i, acked, last, got, err, want)
		}
	}
	n, err := w.CountIdempotencyKeys(ctx, "u/", 0)
	jobs := 0
	for i := 1; i <= last; i++ {
		if deletedBy(i) == 0 || deletedBy(i) > last {
			jobs++
		}
	}
	if err != nil || n != jobs {
		t.Fatalf("%d keys (%v), want %d", n, err, jobs)
	}
	all := allPages(t, w, JobQuery{PageSize: 97})
	if len(all) != jobs {
		t.Fatalf("ListJobs: %d jobs, want %d", len(all), jobs)
	}
	return last
}
