package main

// The command-line client of a site node: submit, status, jobs, cancel,
// watch and explain talk to one node's SiteService over gRPC. This file
// holds what they share: the connection flags, dialing, per-call timeouts
// and error wrapping. The commands live in client_submit.go and
// client_jobs.go, the output formats in client_view.go, the argument
// parsers in client_parse.go.
//
// Errors: every failure is an error carrying a gRPC status, so that
// errorLine (main.go) prints "<Code>: <message>". Mistakes caught before any
// call (bad flags, a deadline before release + estimate, ...) are
// INVALID_ARGUMENT statuses made here (see invalidArg).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// addrEnv names the environment variable that sets the default of --addr.
const addrEnv = "FEDSCHED_ADDR"

// defaultCallTimeout bounds each call unless --timeout says otherwise.
const defaultCallTimeout = 10 * time.Second

// socketEnv names the environment variable that sets the default of
// --socket.
const socketEnv = "FEDSCHED_SOCKET"

// connFlags are the flags every client command has.
type connFlags struct {
	addr    string
	socket  string
	timeout durationValue
	json    bool
	// tls holds --tls-ca, --tls-cert and --tls-key: with a CA the client
	// verifies the node against it, and presents its own certificate to a
	// node that requires one (mutual TLS). Without any, plaintext.
	tls config.TLS
}

func (f *connFlags) register(cmd *cobra.Command, jsonHelp string) {
	f.timeout.d = defaultCallTimeout
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", config.DefaultListen, "HOST:PORT of the site node's API; $"+addrEnv+" overrides the default; without either, the local node's socket is used when it exists")
	fl.StringVar(&f.socket, "socket", filepath.Join(config.DefaultDataDir, config.SocketName), "the local node's Unix socket, used when --addr is not given (env "+socketEnv+")")
	fl.Var(&f.timeout, "timeout", "time limit of each call to the node (e.g. 10s, 1m); 0 for none")
	fl.BoolVar(&f.json, "json", false, jsonHelp)
	fl.StringVar(&f.tls.CA, "tls-ca", os.Getenv("FEDSCHED_TLS_CA"), "PEM CA the node's certificate must chain to; enables TLS (env FEDSCHED_TLS_CA)")
	fl.StringVar(&f.tls.Cert, "tls-cert", os.Getenv("FEDSCHED_TLS_CERT"), "PEM client certificate for nodes that require one (env FEDSCHED_TLS_CERT)")
	fl.StringVar(&f.tls.Key, "tls-key", os.Getenv("FEDSCHED_TLS_KEY"), "PEM private key of --tls-cert (env FEDSCHED_TLS_KEY)")
}

// target returns the node's address: --addr if given, else $FEDSCHED_ADDR,
// else the local node's Unix socket if it exists (--socket, $FEDSCHED_SOCKET,
// or the default data directory's), else the node's default listen address.
func (f *connFlags) target(cmd *cobra.Command) (string, error) {
	addr := f.addr
	if !cmd.Flags().Changed("addr") {
		if env := strings.TrimSpace(os.Getenv(addrEnv)); env != "" {
			addr = env
		} else if sock := f.socketPath(cmd); sock != "" {
			return sock, nil
		}
	}
	if strings.Contains(addr, "://") || strings.HasPrefix(addr, "unix:") {
		return addr, nil // a gRPC target URI, passed through
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return "", invalidArg("--addr %q: want HOST:PORT", addr)
	}
	return addr, nil
}

// socketPath returns the unix:// target of the local node's socket, or ""
// when there is none.
func (f *connFlags) socketPath(cmd *cobra.Command) string {
	p := f.socket
	if env := strings.TrimSpace(os.Getenv(socketEnv)); env != "" && !cmd.Flags().Changed("socket") {
		p = env
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
		if cmd.Flags().Changed("socket") {
			return "unix://" + p // asked for: its absence is the error to see
		}
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	return "unix://" + abs
}

// transportCredentials returns the credentials of the connection to the
// node: on the Unix socket none (the kernel tells the node who we are);
// TLS when --tls-ca is given (with the client certificate if --tls-cert
// is), verifying that the node is a site of the CA; plaintext otherwise.
func (f *connFlags) transportCredentials(target string) (credentials.TransportCredentials, error) {
	if strings.HasPrefix(target, "unix:") {
		return auth.UnixCredentials{}, nil
	}
	if f.tls.CA == "" {
		if f.tls.Cert != "" {
			return nil, invalidArg("--tls-cert needs --tls-ca to verify the node")
		}
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(f.tls.CA)
	if err != nil {
		return nil, invalidArg("--tls-ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, invalidArg("--tls-ca %s holds no PEM certificate", f.tls.CA)
	}
	var certs []tls.Certificate
	if f.tls.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.tls.Cert, f.tls.Key)
		if err != nil {
			return nil, invalidArg("--tls-cert/--tls-key: %v", err)
		}
		certs = []tls.Certificate{cert}
	}
	return credentials.NewTLS(auth.ClientConfig(pool, certs, "")), nil
}

// siteClient is a connection to one node.
type siteClient struct {
	rpc     fedschedv1.SiteServiceClient
	conn    *grpc.ClientConn
	addr    string
	timeout time.Duration
}

// dial validates the connection flags and makes a client. grpc connects
// lazily: an unreachable node shows up as UNAVAILABLE on the first call.
func (f *connFlags) dial(cmd *cobra.Command) (*siteClient, error) {
	if f.timeout.d < 0 {
		return nil, invalidArg("--timeout %v: must be >= 0", f.timeout.d)
	}
	addr, err := f.target(cmd)
	if err != nil {
		return nil, err
	}
	creds, err := f.transportCredentials(addr)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), claimUser())
	if err != nil {
		return nil, invalidArg("--addr %q: %v", addr, err)
	}
	return &siteClient{rpc: fedschedv1.NewSiteServiceClient(conn), conn: conn, addr: addr, timeout: f.timeout.d}, nil
}

func (c *siteClient) Close() { c.conn.Close() } //nolint:errcheck // nothing to do about it

// call runs one unary call under the per-call timeout and wraps its error.
func call[Resp any](ctx context.Context, c *siteClient, fn func(context.Context) (Resp, error)) (Resp, error) {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if c.timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	defer cancel()
	resp, err := fn(cctx)
	if err != nil {
		var zero Resp
		return zero, c.wrap(ctx, err, true)
	}
	return resp, nil
}

// wrap turns the error of a call into one that errors.Is matches against
// the node's sentinels (node.FromStatus) and whose message says which node
// could not be reached, when that is the problem. timed says the call ran
// under --timeout.
func (c *siteClient) wrap(parent context.Context, err error, timed bool) error {
	err = node.FromStatus(err)
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		// Our deadline travels with the call: the node may hit it a moment
		// before we do, so any DEADLINE_EXCEEDED under --timeout is ours.
		if timed && c.timeout > 0 && parent.Err() == nil {
			return &callError{msg: fmt.Sprintf("%s: no answer within %v (--timeout)", c.addr, formatDuration(c.timeout)), err: err}
		}
		return &callError{msg: c.addr + ": " + err.Error(), err: err}
	case codes.Unavailable:
		return &callError{msg: c.addr + ": " + err.Error(), err: err}
	}
	return err
}

// callError is the error of a call with a message of our own; its status
// (code) is that of the error it wraps.
type callError struct {
	msg string
	err error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }

// invalidArg is an error the client finds before calling: an
// INVALID_ARGUMENT status, printed like the node's own.
func invalidArg(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// usageArgs wraps a cobra positional-argument check so that its error is
// INVALID_ARGUMENT.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return invalidArg("%s: %v (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())
		}
		return nil
	}
}

// unary runs one call against the node and prints its answer: the JSON
// view with --json, the human view otherwise. It is the shape of every
// client command that makes a single call.
func unary[Resp any](cmd *cobra.Command, f *connFlags, rpc func(context.Context, *siteClient) (Resp, error),
	jsonView func(Resp) any, human func(io.Writer, Resp) error) error {
	c, err := f.dial(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := call(cmd.Context(), c, func(ctx context.Context) (Resp, error) { return rpc(ctx, c) })
	if err != nil {
		return err
	}
	if f.json {
		return emitJSON(cmd.OutOrStdout(), jsonView(resp))
	}
	return human(cmd.OutOrStdout(), resp)
}

// claimUser sends the OS user's name with every call: a node on plaintext
// TCP (--insecure, development only) takes it as the caller's identity;
// over TLS and the Unix socket the node ignores it.
func claimUser() grpc.DialOption {
	who := osUser()
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if who != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, auth.ClaimedUserKey, who)
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	})
}
