package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestFederationInputChecks: a peer's ReportOutcome must report an ended
// job, and a site takes no job delegated more than delegation.max_hops
// times.
func TestFederationInputChecks(t *testing.T) {
	sites := startFederation(t, 1000, 2, 8)
	ctx := context.Background()
	sp := spec(6, 600)
	sp.SimRuntimeSeconds = 60
	sp.Deadline, sp.Fee, sp.Penalty = timestamppb.New(time.Now().Add(24*time.Hour)), 1, 1
	r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
	if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("submit: %v %v", r, err)
	}
	job := waitState(t, sites[0].client, r.GetJob().GetId(), fedschedv1.JobState_JOB_STATE_COMPLETED)
	ag, err := sites[1].fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "s0", OriginJobId: job.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	// A report that would put the job back to PENDING is refused and
	// changes nothing, now or after a restart.
	bad := &fedschedv1.Job{Id: ag.GetAgreement().GetPeerJobId(), State: fedschedv1.JobState_JOB_STATE_PENDING}
	_, err = sites[0].fed.ReportOutcome(ctx, &fedschedv1.ReportOutcomeRequest{AgreementId: ag.GetAgreement().GetId(), OriginJobId: job.GetId(), Job: bad})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("ReportOutcome with a PENDING job: %v, want InvalidArgument", err)
	}
	if j := getJob(t, sites[0].client, job.GetId()); j.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED || j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
		t.Errorf("after a bad report: %v %v", j.GetState(), j.GetSlaOutcome())
	}
	// A quote for a job already delegated once (max_hops 1) is refused.
	route := []*fedschedv1.RouteHop{{Site: "x", Reason: fedschedv1.Reason_REASON_UNSPECIFIED}, {Site: "x", PeerSite: "y", Reason: fedschedv1.Reason_REASON_DELEGATED},
		{Site: "y", PeerSite: "x", Reason: fedschedv1.Reason_REASON_RECEIVED_FROM_PEER}}
	q, err := sites[1].fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: "x.000000000001", Spec: spec(1, 60), Route: route})
	if err != nil || q.GetOffer() != nil || !strings.Contains(q.GetMessage(), "max_hops") {
		t.Errorf("quote of a job delegated once already: %v %v, want a refusal naming max_hops", q, err)
	}
	// A job fresh from its origin gets an offer, even if the origin once
	// meant to delegate it elsewhere (an intent abandoned in a crash).
	q, err = sites[1].fed.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "x", OriginJobId: "x.000000000002", Spec: spec(1, 60), Route: route[:2]})
	if err != nil || q.GetOffer() == nil {
		t.Errorf("quote of a fresh job: %v %v", q, err)
	} else {
		sites[1].fed.Release(ctx, &fedschedv1.ReleaseRequest{HoldId: q.GetOffer().GetHoldId()}) //nolint:errcheck // expires anyway
	}
}

// TestOutboxGivesUpOnGoneOrigin: an outcome owed to an origin that left
// the federation is given up after FederationConfig.OutboxGiveUp, and the
// agreement says so.
func TestOutboxGivesUpOnGoneOrigin(t *testing.T) {
	// At 50x a quote's hold (60 s) outlasts a loaded machine.
	sites := startFederationWith(t, 50, node.FederationConfig{OutboxGiveUp: 10 * time.Second}, 2, 8)
	ctx := context.Background()
	sp := spec(6, 3600)
	sp.SimRuntimeSeconds = 50 // 1 s of wall time
	r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
	if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("submit: %v %v", r, err)
	}
	sites[0].cancel() // the origin leaves for good
	deadline := time.Now().Add(30 * time.Second)
	for {
		ag, err := sites[1].fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "s0", OriginJobId: r.GetJob().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if u := ag.GetAgreement().GetUndelivered(); u != "" {
			if !strings.Contains(u, "outcome") || !strings.Contains(u, "s0") {
				t.Errorf("undelivered = %q", u)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outcome owed to the gone origin is still retried: %v", ag.GetAgreement())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
