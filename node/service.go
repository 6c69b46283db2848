package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// service implements fedschedv1.SiteServiceServer on top of a Node. Reads go
// to the store, which holds exactly the acknowledged state; changes go
// through the node's event loop.
type service struct {
	fedschedv1.UnimplementedSiteServiceServer
	n *Node
}

// Serve registers the site's services (SiteService, the standard health
// service and server reflection) on a new gRPC server, serves lis until ctx
// is cancelled, then stops gracefully (waiting at most grace for calls in
// flight). Health reports NOT_SERVING until the node has recovered.
func (n *Node) Serve(ctx context.Context, lis net.Listener, grace time.Duration, opts ...grpc.ServerOption) error {
	// Every call is authorized, whatever the transport (auth.Interceptor).
	srv := grpc.NewServer(append(opts, n.authorizer()...)...)
	fedschedv1.RegisterSiteServiceServer(srv, &service{n: n})
	fedschedv1.RegisterFederationServiceServer(srv, &fedService{n: n})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(fedschedv1.SiteService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	done := make(chan struct{})
	served := make(chan struct{}) // closed when srv.Serve returns
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
	wait:
		for !n.Ready() {
			select {
			case <-ctx.Done():
				break wait
			case <-served:
				return
			case <-t.C:
			}
		}
		if ctx.Err() == nil {
			hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
			hs.SetServingStatus(fedschedv1.SiteService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		}
		select {
		case <-ctx.Done():
		case <-served:
			return // the listener failed; Serve stops the server
		}
		hs.Shutdown()
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(grace):
			srv.Stop()
		}
	}()
	err := srv.Serve(lis)
	close(served)
	if ctx.Err() == nil && err != nil {
		srv.Stop()
		<-done
		return fmt.Errorf("serve %s: %w", lis.Addr(), err)
	}
	<-done
	srv.Stop()
	return nil
}

func (s *service) SubmitJob(ctx context.Context, req *fedschedv1.SubmitJobRequest) (*fedschedv1.SubmitJobResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if err := s.n.validateSubmit(req, s.n.now()); err != nil {
		// A retry of a stored submission that no longer validates (its
		// deadline came closer) still learns what became of its job. A
		// valid one is replayed by the loop, which checks every key.
		if r, ok := s.storedReplay(ctx, req); ok {
			return r, nil
		}
		return nil, ToStatus(err)
	}
	hash, err := SpecHash(req.GetSpec())
	if err != nil {
		return nil, ToStatus(fmt.Errorf("%w: %w", ErrInvalidJob, err))
	}
	o := &submitOp{ctx: context.WithoutCancel(ctx), req: req, hash: hash, reply: make(chan submitResult, 1)}
	if err := s.n.send(ctx, o); err != nil {
		return nil, ToStatus(err)
	}
	res, err := await(ctx, s.n, o.reply)
	if err != nil {
		return nil, ToStatus(err)
	}
	if res.err != nil {
		return nil, ToStatus(res.err)
	}
	return &fedschedv1.SubmitJobResponse{Job: res.job, Replayed: res.replayed}, nil
}

func (s *service) GetJob(ctx context.Context, req *fedschedv1.GetJobRequest) (*fedschedv1.GetJobResponse, error) {
	j, err := s.get(ctx, req.GetJobId())
	if err != nil {
		return nil, err
	}
	return &fedschedv1.GetJobResponse{Job: s.withWaits(ctx, []*fedschedv1.Job{j})[0]}, nil
}

func (s *service) get(ctx context.Context, id string) (*fedschedv1.Job, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, ToStatus(fmt.Errorf("job_id is required: %w", ErrInvalidRequest))
	}
	rec, err := s.n.deps.Store.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ToStatus(fmt.Errorf("site %s has no job %q: %w", s.n.cfg.Site, id, ErrJobNotFound))
	}
	if err != nil {
		return nil, ToStatus(fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	return rec.Job, nil
}

func (s *service) ListJobs(ctx context.Context, req *fedschedv1.ListJobsRequest) (*fedschedv1.ListJobsResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetPageSize() < 0 {
		return nil, ToStatus(fmt.Errorf("page_size must not be negative: %w", ErrInvalidRequest))
	}
	if err := validateStates(req.GetStates()); err != nil {
		return nil, ToStatus(err)
	}
	recs, next, err := s.n.deps.Store.ListJobs(ctx, store.JobQuery{States: req.GetStates(), User: req.GetUser(),
		PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken(), MaxBytes: maxPageBytes})
	if errors.Is(err, store.ErrInvalidPageToken) {
		return nil, ToStatus(fmt.Errorf("page_token is not one this site issued for these filters: %w", ErrInvalidRequest))
	}
	if err != nil {
		return nil, ToStatus(fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	out := &fedschedv1.ListJobsResponse{NextPageToken: next}
	for _, r := range recs {
		out.Jobs = append(out.Jobs, r.Job)
	}
	out.Jobs = s.withWaits(ctx, out.Jobs)
	return out, nil
}

func (s *service) CancelJob(ctx context.Context, req *fedschedv1.CancelJobRequest) (*fedschedv1.CancelJobResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if len(req.GetMessage()) > maxMessageLen {
		return nil, ToStatus(fmt.Errorf("message: at most %d bytes: %w", maxMessageLen, ErrInvalidRequest))
	}
	o := &cancelOp{id: req.GetJobId(), msg: req.GetMessage(), reply: make(chan submitResult, 1)}
	if err := s.n.send(ctx, o); err != nil {
		return nil, ToStatus(err)
	}
	res, err := await(ctx, s.n, o.reply)
	if err != nil {
		return nil, ToStatus(err)
	}
	if errors.Is(res.err, errJobNotLive) {
		j, err := s.get(ctx, req.GetJobId())
		if err != nil {
			return nil, err
		}
		if j.GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED {
			// Idempotent: the job is what the user asked for.
			return &fedschedv1.CancelJobResponse{Job: j}, nil
		}
		return nil, ToStatus(fmt.Errorf("job %s already ended %s and cannot be cancelled: %w", j.GetId(), stateName(j.GetState()), ErrJobFinished))
	}
	if res.err != nil {
		return nil, ToStatus(res.err)
	}
	return &fedschedv1.CancelJobResponse{Job: res.job}, nil
}

func (s *service) WatchJobs(req *fedschedv1.WatchJobsRequest, stream fedschedv1.SiteService_WatchJobsServer) error {
	if err := s.ready(); err != nil {
		return err
	}
	ctx := stream.Context()
	if id := req.GetJobId(); id != "" {
		// A job the store does not hold was never acknowledged: no event
		// will ever come for it.
		if _, err := s.get(ctx, id); err != nil {
			return err
		}
	}
	w := &watcher{jobID: req.GetJobId(), user: req.GetUser(), ch: make(chan *fedschedv1.JobEvent, watchBuffer)}
	o := &watchOp{w: w, initial: req.GetSendInitial(), reply: make(chan watchReply, 1)}
	if err := s.n.send(ctx, o); err != nil {
		return ToStatus(err)
	}
	reg, err := await(ctx, s.n, o.reply)
	if err != nil {
		return ToStatus(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		s.n.send(rctx, &watchOp{remove: reg.id}) //nolint:errcheck // the loop may be gone; nothing to do then
	}()
	// The response headers tell the client the watch is registered: every
	// change after they arrive is delivered.
	if err := stream.SendHeader(metadata.Pairs("fedsched-watch", "live")); err != nil {
		return err
	}
	slices.SortFunc(reg.initial, func(a, b *fedschedv1.JobEvent) int { return compareIDs(a.GetJob().GetId(), b.GetJob().GetId()) })
	for _, ev := range reg.initial {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ch:
			if !ok {
				if w.lagged {
					return ToStatus(fmt.Errorf("the watch fell %d events behind; reconnect with send_initial: %w", watchBuffer, ErrOverloaded))
				}
				return ToStatus(fmt.Errorf("the site is shutting down: %w", ErrUnavailable))
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

func (s *service) Explain(ctx context.Context, req *fedschedv1.ExplainRequest) (*fedschedv1.ExplainResponse, error) {
	j, err := s.get(ctx, req.GetJobId())
	if err != nil {
		return nil, err
	}
	j = s.withWaits(ctx, []*fedschedv1.Job{j})[0]
	out := &fedschedv1.ExplainResponse{Job: j, Reservation: j.GetReservation(), Pof: j.GetPof(), PofMax: s.n.pofMax()}
	seen := map[fedschedv1.Reason]bool{}
	for i := len(j.GetHistory()) - 1; i >= 0; i-- {
		r := j.GetHistory()[i].GetReason()
		if r != fedschedv1.Reason_REASON_UNSPECIFIED && !seen[r] {
			seen[r] = true
			out.Reasons = append(out.Reasons, r)
		}
	}
	out.Summary = explainSummary(j, s.n.cfg.Site, s.n.pofMax())
	return out, nil
}

// explainSummary says in a few sentences why a job is where it is, as
// site self tells it (pofMax is its own admission threshold).
func explainSummary(j *fedschedv1.Job, self string, pofMax float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s is %s at site %s", j.GetId(), stateName(j.GetState()), j.GetSite())
	if msg := j.GetMessage(); msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	b.WriteString(".")
	if r := j.GetReservation(); r != nil {
		verb := "holds"
		if j.GetEndTime() != nil || j.GetState() == fedschedv1.JobState_JOB_STATE_REJECTED {
			verb = "held"
		}
		fmt.Fprintf(&b, " It %s %d processors from %s to %s.", verb, r.GetProcs(), humanTime(r.GetStart().GetSeconds()), humanTime(r.GetEnd().GetSeconds()))
	}
	if w := j.GetWait(); w != nil {
		fmt.Fprintf(&b, " It waits: %s.", w.GetMessage())
	}
	if as := j.GetQuoteAnswers(); len(as) > 0 {
		var parts []string
		for _, a := range as {
			if a.GetOffered() {
				parts = append(parts, a.GetPeerSite()+" offered "+a.GetMessage())
			} else {
				parts = append(parts, a.GetPeerSite()+" refused ("+reasonLabel(a.GetRefusal())+": "+a.GetMessage()+")")
			}
		}
		fmt.Fprintf(&b, " Peers asked: %s.", strings.Join(parts, "; "))
	}
	switch {
	case j.GetOverbooked() && j.GetSite() != self:
		fmt.Fprintf(&b, " Its reservation is shorter than its estimate: site %s overbooked it with a probability of failure of %.3f, by its own admission test.", j.GetSite(), j.GetPof())
	case j.GetOverbooked():
		fmt.Fprintf(&b, " Its reservation is shorter than its estimate: it was overbooked with a probability of failure of %.3f (the site accepts below %.3f).", j.GetPof(), pofMax)
	}
	if o := j.GetSlaOutcome(); o != fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED {
		fmt.Fprintf(&b, " SLA: %s.", strings.ToLower(strings.TrimPrefix(o.String(), "SLA_OUTCOME_")))
	}
	if sites := routeSites(j.GetRoute()); len(sites) > 1 {
		fmt.Fprintf(&b, " Route: %s.", strings.Join(sites, " → "))
	}
	return b.String()
}

// routeSites is the sites a job was at, in order: the route's hops by the
// site that recorded them, a site's consecutive hops (submitted, then
// delegated from it) counted once.
func routeSites(route []*fedschedv1.RouteHop) []string {
	var sites []string
	for _, h := range route {
		if len(sites) == 0 || sites[len(sites)-1] != h.GetSite() {
			sites = append(sites, h.GetSite())
		}
	}
	return sites
}

func stateName(s fedschedv1.JobState) string {
	return strings.TrimPrefix(s.String(), "JOB_STATE_")
}

func (s *service) GetSite(ctx context.Context, _ *fedschedv1.GetSiteRequest) (*fedschedv1.GetSiteResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	o := &siteOp{reply: make(chan *fedschedv1.Site, 1)}
	if err := s.n.send(ctx, o); err != nil {
		return nil, ToStatus(err)
	}
	site, err := await(ctx, s.n, o.reply)
	if err != nil {
		return nil, ToStatus(err)
	}
	return &fedschedv1.GetSiteResponse{Site: proto.Clone(site).(*fedschedv1.Site)}, nil
}

func (s *service) ready() error {
	if !s.n.Ready() {
		return ToStatus(fmt.Errorf("site %s is recovering its state; retry shortly: %w", s.n.cfg.Site, ErrUnavailable))
	}
	return nil
}
