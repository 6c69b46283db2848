package node

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/store"
)

// authorizer returns the server options every listener of the node has:
// the interceptors that authorize every call (auth.Interceptor, with the
// node answering its questions about jobs and agreements), one for all
// the listeners so that the watch limit counts every stream of an
// identity, and limits.max_message_bytes.
func (n *Node) authorizer() []grpc.ServerOption {
	n.authOnce.Do(func() {
		n.authz = auth.NewInterceptor(resolver{n}, auth.Options{MaxWatches: n.cfg.Limits.WithDefaults().MaxWatches})
	})
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(n.authz.Unary), grpc.ChainStreamInterceptor(n.authz.Stream),
		grpc.MaxRecvMsgSize(n.cfg.Limits.WithDefaults().MaxMessageBytes)}
}

// resolver implements auth.Resolver.
type resolver struct{ n *Node }

func (r resolver) JobOwner(ctx context.Context, id string) (string, bool, error) {
	rec, err := r.n.deps.Store.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, ToStatus(fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	return rec.Job.GetSpec().GetUser(), true, nil
}

func (r resolver) Counterparty(ctx context.Context, id string) (string, bool, error) {
	o := &counterpartyOp{id: id, reply: make(chan counterparty, 1)}
	if err := r.n.send(ctx, o); err != nil {
		return "", false, ToStatus(err)
	}
	c, err := await(ctx, r.n, o.reply)
	if err != nil {
		return "", false, ToStatus(err)
	}
	return c.site, c.ok, nil
}

type counterparty struct {
	site string
	ok   bool
}

// counterpartyOp asks the loop for the other site of an agreement (or a
// hold): the origin when this site executes, the peer when it delegated.
type counterpartyOp struct {
	id    string
	reply chan counterparty
}

func (o *counterpartyOp) run(n *Node, _ int64) func(error) {
	var c counterparty
	if a := n.agreements[o.id]; a != nil {
		c.ok = true
		c.site = a.Origin
		if a.Role == roleOrigin {
			c.site = a.Peer
		}
	}
	return func(error) { o.reply <- c }
}
