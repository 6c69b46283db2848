package node_test

import (
	"context"
	"testing"
	"time"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestCancelDelegatedReachesPeer: a delegated job cancelled at its origin
// is cancelled at the peer that runs it, with a message that names the
// origin (and no empty detail after it: the origin sends none).
func TestCancelDelegatedReachesPeer(t *testing.T) {
	sites := startFederation(t, 1000, 2, 8)
	ctx := context.Background()
	r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec(6, 24*3600)})
	if err != nil {
		t.Fatal(err)
	}
	j := r.GetJob()
	if j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || j.GetSite() != "s1" {
		t.Fatalf("submit: %v", j)
	}
	if _, err := sites[0].client.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: j.GetId()}); err != nil {
		t.Fatal(err)
	}
	var peer *fedschedv1.Job
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if jobs := listAll(t, sites[1].client); len(jobs) == 1 && jobs[0].GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED {
			peer = jobs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer's copy was never cancelled")
		}
	}
	if got, want := peer.GetMessage(), "cancelled by the user: terminated by the origin s0"; got != want {
		t.Errorf("peer's message %q, want %q", got, want)
	}
}
