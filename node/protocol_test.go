package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestProtocolInputChecks: requests the API cannot honour are refused with
// the right code and change nothing.
func TestProtocolInputChecks(t *testing.T) {
	s := startSite(t, testConfig(t.TempDir()), store.NewMemStore())
	defer s.stop(t)
	ctx := context.Background()
	// ListJobs with a state that does not exist.
	if _, err := s.client.ListJobs(ctx, &fedschedv1.ListJobsRequest{States: []fedschedv1.JobState{99}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("ListJobs state 99: %v, want InvalidArgument", err)
	}
	if _, err := s.client.ListJobs(ctx, &fedschedv1.ListJobsRequest{States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_PENDING}}); err != nil {
		t.Errorf("ListJobs PENDING: %v", err)
	}
	// WatchJobs on a job the site never had answers NotFound.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	w, err := s.client.WatchJobs(wctx, &fedschedv1.WatchJobsRequest{JobId: "t.000000000042"})
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("WatchJobs of an unknown job: %v, want NotFound", err)
	}
	// User names with bidirectional overrides, zero-width or other format
	// and control characters are refused.
	for _, user := range []string{"ali\u202Ece", "bob\u200B", "eve\u2066x\u2069", "line\u2028sep", "tab\tname"} {
		sp := spec(1, 60)
		sp.User = user
		_, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "user") {
			t.Errorf("user %q: %v, want InvalidArgument", user, err)
		}
	}
	sp := spec(1, 60)
	sp.User = "José Müller-Łukasz 李"
	if _, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp}); err != nil {
		t.Errorf("an ordinary international name: %v", err)
	}
}

// TestListLargeJobs: two valid jobs of 3.8 MB each list, one page each:
// pages are bounded in bytes as well as in count.
func TestListLargeJobs(t *testing.T) {
	for _, kind := range []string{"mem", "bolt"} {
		t.Run(kind, func(t *testing.T) { testListLargeJobs(t, kind) })
	}
}

func testListLargeJobs(t *testing.T, kind string) {
	dir := t.TempDir()
	var st store.Store = store.NewMemStore()
	if kind == "bolt" {
		b, err := store.OpenBolt(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		st = b
		t.Cleanup(func() { b.Close() })
	}
	s := startSite(t, testConfig(dir), st)
	defer s.stop(t)
	ctx := context.Background()
	arg := strings.Repeat("x", 8000)
	for range 2 {
		sp := spec(1, 60)
		sp.Command = make([]string, 475) // 3.8 MB
		for i := range sp.Command {
			sp.Command[i] = arg
		}
		if _, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp}); err != nil {
			t.Fatal(err)
		}
	}
	var got int
	token := ""
	for range 4 {
		r, err := s.client.ListJobs(ctx, &fedschedv1.ListJobsRequest{PageToken: token})
		if err != nil {
			t.Fatalf("ListJobs: %v", err)
		}
		got += len(r.GetJobs())
		if token = r.GetNextPageToken(); token == "" {
			break
		}
	}
	if got != 2 {
		t.Errorf("listed %d of 2 large jobs", got)
	}
}
