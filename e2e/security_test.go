package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/pki"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestSecurityMatrix: every way in that the federation must refuse, each
// with its exact code, and the stored state unchanged after it; and what
// it must allow (an operator acting on a user's job).
func TestSecurityMatrix(t *testing.T) {
	t.Parallel()
	// Real time, so that nothing moves while the refusals are tried.
	c := start(t, Options{TimeScale: 1, Federation: patientFed(), Sites: []SiteConfig{
		{Name: "a", Procs: 2}, {Name: "b", Procs: 8}, {Name: "c", Procs: 8},
	}})
	ctx := bg(t)
	a, b, cs := c.Site("a"), c.Site("b"), c.Site("c")
	as := func(k auth.Kind, name string, s *Site) *grpc.ClientConn {
		creds, err := c.ClientCredentials(k, name)
		if err != nil {
			t.Fatal(err)
		}
		return dial(t, s.Addr(), creds)
	}
	alice := fedschedv1.NewSiteServiceClient(as(auth.User, "alice", a))
	bob := fedschedv1.NewSiteServiceClient(as(auth.User, "bob", a))

	// Bob's job, with a secret in its environment; alice's job.
	bobJob := mustSubmit(t, bob, &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 3600, Env: map[string]string{"DB_PASSWORD": "hunter2"}})
	if bobJob.GetSpec().GetUser() != "bob" {
		t.Fatalf("bob's job has user %q: the job's user must be the certificate's", bobJob.GetSpec().GetUser())
	}
	aliceJob := mustSubmit(t, alice, &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 3600})
	// A job delegated from a (full) to b or c: an agreement to forge
	// against.
	del := mustSubmit(t, alice, &fedschedv1.JobSpec{Procs: 4, EstimateSeconds: 3600})
	if del.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
		t.Fatalf("want the wide job delegated, got %s", brief(del))
	}
	execSite, other := b, cs
	if del.GetSite() == "c" {
		execSite, other = cs, b
	}
	agr, err := execSite.Fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: del.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	agreementID := agr.GetAgreement().GetId()

	otherCA := t.TempDir()
	if err := pki.CreateCA(otherCA, "another CA", pki.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := pki.CreateCert(otherCA, auth.Operator, "mallory", pki.Options{}); err != nil {
		t.Fatal(err)
	}
	foreign := func() credentials.TransportCredentials {
		cert, key := pki.CertFiles(otherCA, auth.Operator, "mallory")
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Files(auth.Operator, "e2e").Load()
		if err != nil {
			t.Fatal(err)
		}
		return credentials.NewTLS(auth.ClientConfig(m.Pool, []tls.Certificate{kp}, ""))
	}()

	snapshot := func() map[string][]byte {
		out := map[string][]byte{}
		for _, s := range c.Sites() {
			for _, j := range jobsOf(t, s) {
				b, _ := proto.Marshal(j)
				out[j.GetId()] = b
			}
		}
		return out
	}
	userC := fedschedv1.NewFederationServiceClient(as(auth.User, "alice", b))
	fromB := fedschedv1.NewFederationServiceClient(as(auth.Site, "b", a))
	fromOther := fedschedv1.NewFederationServiceClient(as(auth.Site, other.Name, a))
	spec := &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 60, User: "x", Command: []string{"id"}}
	for _, tc := range []struct {
		name string
		code codes.Code
		call func(context.Context) error
	}{
		{"plaintext client to a federating node", codes.Unavailable, func(ctx context.Context) error {
			_, err := fedschedv1.NewSiteServiceClient(dial(t, a.Addr(), insecure.NewCredentials())).GetJob(ctx, &fedschedv1.GetJobRequest{JobId: bobJob.GetId()})
			return err
		}},
		{"certificate from another CA", codes.Unavailable, func(ctx context.Context) error {
			_, err := fedschedv1.NewSiteServiceClient(dial(t, a.Addr(), foreign)).CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: bobJob.GetId()})
			return err
		}},
		{"user certificate calling Quote", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := userC.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "a", OriginJobId: "a.999", Spec: spec})
			return err
		}},
		{"peer forging origin_site", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := fromB.Quote(ctx, &fedschedv1.QuoteRequest{OriginSite: "c", OriginJobId: "c.999", Spec: spec})
			return err
		}},
		{"peer reporting an outcome for an agreement it is not party to", codes.PermissionDenied, func(ctx context.Context) error {
			j := proto.Clone(del).(*fedschedv1.Job)
			j.State = fedschedv1.JobState_JOB_STATE_COMPLETED
			_, err := fromOther.ReportOutcome(ctx, &fedschedv1.ReportOutcomeRequest{AgreementId: agreementID, OriginJobId: del.GetId(), Job: j})
			return err
		}},
		{"peer terminating an agreement it is not party to", codes.PermissionDenied, func(ctx context.Context) error {
			// other presents a's name only in the request, not in its
			// certificate: as the site it is, it is no party.
			cl := fedschedv1.NewFederationServiceClient(as(auth.Site, other.Name, execSite))
			_, err := cl.Terminate(ctx, &fedschedv1.TerminateRequest{AgreementId: agreementID, Message: "forged"})
			return err
		}},
		{"user A cancelling user B's job", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := alice.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: bobJob.GetId()})
			return err
		}},
		{"user A reading user B's job", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := alice.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: bobJob.GetId()})
			return err
		}},
		{"user A explaining user B's job", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := alice.Explain(ctx, &fedschedv1.ExplainRequest{JobId: bobJob.GetId()})
			return err
		}},
		{"user A listing user B's jobs", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := alice.ListJobs(ctx, &fedschedv1.ListJobsRequest{User: "bob"})
			return err
		}},
		{"user A watching user B's job", codes.PermissionDenied, func(ctx context.Context) error {
			st, err := alice.WatchJobs(ctx, &fedschedv1.WatchJobsRequest{JobId: bobJob.GetId(), SendInitial: true})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}},
		{"user A submitting as user B", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := alice.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 60, User: "bob"}})
			return err
		}},
		{"user creating a reservation", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := alice.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{})
			return err
		}},
		{"site certificate on the user API", codes.PermissionDenied, func(ctx context.Context) error {
			_, err := fedschedv1.NewSiteServiceClient(as(auth.Site, "b", a)).CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: bobJob.GetId()})
			return err
		}},
	} {
		before := snapshot()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := tc.call(cctx)
		cancel()
		if got := status.Code(err); got != tc.code {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.code)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		after := snapshot()
		for id, b := range before {
			if !proto.Equal(unmarshalJob(b), unmarshalJob(after[id])) {
				t.Errorf("%s: job %s changed:\n%s\n->\n%s", tc.name, id, unmarshalJob(b), unmarshalJob(after[id]))
			}
		}
		if len(after) != len(before) {
			t.Errorf("%s: %d jobs before, %d after", tc.name, len(before), len(after))
		}
	}
	// No hold came of the refused quotes.
	for _, origin := range []string{"a", "c"} {
		if _, err := execSite.Fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: origin, OriginJobId: origin + ".999"}); status.Code(err) != codes.NotFound {
			t.Errorf("a refused quote left an agreement: %v", err)
		}
	}
	// A user sees only its own jobs.
	r, err := alice.ListJobs(ctx, &fedschedv1.ListJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.GetJobs() {
		if j.GetSpec().GetUser() != "alice" {
			t.Errorf("alice's listing shows %s of %s", j.GetId(), j.GetSpec().GetUser())
		}
	}
	if _, err := alice.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: aliceJob.GetId()}); err != nil {
		t.Errorf("alice reading her own job: %v", err)
	}
	// The operator may act on anyone's job.
	if r, err := a.Client.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: bobJob.GetId(), Message: "operator"}); err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
		t.Errorf("operator cancelling bob's job: %v %v", r, err)
	}
}

// TestRogueGossipMembers: a member with the wrong gossip key never joins;
// a member with the key (stolen) but no site certificate joins gossip,
// advertises the most capacity, and still receives no quote request, while
// the jobs it was meant to attract are delegated to the real sites.
func TestRogueGossipMembers(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 100, Federation: patientFed(), Sites: []SiteConfig{
		{Name: "a", Procs: 2}, {Name: "b", Procs: 8}, {Name: "c", Procs: 8},
	}})
	ctx := bg(t)
	a := c.Site("a")

	// The rogue's gRPC server: a user certificate of the right CA (all a
	// stolen laptop gives), counting every connection and every call.
	var conns, calls atomic.Int64
	if err := c.IssueCert(auth.User, "rogue"); err != nil {
		t.Fatal(err)
	}
	m, err := c.Files(auth.User, "rogue").Load()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{m.Cert}})),
		grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
			calls.Add(1)
			return status.Error(codes.Unimplemented, "rogue")
		}))
	go srv.Serve(countingListener{lis, &conns}) //nolint:errcheck // stopped below
	t.Cleanup(srv.Stop)

	join := func(name string, key []byte) *discovery.Membership {
		dc := discovery.DefaultLocalConfig(name)
		dc.BindAddr, dc.BindPort, dc.SecretKey = "127.0.0.1", 0, key
		d := discovery.Digest{Version: discovery.ProtocolVersion, Site: name, Addr: lis.Addr().String(), Procs: 1000,
			Policy: "conservative", FreeNow: 1000, Free1h: 1000, Free4h: 1000, Free24h: 1000}
		ml, err := discovery.New(dc, func() discovery.Digest { return d })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ml.Shutdown() }) //nolint:errcheck // test end
		ml.Join([]string{a.GossipAddr()})   //nolint:errcheck // the wrong key fails, checked below
		return ml
	}
	key, _, err := pki.ReadGossipKeys(c.GossipKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	wrong := make([]byte, len(key))
	join("wrongkey", wrong)
	join("rogue", key)
	if err := c.WaitMember(ctx, "a", "rogue", "alive"); err != nil {
		t.Fatalf("the rogue with the gossip key did not join (the test needs it in): %v", err)
	}

	fill(t, a)
	for i := range 5 {
		j := submit(t, a, slaSpec(c, 2, 600, 300))
		if j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || (j.GetSite() != "b" && j.GetSite() != "c") {
			t.Errorf("job %d: want it delegated to b or c, got %s", i, brief(j))
		}
	}
	members, err := c.Members(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := members["wrongkey"]; ok {
		t.Errorf("the member with the wrong gossip key joined: %v", members)
	}
	t.Logf("members seen by a: %v; rogue: %d connections, %d calls", members, conns.Load(), calls.Load())
	if calls.Load() != 0 {
		t.Errorf("the rogue member received %d requests", calls.Load())
	}
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return conn, err
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func mustSubmit(t *testing.T, cl fedschedv1.SiteServiceClient, spec *fedschedv1.JobSpec) *fedschedv1.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return r.GetJob()
}

func unmarshalJob(b []byte) *fedschedv1.Job {
	j := &fedschedv1.Job{}
	proto.Unmarshal(b, j) //nolint:errcheck // marshalled above
	return j
}

// patientFed is fed() with quotes that may take long on a loaded machine:
// these tests are about who may call, not how fast.
func patientFed() node.FederationConfig {
	f := fed()
	f.QuoteTimeout = 15 * time.Second
	return f
}
