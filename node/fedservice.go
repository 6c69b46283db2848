package node

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/discovery"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// fedService implements fedschedv1.FederationServiceServer: what peers ask
// of this site. Every call goes through the event loop.
type fedService struct {
	fedschedv1.UnimplementedFederationServiceServer
	n *Node
}

func (s *fedService) ready() error {
	if !s.n.Ready() {
		return ToStatus(fmt.Errorf("site %s is recovering its state: %w", s.n.cfg.Site, ErrUnavailable))
	}
	if !s.n.federating() {
		return ToStatus(fmt.Errorf("site %s does not take part in a federation: %w", s.n.cfg.Site, ErrUnavailable))
	}
	return nil
}

func (s *fedService) Quote(ctx context.Context, req *fedschedv1.QuoteRequest) (*fedschedv1.QuoteResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetOriginSite() == "" || req.GetOriginJobId() == "" {
		return nil, ToStatus(fmt.Errorf("origin_site and origin_job_id are required: %w", ErrInvalidRequest))
	}
	if err := noUnknownFields(req); err != nil {
		return nil, ToStatus(err)
	}
	return stepAs[*fedschedv1.QuoteResponse](ctx, s, req)
}

func (s *fedService) Agree(ctx context.Context, req *fedschedv1.AgreeRequest) (*fedschedv1.AgreeResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	return stepAs[*fedschedv1.AgreeResponse](ctx, s, req)
}

func (s *fedService) roundTrip(ctx context.Context, o op, reply chan agreeResult) (agreeResult, error) {
	if err := s.n.send(ctx, o); err != nil {
		return agreeResult{}, ToStatus(err)
	}
	r, err := await(ctx, s.n, reply)
	if err != nil {
		return r, ToStatus(err)
	}
	if r.err != nil {
		return r, ToStatus(r.err)
	}
	return r, nil
}

func (s *fedService) Release(ctx context.Context, req *fedschedv1.ReleaseRequest) (*fedschedv1.ReleaseResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	return stepAs[*fedschedv1.ReleaseResponse](ctx, s, req)
}

// stepAs sends a peer's request to the loop, which Steps it into the site
// agent (stepOp), and returns the answer as the RPC's response.
func stepAs[T proto.Message](ctx context.Context, s *fedService, req proto.Message) (T, error) {
	var zero T
	o := &stepOp{req: req, reply: make(chan stepResult, 1)}
	if err := s.n.send(ctx, o); err != nil {
		return zero, ToStatus(err)
	}
	r, err := await(ctx, s.n, (<-chan stepResult)(o.reply))
	if e := firstErr(err, r.err); e != nil {
		return zero, ToStatus(e)
	}
	resp, ok := r.resp.(T)
	if !ok {
		return zero, ToStatus(fmt.Errorf("site %s answered %T, not %T: %w", s.n.cfg.Site, r.resp, zero, ErrUnavailable))
	}
	return resp, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (s *fedService) GetAgreement(ctx context.Context, req *fedschedv1.GetAgreementRequest) (*fedschedv1.GetAgreementResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	o := &getAgreementOp{req: req, reply: make(chan agreeResult, 1)}
	r, err := s.roundTrip(ctx, o, o.reply)
	if err != nil {
		return nil, err
	}
	return &fedschedv1.GetAgreementResponse{Agreement: r.a}, nil
}

func (s *fedService) Terminate(ctx context.Context, req *fedschedv1.TerminateRequest) (*fedschedv1.TerminateResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	return stepAs[*fedschedv1.TerminateResponse](ctx, s, req)
}

func (s *fedService) ReportOutcome(ctx context.Context, req *fedschedv1.ReportOutcomeRequest) (*fedschedv1.ReportOutcomeResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if err := validateReport(req); err != nil {
		return nil, ToStatus(err)
	}
	return stepAs[*fedschedv1.ReportOutcomeResponse](ctx, s, req)
}

// ListMembers answers from gossip; without federation, the site alone.
func (s *fedService) ListMembers(_ context.Context, _ *fedschedv1.ListMembersRequest) (*fedschedv1.ListMembersResponse, error) {
	if !s.n.Ready() {
		return nil, ToStatus(fmt.Errorf("site %s is recovering its state: %w", s.n.cfg.Site, ErrUnavailable))
	}
	out := &fedschedv1.ListMembersResponse{}
	if !s.n.federating() {
		d := s.n.Digest()
		out.Members = append(out.Members, memberMsg(discovery.Member{Name: d.Site, State: discovery.Alive, Digest: d, Local: true}))
		return out, nil
	}
	for _, m := range s.n.fed.Peers.Members() {
		if m.Local {
			// The site's own digest as it is now; the one gossip
			// carries is re-advertised every refresh interval.
			m.Digest = s.n.Digest()
		}
		out.Members = append(out.Members, memberMsg(m))
	}
	return out, nil
}

func memberMsg(m discovery.Member) *fedschedv1.Member {
	d := m.Digest
	return &fedschedv1.Member{Site: m.Name, Addr: d.Addr, GossipAddr: m.Addr, State: m.State.String(), Procs: d.Procs, Policy: d.Policy,
		FreeNow: d.FreeNow, Free_1H: d.Free1h, Free_4H: d.Free4h, Free_24H: d.Free24h, Overbooking: d.Overbooking, Local: m.Local}
}
