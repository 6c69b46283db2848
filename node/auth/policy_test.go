package auth

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// state is a site's jobs and agreements as the policy asks about them.
type state struct {
	owners  map[string]string // job -> user
	parties map[string]string // agreement -> counterparty
}

func (s state) JobOwner(_ context.Context, id string) (string, bool, error) {
	u, ok := s.owners[id]
	return u, ok, nil
}

func (s state) Counterparty(_ context.Context, id string) (string, bool, error) {
	p, ok := s.parties[id]
	return p, ok, nil
}

func TestPolicy(t *testing.T) {
	st := state{owners: map[string]string{"a.1": "alice", "a.2": "bob"}, parties: map[string]string{"b.7": "a", "a.9": "c"}}
	var (
		alice    = Identity{Kind: User, Name: "alice", UID: -1, Via: ViaTLS}
		op       = Identity{Kind: Operator, Name: "ops", UID: -1, Via: ViaTLS}
		siteA    = Identity{Kind: Site, Name: "a", UID: -1, Via: ViaTLS}
		siteC    = Identity{Kind: Site, Name: "c", UID: -1, Via: ViaTLS}
		anon     = Identity{Kind: Anonymous, UID: -1, Via: "tls"}
		insecure = Identity{Kind: Insecure, Name: "", UID: -1, Via: ViaPlaintext}
	)
	ok, denied, unauth := codes.OK, codes.PermissionDenied, codes.Unauthenticated
	for _, tc := range []struct {
		name   string
		id     Identity
		method string
		req    any
		want   codes.Code
	}{
		{"user submits as itself", alice, fedschedv1.SiteService_SubmitJob_FullMethodName, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{}}, ok},
		{"user submits as another", alice, fedschedv1.SiteService_SubmitJob_FullMethodName, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{User: "bob"}}, denied},
		{"operator submits for another", op, fedschedv1.SiteService_SubmitJob_FullMethodName, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{User: "bob"}}, ok},
		{"site submits", siteA, fedschedv1.SiteService_SubmitJob_FullMethodName, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{}}, denied},
		{"anonymous", anon, fedschedv1.SiteService_GetSite_FullMethodName, &fedschedv1.GetSiteRequest{}, unauth},
		{"user reads own job", alice, fedschedv1.SiteService_GetJob_FullMethodName, &fedschedv1.GetJobRequest{JobId: "a.1"}, ok},
		{"user reads another's job", alice, fedschedv1.SiteService_GetJob_FullMethodName, &fedschedv1.GetJobRequest{JobId: "a.2"}, denied},
		{"user cancels another's job", alice, fedschedv1.SiteService_CancelJob_FullMethodName, &fedschedv1.CancelJobRequest{JobId: "a.2"}, denied},
		{"user explains another's job", alice, fedschedv1.SiteService_Explain_FullMethodName, &fedschedv1.ExplainRequest{JobId: "a.2"}, denied},
		{"user reads an unknown job (NotFound from the handler)", alice, fedschedv1.SiteService_GetJob_FullMethodName, &fedschedv1.GetJobRequest{JobId: "a.3"}, ok},
		{"operator cancels another's job", op, fedschedv1.SiteService_CancelJob_FullMethodName, &fedschedv1.CancelJobRequest{JobId: "a.2"}, ok},
		{"user lists another's jobs", alice, fedschedv1.SiteService_ListJobs_FullMethodName, &fedschedv1.ListJobsRequest{User: "bob"}, denied},
		{"user watches another's job", alice, fedschedv1.SiteService_WatchJobs_FullMethodName, &fedschedv1.WatchJobsRequest{JobId: "a.2"}, denied},
		{"user watches another user", alice, fedschedv1.SiteService_WatchJobs_FullMethodName, &fedschedv1.WatchJobsRequest{User: "bob"}, denied},
		{"user reserves", alice, fedschedv1.SiteService_CreateReservation_FullMethodName, &fedschedv1.CreateReservationRequest{}, denied},
		{"operator reserves", op, fedschedv1.SiteService_CreateReservation_FullMethodName, &fedschedv1.CreateReservationRequest{}, ok},
		{"user quotes", alice, fedschedv1.FederationService_Quote_FullMethodName, &fedschedv1.QuoteRequest{OriginSite: "alice"}, denied},
		{"operator quotes", op, fedschedv1.FederationService_Quote_FullMethodName, &fedschedv1.QuoteRequest{OriginSite: "ops"}, denied},
		{"site quotes for itself", siteA, fedschedv1.FederationService_Quote_FullMethodName, &fedschedv1.QuoteRequest{OriginSite: "a"}, ok},
		{"site quotes for another", siteA, fedschedv1.FederationService_Quote_FullMethodName, &fedschedv1.QuoteRequest{OriginSite: "c"}, denied},
		{"site agrees for another", siteA, fedschedv1.FederationService_Agree_FullMethodName, &fedschedv1.AgreeRequest{OriginSite: "c"}, denied},
		{"counterparty terminates", siteA, fedschedv1.FederationService_Terminate_FullMethodName, &fedschedv1.TerminateRequest{AgreementId: "b.7"}, ok},
		{"stranger terminates", siteC, fedschedv1.FederationService_Terminate_FullMethodName, &fedschedv1.TerminateRequest{AgreementId: "b.7"}, denied},
		{"stranger releases", siteC, fedschedv1.FederationService_Release_FullMethodName, &fedschedv1.ReleaseRequest{HoldId: "b.7"}, denied},
		{"counterparty reports", siteC, fedschedv1.FederationService_ReportOutcome_FullMethodName, &fedschedv1.ReportOutcomeRequest{AgreementId: "a.9"}, ok},
		{"stranger reports", siteA, fedschedv1.FederationService_ReportOutcome_FullMethodName, &fedschedv1.ReportOutcomeRequest{AgreementId: "a.9"}, denied},
		{"stranger reads an agreement", siteC, fedschedv1.FederationService_GetAgreement_FullMethodName, &fedschedv1.GetAgreementRequest{AgreementId: "b.7"}, denied},
		{"site reads another origin's agreement", siteC, fedschedv1.FederationService_GetAgreement_FullMethodName, &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: "a.1"}, denied},
		{"operator reads an agreement", op, fedschedv1.FederationService_GetAgreement_FullMethodName, &fedschedv1.GetAgreementRequest{AgreementId: "b.7"}, ok},
		{"user reads the plan (its own view)", alice, fedschedv1.SiteService_GetPlan_FullMethodName, &fedschedv1.GetPlanRequest{}, ok},
		{"site reads the plan", siteA, fedschedv1.SiteService_GetPlan_FullMethodName, &fedschedv1.GetPlanRequest{}, denied},
		{"user lists members", alice, fedschedv1.FederationService_ListMembers_FullMethodName, &fedschedv1.ListMembersRequest{}, ok},
		{"user reads another's output", alice, fedschedv1.SiteService_GetJobOutput_FullMethodName, &fedschedv1.GetJobOutputRequest{JobId: "a.2"}, denied},
		{"user reads own output", alice, fedschedv1.SiteService_GetJobOutput_FullMethodName, &fedschedv1.GetJobOutputRequest{JobId: "a.1"}, ok},
		{"site reads another origin's output", siteC, fedschedv1.FederationService_PeerJobOutput_FullMethodName, &fedschedv1.PeerJobOutputRequest{OriginSite: "a"}, denied},
		{"site asks for a queue in its name", siteA, fedschedv1.FederationService_PeerQueue_FullMethodName, &fedschedv1.PeerQueueRequest{Site: "a"}, ok},
		{"site asks for a queue in another's name", siteA, fedschedv1.FederationService_PeerQueue_FullMethodName, &fedschedv1.PeerQueueRequest{Site: "c"}, denied},
		{"user asks for a queue", alice, fedschedv1.FederationService_PeerQueue_FullMethodName, &fedschedv1.PeerQueueRequest{Site: "alice"}, denied},
		{"operator asks for a queue", op, fedschedv1.FederationService_PeerQueue_FullMethodName, &fedschedv1.PeerQueueRequest{Site: "ops"}, denied},
		{"site takes in its name", siteA, fedschedv1.FederationService_Take_FullMethodName, &fedschedv1.TakeRequest{Site: "a"}, ok},
		{"site takes in another's name", siteA, fedschedv1.FederationService_Take_FullMethodName, &fedschedv1.TakeRequest{Site: "c"}, denied},
		{"user takes", alice, fedschedv1.FederationService_Take_FullMethodName, &fedschedv1.TakeRequest{Site: "alice"}, denied},
		{"origin reads its job's output", siteA, fedschedv1.FederationService_PeerJobOutput_FullMethodName, &fedschedv1.PeerJobOutputRequest{OriginSite: "a"}, ok},
		{"unknown method", op, "/fedsched.v1.SiteService/Shutdown", nil, denied},
		{"insecure caller may do all", insecure, fedschedv1.FederationService_Terminate_FullMethodName, &fedschedv1.TerminateRequest{AgreementId: "b.7"}, ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := authorize(&call{ctx: context.Background(), id: tc.id, method: tc.method, req: tc.req, r: st})
			if got := status.Code(err); got != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPolicyFillsTheCallersName: what a user leaves out is its own name.
func TestPolicyFillsTheCallersName(t *testing.T) {
	alice := Identity{Kind: User, Name: "alice", UID: -1, Via: ViaUnix}
	sub := &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{}}
	list := &fedschedv1.ListJobsRequest{}
	watch := &fedschedv1.WatchJobsRequest{}
	for m, req := range map[string]any{fedschedv1.SiteService_SubmitJob_FullMethodName: sub,
		fedschedv1.SiteService_ListJobs_FullMethodName: list, fedschedv1.SiteService_WatchJobs_FullMethodName: watch} {
		if err := authorize(&call{ctx: context.Background(), id: alice, method: m, req: req, r: state{}}); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	if sub.GetSpec().GetUser() != "alice" || list.GetUser() != "alice" || watch.GetUser() != "alice" {
		t.Errorf("submit user %q, list user %q, watch user %q; want alice", sub.GetSpec().GetUser(), list.GetUser(), watch.GetUser())
	}
}

// Every method of the services is in the policy table: a new RPC must be
// given its rule, not be refused by surprise.
func TestPolicyCoversEveryMethod(t *testing.T) {
	for _, sd := range []struct {
		name    string
		methods []string
	}{
		{fedschedv1.SiteService_ServiceDesc.ServiceName, methodNames(fedschedv1.SiteService_ServiceDesc.Methods, fedschedv1.SiteService_ServiceDesc.Streams)},
		{fedschedv1.FederationService_ServiceDesc.ServiceName, methodNames(fedschedv1.FederationService_ServiceDesc.Methods, fedschedv1.FederationService_ServiceDesc.Streams)},
	} {
		for _, m := range sd.methods {
			if _, ok := policy["/"+sd.name+"/"+m]; !ok {
				t.Errorf("/%s/%s has no rule", sd.name, m)
			}
		}
	}
}

func methodNames(ms []grpc.MethodDesc, ss []grpc.StreamDesc) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MethodName)
	}
	for _, s := range ss {
		out = append(out, s.StreamName)
	}
	return out
}
