package auth

import (
	"context"
	"fmt"
	"slices"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// Resolver answers the questions about a site's state that authorization
// needs. The node implements it.
type Resolver interface {
	// JobOwner returns the user of a job of this site; ok is false when
	// the site has no such job.
	JobOwner(ctx context.Context, jobID string) (user string, ok bool, err error)
	// Counterparty returns the other site of an agreement (or a hold) of
	// this site; ok is false when the site has none by that id.
	Counterparty(ctx context.Context, agreementID string) (site string, ok bool, err error)
}

// rule is who may call one method: the kinds of identities, and a check
// of the request against the caller (which may fill in what the caller
// left out, such as the job's user). Insecure callers pass every rule.
type rule struct {
	who   []Kind
	check func(c *call) error
}

// call is one authorization question.
type call struct {
	ctx    context.Context
	id     Identity
	method string
	req    any
	r      Resolver
}

var (
	users     = []Kind{User, Operator}
	operators = []Kind{Operator}
	sites     = []Kind{Site}
	everyone  = []Kind{Site, User, Operator}
)

// policy is the one table of who may call what. A method missing from it
// is refused (health checks and server reflection excepted, see
// Interceptor).
var policy = map[string]rule{
	fedschedv1.SiteService_SubmitJob_FullMethodName:         {users, checkSubmit},
	fedschedv1.SiteService_GetJob_FullMethodName:            {users, ownJob(func(r any) string { return r.(*fedschedv1.GetJobRequest).GetJobId() })},
	fedschedv1.SiteService_CancelJob_FullMethodName:         {users, ownJob(func(r any) string { return r.(*fedschedv1.CancelJobRequest).GetJobId() })},
	fedschedv1.SiteService_Explain_FullMethodName:           {users, ownJob(func(r any) string { return r.(*fedschedv1.ExplainRequest).GetJobId() })},
	fedschedv1.SiteService_ListJobs_FullMethodName:          {users, checkList},
	fedschedv1.SiteService_WatchJobs_FullMethodName:         {users, checkWatch},
	fedschedv1.SiteService_GetJobOutput_FullMethodName:      {users, ownJob(func(r any) string { return r.(*fedschedv1.GetJobOutputRequest).GetJobId() })},
	fedschedv1.SiteService_GetSite_FullMethodName:           {everyone, nil},
	fedschedv1.SiteService_ListReservations_FullMethodName:  {users, nil},
	fedschedv1.SiteService_CreateReservation_FullMethodName: {operators, nil},
	fedschedv1.SiteService_DeleteReservation_FullMethodName: {operators, nil},
	// The plan shows a user its own jobs and only the processors and times
	// of the rest, like the status page (the node's SiteSnapshot.seenBy).
	fedschedv1.SiteService_GetPlan_FullMethodName: {users, nil},

	fedschedv1.FederationService_Quote_FullMethodName: {sites, func(c *call) error {
		return c.originIsCaller(c.req.(*fedschedv1.QuoteRequest).GetOriginSite())
	}},
	fedschedv1.FederationService_Agree_FullMethodName: {sites, func(c *call) error {
		return c.originIsCaller(c.req.(*fedschedv1.AgreeRequest).GetOriginSite())
	}},
	fedschedv1.FederationService_Release_FullMethodName: {sites, func(c *call) error {
		return c.counterpartyIsCaller(c.req.(*fedschedv1.ReleaseRequest).GetHoldId())
	}},
	// Operators may read agreements (they change nothing), to follow a
	// delegation; among sites, only the counterparty.
	fedschedv1.FederationService_GetAgreement_FullMethodName: {[]Kind{Site, Operator}, func(c *call) error {
		req := c.req.(*fedschedv1.GetAgreementRequest)
		if c.id.Kind == Operator {
			return nil
		}
		if req.GetOriginSite() != "" {
			if err := c.originIsCaller(req.GetOriginSite()); err != nil {
				return err
			}
		}
		if req.GetAgreementId() != "" {
			return c.counterpartyIsCaller(req.GetAgreementId())
		}
		return nil
	}},
	fedschedv1.FederationService_Terminate_FullMethodName: {sites, func(c *call) error {
		return c.counterpartyIsCaller(c.req.(*fedschedv1.TerminateRequest).GetAgreementId())
	}},
	fedschedv1.FederationService_ReportOutcome_FullMethodName: {sites, func(c *call) error {
		return c.counterpartyIsCaller(c.req.(*fedschedv1.ReportOutcomeRequest).GetAgreementId())
	}},
	fedschedv1.FederationService_ListMembers_FullMethodName: {everyone, nil},
	// A delegated job's output goes to its origin only.
	fedschedv1.FederationService_PeerJobOutput_FullMethodName: {sites, func(c *call) error {
		return c.originIsCaller(c.req.(*fedschedv1.PeerJobOutputRequest).GetOriginSite())
	}},
	// RQF: a site asks for another's waiting jobs, and to take one, only
	// in its own name (the site answers only if its operator opted in to
	// disclose its queue, which the node checks).
	fedschedv1.FederationService_PeerQueue_FullMethodName: {sites, func(c *call) error {
		return c.siteIsCaller("site", c.req.(*fedschedv1.PeerQueueRequest).GetSite())
	}},
	fedschedv1.FederationService_Take_FullMethodName: {sites, func(c *call) error {
		return c.siteIsCaller("site", c.req.(*fedschedv1.TakeRequest).GetSite())
	}},
}

// authorize decides one call: nil, or a PermissionDenied or
// Unauthenticated status.
func authorize(c *call) error {
	if c.id.Kind == Anonymous {
		return unauthenticated("%s: the caller has no fedsched identity (%s); present a certificate made by `fedsched tls cert create`", c.method, c.id.Via)
	}
	r, ok := policy[c.method]
	if !ok {
		return denied("%v may not call %s: the method is not in the site's policy", c.id, c.method)
	}
	if c.id.Kind != Insecure && !slices.Contains(r.who, c.id.Kind) {
		return denied("%v may not call %s: it needs the identity of %s", c.id, c.method, kindList(r.who))
	}
	if r.check == nil {
		return nil
	}
	return r.check(c)
}

func kindList(ks []Kind) string {
	s := ""
	for i, k := range ks {
		switch {
		case i == 0:
		case i == len(ks)-1:
			s += " or "
		default:
			s += ", "
		}
		if k == Operator {
			s += "an "
		} else {
			s += "a "
		}
		s += k.String()
	}
	return s
}

// acting reports whether the caller acts for everyone (operators and
// insecure callers) rather than for itself.
func (c *call) acting() bool { return c.id.Kind == Operator || c.id.Kind == Insecure }

// checkSubmit makes the job's user the caller: a user submits as itself
// (an empty user is filled in, another user is refused); operators and
// insecure callers may submit for anyone, themselves by default.
func checkSubmit(c *call) error {
	spec := c.req.(*fedschedv1.SubmitJobRequest).GetSpec()
	if spec == nil {
		return nil // the handler says what is missing
	}
	switch {
	case spec.GetUser() == "":
		spec.User = c.id.Name
	case spec.GetUser() != c.id.Name && !c.acting():
		return denied("%v may not submit a job as user %q: a user submits as itself", c.id, spec.GetUser())
	}
	return nil
}

func ownJob(idOf func(any) string) func(c *call) error {
	return func(c *call) error {
		if c.acting() {
			return nil
		}
		id := idOf(c.req)
		if id == "" {
			return nil // the handler refuses the empty id
		}
		owner, ok, err := c.r.JobOwner(c.ctx, id)
		if err != nil {
			return err
		}
		if ok && owner != c.id.Name {
			return denied("%v may not act on job %s: it belongs to another user", c.id, id)
		}
		return nil
	}
}

// checkList limits a user's listing to its own jobs.
func checkList(c *call) error {
	req := c.req.(*fedschedv1.ListJobsRequest)
	if c.acting() {
		return nil
	}
	switch req.GetUser() {
	case "":
		req.User = c.id.Name
	case c.id.Name:
	default:
		return denied("%v may not list the jobs of user %q", c.id, req.GetUser())
	}
	return nil
}

// checkWatch limits a user's watch to its own jobs.
func checkWatch(c *call) error {
	req := c.req.(*fedschedv1.WatchJobsRequest)
	if c.acting() {
		return nil
	}
	if req.GetJobId() != "" {
		if err := ownJob(func(any) string { return req.GetJobId() })(c); err != nil {
			return err
		}
	}
	switch req.GetUser() {
	case "":
		req.User = c.id.Name
	case c.id.Name:
	default:
		return denied("%v may not watch the jobs of user %q", c.id, req.GetUser())
	}
	return nil
}

// originIsCaller: a site speaks only for itself.
func (c *call) originIsCaller(origin string) error { return c.siteIsCaller("origin_site", origin) }

// siteIsCaller: the site a request's field names must be the caller.
func (c *call) siteIsCaller(field, site string) error {
	if c.id.Kind == Insecure || site == c.id.Name {
		return nil
	}
	return denied("%v may not speak for site %q: %s must be the caller's own name", c.id, site, field)
}

// counterpartyIsCaller: only the other side of an agreement may act on
// it. An agreement the site does not have passes (the handler answers
// NotFound).
func (c *call) counterpartyIsCaller(agreementID string) error {
	if c.id.Kind == Insecure || agreementID == "" {
		return nil
	}
	other, ok, err := c.r.Counterparty(c.ctx, agreementID)
	if err != nil {
		return err
	}
	if ok && other != c.id.Name {
		return denied("%v may not act on agreement %s: it is an agreement with site %s", c.id, agreementID, other)
	}
	return nil
}

func denied(format string, args ...any) error {
	return statusError(codePermissionDenied, fmt.Sprintf(format, args...))
}

func unauthenticated(format string, args ...any) error {
	return statusError(codeUnauthenticated, fmt.Sprintf(format, args...))
}
