package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestStartsBecomeDurable: under a burst of submissions that start at once,
// a turn may leave the records of its starts to the next turn's commit
// (more input waits); once the burst is over, every start is in the store
// without any further request.
func TestStartsBecomeDurable(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			dir := t.TempDir()
			st, err := store.OpenBolt(dir, &store.Options{MaxBatchDelay: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cfg := testConfig(dir)
			cfg.Procs = 1024
			s := startSite(t, cfg, st)
			ctx := context.Background()
			const clients, each = 16, 8
			var wg sync.WaitGroup
			ids := make(chan string, clients*each)
			for range clients {
				wg.Go(func() {
					for range each {
						// Long enough that no job ends during the test
						// (an end would be a turn that commits).
						sp := spec(1, 3e7)
						sp.SimRuntimeSeconds = 3e7
						r, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
						if err != nil {
							t.Error(err)
							return
						}
						ids <- r.GetJob().GetId()
					}
				})
			}
			wg.Wait()
			close(ids)
			deadline := time.Now().Add(10 * time.Second)
			for id := range ids {
				for {
					rec, err := st.GetJob(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if rec.Job.GetState() == fedschedv1.JobState_JOB_STATE_RUNNING {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("job %s is %v in the store long after the burst, want RUNNING", id, rec.Job.GetState())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			s.stop(t)
		})
	}
}
