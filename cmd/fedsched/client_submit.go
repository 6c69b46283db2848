package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

type submitFlags struct {
	conn       connFlags
	procs      int32
	estimate   durationValue
	release    timeValue
	deadline   timeValue
	fee        float64
	penalty    float64
	user       string
	app        string
	simRuntime durationValue
	env        []string
	workdir    string
	output     string
	errput     string
	idemKey    string
}

func newSubmitCmd() *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit --procs N --estimate DURATION [flags] [SCRIPT [ARGS...] | -- COMMAND [ARGS...]]",
		Short: "Submit a job to a site and print the site's decision",
		Long: `Submit one rigid parallel job to a site node and print its id and the site's
decision: accepted (PENDING, with a reservation), DELEGATED to a peer, or
REJECTED with a reason. A rejected job is an answer, not an error: the exit
status is 0 and 'fedsched explain ID' tells why.

Durations: 90s, 2h, 1h30m, 2d. Times: RFC 3339 (2026-05-01T12:00:00Z), now,
or +DURATION relative to the site's current time (+2h, +90m); a site running
a simulated clock faster than real time is asked for its time first.

A job with --deadline is an SLA job (with --fee and --penalty); without one
it is best-effort. The command after '--' is what the site runs; the
simulated executor needs none (use --sim-runtime to say how long it
pretends to run).

Without '--', the first argument is a job script, sent to the site and run
there with the arguments that follow it. Lines '#FEDSCHED --procs 4
--estimate 1h' at its top (before the first line that is not a comment)
give options as the command line does; the command line wins. The job runs
in the directory you submit from unless --workdir says otherwise; its
output goes to --output/--error, or stays with the node ('fedsched logs').

Each call sends a fresh random idempotency key, so the site never accepts
the same call twice; to retry a call whose answer was lost, repeat it with
--idempotency-key and the key the failed call printed.`,
		Example: `  fedsched submit job.sh
  fedsched submit --procs 8 --output out-%j.txt job.sh input.dat
  fedsched submit --procs 4 --estimate 1h30m -- ./simulate --steps 100
  fedsched submit --procs 16 --estimate 2h --deadline +6h --fee 40 --penalty 20 --json -- ./run.sh`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runSubmit(cmd, &f, args) },
	}
	// The first positional argument starts the job's command: flags after
	// it belong to the command, with or without '--'.
	cmd.Flags().SetInterspersed(false)
	f.conn.register(cmd, "print the decision as a JSON object")
	registerJobFlags(cmd.Flags(), &f)
	cmd.Flags().StringVar(&f.idemKey, "idempotency-key", "", "idempotency key (default: a fresh random one per call; empty disables deduplication)")
	return cmd
}

// registerJobFlags registers the options of a job: the flags of submit
// that a script's #FEDSCHED lines may give too.
func registerJobFlags(fl *pflag.FlagSet, f *submitFlags) {
	fl.Int32Var(&f.procs, "procs", 0, "processors the job occupies for its whole run (required, >= 1)")
	fl.Var(&f.estimate, "estimate", "runtime estimate (required, > 0; whole seconds), e.g. 90s, 2h, 1h30m, 2d")
	fl.Var(&f.release, "release", "earliest start: RFC 3339 or +DURATION (default: now)")
	fl.Var(&f.deadline, "deadline", "latest end: RFC 3339 or +DURATION (default: none, best-effort)")
	fl.Float64Var(&f.fee, "fee", 0, "virtual coins paid to the site when the SLA is met (>= 0)")
	fl.Float64Var(&f.penalty, "penalty", 0, "virtual coins the site owes when it violates the SLA (>= 0)")
	fl.StringVar(&f.user, "user", "", "user the job runs for (default: the caller's identity; another user needs an operator)")
	fl.StringVar(&f.app, "app", "", "application name (jobs of one user and app form a class for runtime statistics)")
	fl.Var(&f.simRuntime, "sim-runtime", "simulated executor only: how long the job actually runs (default: the estimate)")
	fl.StringArrayVar(&f.env, "env", nil, "KEY=VALUE of the job's environment (repeatable; the node's own is not inherited)")
	fl.StringVar(&f.workdir, "workdir", "", "working directory of the job on the executing host (default: the directory you submit from)")
	fl.StringVar(&f.output, "output", "", "file for the job's standard output on the executing host; %j: job id, %u: user, %%: % (default: kept by the node, read with 'fedsched logs')")
	fl.StringVar(&f.errput, "error", "", "file for the job's standard error, with the patterns of --output (default: --output's file if given)")
}

// submitJSON is the --json output of submit: the job and whether the answer
// replays an earlier submission.
type submitJSON struct {
	jobJSON
	Replayed       bool   `json:"replayed"`
	IdempotencyKey string `json:"idempotency_key"`
}

// maxIdempotencyKey is the API's limit on the key's length, in bytes.
const maxIdempotencyKey = 128

func runSubmit(cmd *cobra.Command, f *submitFlags, command []string) error {
	// Without '--' the first argument is a job script (its arguments
	// follow); with it, a command.
	var script []byte
	if len(command) > 0 && cmd.ArgsLenAtDash() != 0 {
		var err error
		if script, err = applyDirectives(cmd, command[0]); err != nil {
			return err
		}
		command = command[1:]
	}
	spec, err := f.spec(command)
	if err != nil {
		return err
	}
	spec.Script = script
	if spec.Workdir == "" {
		// The submit directory, as batch systems do. The executing host
		// must have it (a shared file system); see docs/operations.md.
		if wd, err := os.Getwd(); err == nil {
			spec.Workdir = wd
		}
	}
	key := f.idemKey
	if !cmd.Flags().Changed("idempotency-key") {
		if key, err = newIdempotencyKey(); err != nil {
			return status.Errorf(codes.Internal, "idempotency key: %v", err)
		}
	} else if len(key) > maxIdempotencyKey {
		return invalidArg("--idempotency-key: %d bytes, at most %d", len(key), maxIdempotencyKey)
	}
	c, err := f.conn.dial(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	if err := f.times(ctx, c, spec); err != nil {
		return err
	}
	resp, err := call(ctx, c, func(ctx context.Context) (*fedschedv1.SubmitJobResponse, error) {
		return c.rpc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: key, Spec: spec})
	})
	if err != nil {
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			if key != "" {
				// The site may have decided before the answer was lost; the
				// same key gets that answer instead of a second job.
				return &callError{msg: err.Error() + " (retry safely with --idempotency-key " + key + ")", err: err}
			}
		}
		return err
	}
	w := cmd.OutOrStdout()
	if f.conn.json {
		return emitJSON(w, submitJSON{jobJSON: jobView(resp.GetJob()), Replayed: resp.GetReplayed(), IdempotencyKey: key})
	}
	if err := printJob(w, resp.GetJob()); err != nil {
		return err
	}
	if resp.GetReplayed() {
		k := newKV(w)
		k.add("replayed", "yes: the answer to an earlier submission with idempotency key %s", key)
		return k.flush()
	}
	return nil
}

// spec checks the flags that need no call and builds the spec, times aside.
func (f *submitFlags) spec(command []string) (*fedschedv1.JobSpec, error) {
	if f.procs < 1 {
		return nil, invalidArg("--procs must be >= 1, got %d", f.procs)
	}
	if f.estimate.d <= 0 {
		return nil, invalidArg("--estimate must be > 0 (e.g. 90s, 2h, 1h30m, 2d), got %s", formatDuration(f.estimate.d))
	}
	est, err := wholeSeconds(f.estimate.d)
	if err != nil {
		return nil, invalidArg("--estimate: %v", err)
	}
	if f.simRuntime.d < 0 {
		return nil, invalidArg("--sim-runtime must be >= 0, got %s", formatDuration(f.simRuntime.d))
	}
	simRuntime, err := wholeSeconds(f.simRuntime.d)
	if err != nil {
		return nil, invalidArg("--sim-runtime: %v", err)
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"--fee", f.fee}, {"--penalty", f.penalty}} {
		if !(m.v >= 0) || math.IsInf(m.v, 0) {
			return nil, invalidArg("%s must be a finite number >= 0, got %v", m.name, m.v)
		}
	}
	env, err := parseEnv(f.env)
	if err != nil {
		return nil, invalidArg("%v", err)
	}
	// The job's user is who the node authenticates (certificate, or uid on
	// the local socket); --user only asks for someone else, which only
	// operators may.
	who := f.user
	return &fedschedv1.JobSpec{
		Procs: f.procs, EstimateSeconds: est, Fee: f.fee, Penalty: f.penalty, User: who, App: f.app,
		Command: command, Env: env, Workdir: f.workdir, SimRuntimeSeconds: simRuntime, Output: f.output, Error: f.errput,
	}, nil
}

// times resolves --release and --deadline into spec and checks that the
// deadline leaves room for the estimate. Relative times count from the
// site's clock, which a simulated site runs faster than the wall clock.
func (f *submitFlags) times(ctx context.Context, c *siteClient, spec *fedschedv1.JobSpec) error {
	rel, dl := f.release.t, f.deadline.t
	if !rel.set && !dl.set {
		return nil
	}
	est := time.Duration(spec.GetEstimateSeconds()) * time.Second
	if dl.rel && (!rel.set || rel.rel) && dl.offset-rel.offset < est {
		// Both count from the same "now": no need to ask the site for it.
		return invalidArg("deadline is before release + estimate: deadline %s < release %s + estimate %s",
			f.deadline.raw, orDefault(f.release.raw, "now"), formatDuration(est))
	}
	now := time.Now()
	if rel.rel || dl.rel {
		var err error
		if now, err = siteNow(ctx, c); err != nil {
			return err
		}
	}
	release := now
	if rel.set {
		release = rel.resolve(now)
		ts := timestamppb.New(release)
		if err := ts.CheckValid(); err != nil {
			return invalidArg("--release %s: out of range", f.release.raw)
		}
		spec.Release = ts
	}
	if dl.set {
		deadline := dl.resolve(now)
		ts := timestamppb.New(deadline)
		if err := ts.CheckValid(); err != nil {
			return invalidArg("--deadline %s: out of range", f.deadline.raw)
		}
		if deadline.Before(release.Add(est)) {
			return invalidArg("deadline is before release + estimate: deadline %s < release %s + estimate %s",
				deadline.Format(time.RFC3339), release.Format(time.RFC3339), formatDuration(est))
		}
		spec.Deadline = ts
	}
	return nil
}

// siteNow is the site's current time by its own clock; the local clock if
// the node does not tell.
func siteNow(ctx context.Context, c *siteClient) (time.Time, error) {
	resp, err := call(ctx, c, func(ctx context.Context) (*fedschedv1.GetSiteResponse, error) {
		return c.rpc.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	})
	if status.Code(err) == codes.Unimplemented {
		return time.Now(), nil
	}
	if err != nil {
		return time.Time{}, err
	}
	if ts := resp.GetSite().GetNow(); ts != nil && ts.CheckValid() == nil {
		return ts.AsTime(), nil
	}
	return time.Now(), nil
}

// newIdempotencyKey is 128 bits in hex, ordered by time as a UUIDv7 is:
// the milliseconds since the epoch (48 bits), then 80 random bits. A site
// keeps the keys in a B+tree; keys made in time order go to its
// right-most leaves, so a commit of many submissions writes fewer pages
// than random keys make it write (node/store BenchmarkSubmitCommit:
// keys=time against keys=random). 80 random bits keep keys made in one
// millisecond apart.
func newIdempotencyKey() (string, error) {
	return idempotencyKeyAt(time.Now())
}

func idempotencyKeyAt(t time.Time) (string, error) {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// osUser is the name of the user running the CLI, or "".
func osUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
