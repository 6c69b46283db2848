package auth

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

const (
	codePermissionDenied = codes.PermissionDenied
	codeUnauthenticated  = codes.Unauthenticated
)

func statusError(c codes.Code, msg string) error { return status.Error(c, msg) }

// ClaimedUserKey is the metadata key in which a client on plaintext TCP
// claims a user name (taken as is: --insecure is for development).
const ClaimedUserKey = "fedsched-user"

// Options of an Interceptor.
type Options struct {
	// MaxWatches bounds the open WatchJobs streams of one identity; 0
	// means no limit.
	MaxWatches int
	// NodeUID is the uid the node runs as: on the Unix socket it is an
	// operator, like root. Default: os.Getuid().
	NodeUID *int
}

// Interceptor authorizes every call of a gRPC server against the policy
// table. Make one with NewInterceptor and install both of its methods.
type Interceptor struct {
	r   Resolver
	opt Options
	uid int

	mu      sync.Mutex
	watches map[string]int
}

// NewInterceptor returns an Interceptor that asks r about jobs and
// agreements.
func NewInterceptor(r Resolver, opt Options) *Interceptor {
	uid := os.Getuid()
	if opt.NodeUID != nil {
		uid = *opt.NodeUID
	}
	return &Interceptor{r: r, opt: opt, uid: uid, watches: map[string]int{}}
}

// open reports whether a method needs no identity beyond a trusted
// transport: health checks and server reflection describe the server,
// nothing else.
func open(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/") || strings.HasPrefix(method, "/grpc.reflection.")
}

// Unary authorizes unary calls.
func (a *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if open(info.FullMethod) {
		return handler(ctx, req)
	}
	id := a.Identify(ctx)
	if err := authorize(&call{ctx: ctx, id: id, method: info.FullMethod, req: req, r: a.r}); err != nil {
		return nil, err
	}
	return handler(WithIdentity(ctx, id), req)
}

// Stream authorizes streaming calls on their first message, and bounds
// the open watches of each identity.
func (a *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if open(info.FullMethod) {
		return handler(srv, ss)
	}
	id := a.Identify(ss.Context())
	if id.Kind == Anonymous {
		return authorize(&call{id: id, method: info.FullMethod})
	}
	key := id.Kind.String() + "/" + id.Name
	if err := a.acquireWatch(id, key); err != nil {
		return err
	}
	defer a.releaseWatch(key)
	return handler(srv, &authStream{ServerStream: ss, a: a, id: id, method: info.FullMethod})
}

func (a *Interceptor) acquireWatch(id Identity, key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.opt.MaxWatches > 0 && a.watches[key] >= a.opt.MaxWatches {
		return status.Errorf(codes.ResourceExhausted, "%v has %d open watches, the most this site allows (limits.max_watches); close one first", id, a.watches[key])
	}
	a.watches[key]++
	return nil
}

func (a *Interceptor) releaseWatch(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watches[key]--; a.watches[key] <= 0 {
		delete(a.watches, key)
	}
}

// authStream authorizes a stream's first request when the handler reads
// it.
type authStream struct {
	grpc.ServerStream
	a      *Interceptor
	id     Identity
	method string
	seen   bool
}

func (s *authStream) Context() context.Context { return WithIdentity(s.ServerStream.Context(), s.id) }

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.seen {
		return nil
	}
	s.seen = true
	return authorize(&call{ctx: s.ServerStream.Context(), id: s.id, method: s.method, req: m, r: s.a.r})
}

// Identify returns who the caller of ctx is, from its transport.
func (a *Interceptor) Identify(ctx context.Context) Identity {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{Kind: Anonymous, UID: -1, Via: "no transport"}
	}
	switch ai := p.AuthInfo.(type) {
	case credentials.TLSInfo:
		chains := ai.State.VerifiedChains
		if len(chains) == 0 || len(chains[0]) == 0 {
			return Identity{Kind: Anonymous, UID: -1, Via: "tls without a verified certificate"}
		}
		id, err := FromCertificate(chains[0][0])
		if err != nil {
			return Identity{Kind: Anonymous, UID: -1, Via: err.Error()}
		}
		return id
	case PeerCred:
		return a.local(ai)
	case nil:
		return Identity{Kind: Insecure, Name: claimed(ctx), UID: -1, Via: ViaPlaintext}
	}
	if p.AuthInfo.AuthType() == "insecure" {
		return Identity{Kind: Insecure, Name: claimed(ctx), UID: -1, Via: ViaPlaintext}
	}
	return Identity{Kind: Anonymous, UID: -1, Via: "unknown transport " + p.AuthInfo.AuthType()}
}

// local names a caller on the Unix socket: root and the node's own uid are
// operators; every other uid is the user of its account name.
func (a *Interceptor) local(pc PeerCred) Identity {
	id := Identity{Kind: User, UID: int(pc.UID), Via: ViaUnix}
	if u, err := user.LookupId(strconv.Itoa(int(pc.UID))); err == nil {
		id.Name = u.Username
	}
	if pc.UID == 0 || int(pc.UID) == a.uid {
		id.Kind = Operator
	}
	if id.Name == "" || CheckName(id.Name) != nil {
		id.Kind, id.Via = Anonymous, fmt.Sprintf("uid %d on the local socket has no usable account name", pc.UID)
	}
	return id
}

func claimed(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(ClaimedUserKey); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

type idKey struct{}

// WithIdentity returns ctx carrying id, for handlers that need to know
// who calls (FromContext).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, idKey{}, id)
}

// FromContext returns the identity the Interceptor found for a call.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(idKey{}).(Identity)
	return id, ok
}
