package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fedsched/fedsched/delegation"
)

// Config is the configuration of one site node.
type Config struct {
	// Site is the site's name, unique in the federation; it prefixes the
	// site's job ids. Letters, digits, '.', '-' and '_', at most 63, starting
	// with a letter or digit. Default: the host name. Empty is invalid.
	Site string `yaml:"site"`

	// DataDir holds the node's state: the store file (fedsched.db) and the
	// jobs' directories (jobs/<id>/). Created if missing. Default:
	// ./fedsched-data. Empty is invalid.
	DataDir string `yaml:"data_dir"`

	// Listen is the host:port the gRPC API listens on. Default:
	// 127.0.0.1:7070 (local users only); use :7070 or 0.0.0.0:7070 to serve
	// other hosts, with TLS. Port 0 picks a free port (tests). Empty is
	// invalid.
	Listen string `yaml:"listen"`

	// Procs is the number of identical processors the site schedules.
	// Default: the number of CPUs of this host; with the slurm executor,
	// the CPUs of its partition (0 after Resolve: read from sinfo at
	// start). Must be >= 1 otherwise.
	Procs int `yaml:"procs"`

	// Executor runs the jobs: "process" (real local processes),
	// "simulated" (jobs pretend to run for their sim_runtime_seconds or
	// estimate) or "slurm" (jobs are Slurm batch jobs; see Slurm).
	// Default: process. Empty is invalid.
	Executor string `yaml:"executor"`

	// Slurm configures the slurm executor.
	Slurm Slurm `yaml:"slurm"`

	// TimeScale is how many times faster than the wall clock the site's
	// clock runs: 60 makes a virtual hour pass in a minute. Only the
	// simulated executor can run faster than real time. Default: 1. Must be
	// > 0; the process executor requires 1.
	TimeScale float64 `yaml:"time_scale"`

	// Policy is the queue policy of the plan: "conservative" (conservative
	// backfilling), "easy" (EASY backfilling), "fcfs" or "list". Default:
	// conservative. Empty is invalid.
	Policy string `yaml:"policy"`

	// KillGrace is how long a job gets between SIGTERM and SIGKILL when it
	// is killed (end of reservation, cancel). YAML: a Go duration such as
	// "10s". Default: 10s. 0 means the executor's default (10s); negative is
	// invalid.
	KillGrace time.Duration `yaml:"kill_grace"`

	// Overbooking configures SLA admission into gaps shorter than a job's
	// estimate.
	Overbooking Overbooking `yaml:"overbooking"`

	// Gossip configures membership in a federation. The zero value (the
	// default) runs the site alone.
	Gossip Gossip `yaml:"gossip"`

	// Delegation tunes the delegation protocol (used with Gossip).
	Delegation Delegation `yaml:"delegation"`

	// TLS configures transport security of the gRPC API and of peer
	// connections: mutual TLS with identities in the certificates
	// (`fedsched tls`). Without it the node serves TCP only with Insecure;
	// its Unix socket always works.
	TLS TLS `yaml:"tls"`

	// Insecure lets the node serve plaintext TCP (gRPC and gossip) without
	// certificates and gossip key, on loopback addresses only: callers are
	// trusted as they claim (development and tests). Logged as a warning
	// at every start. Default: false.
	Insecure bool `yaml:"insecure"`

	// Socket is the path of the node's Unix socket, where local users are
	// identified by their uid (SO_PEERCRED) and need no certificate.
	// Default: empty, meaning fedsched.sock in the data directory (so that
	// several nodes on one host never collide).
	Socket string `yaml:"socket"`

	// Jobs says whose account jobs run under (the executor field's
	// mapping form, see Parse).
	Jobs Jobs `yaml:"-" config:"executor"`

	// Limits bound what one caller can make the node hold.
	Limits Limits `yaml:"limits"`
	// HTTP configures the node's HTTP listener: Prometheus metrics at
	// /metrics and the status page at /. Off by default.
	HTTP HTTP `yaml:"http"`

	// Log configures what the node logs and how (docs/metrics.md).
	Log Log `yaml:"log"`

	// Store configures the node's store: the write-ahead log in front of
	// its bbolt file (docs/operations.md, "The store and its log").
	Store Store `yaml:"store"`
}

// Store configures the node's store.
type Store struct {
	// Log puts a write-ahead log (data_dir/wal/) in front of the bbolt
	// file: a change is durable after one append and one fdatasync of the
	// log, and a checkpointer writes batches of changes to the file.
	// false writes every change to the file itself (two fsyncs per
	// change). Default: true.
	Log bool `yaml:"log"`
	// CheckpointRecords: the log is written to the file once it holds this
	// many records (one per group commit of the node). Default: 1024.
	CheckpointRecords int `yaml:"checkpoint_records"`
	// CheckpointBytes: ... or this many bytes. Default: 16 MiB.
	CheckpointBytes int `yaml:"checkpoint_bytes"`
	// CheckpointInterval: ... or when this much time has passed, whichever
	// comes first. Default: 1s.
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
}

// HTTP is the configuration of the metrics and status-page listener.
type HTTP struct {
	// Listen is the host:port of the HTTP listener. Default: empty, which
	// turns it off (several nodes on one host would otherwise fight over
	// one default port). Use 127.0.0.1:PORT for local operators only; with
	// tls.cert set the listener serves HTTPS with the API's certificate and
	// client-certificate policy.
	Listen string `yaml:"listen"`
}

// Log is the configuration of the node's log.
type Log struct {
	// Format is "text" (logfmt-like key=value lines) or "json" (one JSON
	// object per line, every line, start-up warnings included). Default:
	// text.
	Format string `yaml:"format"`
	// Level is the lowest level written: debug, info, warn or error.
	// Default: info.
	Level string `yaml:"level"`
}

// Slurm configures the slurm executor, which uses the Slurm client
// commands on PATH with the environment's SLURM_CONF.
type Slurm struct {
	// Partition is the Slurm partition fedsched owns and submits to; it
	// should be dedicated to fedsched (docs/slurm.md). Default: the
	// cluster's default partition.
	Partition string `yaml:"partition"`

	// PollInterval is how often the node asks Slurm about its jobs (one
	// squeue for all of them) and its partition's nodes (one sinfo).
	// Default: 2s. Must be >= 100ms.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// Jobs configures the accounts jobs run under. In YAML it is written in
// the mapping form of the executor field:
//
//	executor:
//	  kind: process
//	  allow_root: false
//	  service_account: fedsched-jobs
type Jobs struct {
	// AllowRoot is the operator's explicit consent to run jobs as root
	// (user root, or every job when the node runs as root and cannot
	// switch users). Default: false: such jobs are refused.
	AllowRoot bool `yaml:"allow_root"`
	// ServiceAccount is the local account that jobs of users without a
	// local account of their own run as (remote users, mostly). Default:
	// empty: such jobs are refused when the node runs as root.
	ServiceAccount string `yaml:"service_account"`
}

// Limits against a caller that asks for too much. 0 means the default;
// a negative value is invalid.
type Limits struct {
	// MaxMessageBytes is the largest gRPC message the node receives.
	// Default: 4 MiB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// MaxPendingJobs is how many PENDING jobs one user may have at this
	// site. Default: 10000.
	MaxPendingJobs int `yaml:"max_pending_jobs"`
	// MaxWatches is how many WatchJobs streams one identity may hold open.
	// Default: 64.
	MaxWatches int `yaml:"max_watches"`
	// MaxIdempotencyKeys is how many idempotency keys of one user the
	// store remembers at a time (keys are kept 25 hours, then pruned).
	// Default: 10000.
	MaxIdempotencyKeys int `yaml:"max_idempotency_keys"`
}

// Defaults of Limits.
const (
	DefaultMaxMessageBytes = 4 << 20
	DefaultMaxPendingJobs  = 10000
	DefaultMaxWatches      = 64
	// DefaultMaxIdempotencyKeys bounds the cost of the check too: counting
	// 10000 keys of one user takes about 0.12 ms (BenchmarkCountIdempotencyKeys).
	DefaultMaxIdempotencyKeys = 10000
)

// WithDefaults returns l with its zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxMessageBytes == 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxPendingJobs == 0 {
		l.MaxPendingJobs = DefaultMaxPendingJobs
	}
	if l.MaxWatches == 0 {
		l.MaxWatches = DefaultMaxWatches
	}
	if l.MaxIdempotencyKeys == 0 {
		l.MaxIdempotencyKeys = DefaultMaxIdempotencyKeys
	}
	return l
}

// SocketPath returns Socket, or its default in the data directory.
func (c Config) SocketPath() string {
	if c.Socket != "" {
		return c.Socket
	}
	return filepath.Join(c.DataDir, SocketName)
}

// SocketName is the file name of the node's Unix socket in its data
// directory.
const SocketName = "fedsched.sock"

// Overbooking is the SLA admission configuration; the overbook package
// interprets it (overbook.Admission and its Test).
type Overbooking struct {
	// Enabled lets the site accept SLA jobs into gaps shorter than their
	// estimate. Default: false (every accepted job gets its full estimate).
	Enabled bool `yaml:"enabled"`

	// Mode is how the probability of failure (PoF) of a placement is
	// computed: "heuristic" (the job's own runtime distribution at the gap
	// length) or "comprehensive" (also counts on the jobs planned before it
	// ending early). Default: heuristic. Empty is invalid.
	Mode string `yaml:"mode"`

	// RiskTest is the acceptance test of an overbooked placement:
	// "threshold" accepts when PoF < pof_max (overbook.Threshold); "risk"
	// accepts when (1 - PoF) x fee > PoF x penalty x security_factor
	// (overbook.Risk). Default: threshold. Empty is invalid.
	RiskTest string `yaml:"risk_test"`

	// PoFMax is the threshold test's highest acceptable PoF, in [0, 1].
	// Default: 0.1. 0 accepts no overbooked placement.
	PoFMax float64 `yaml:"pof_max"`

	// SecurityFactor weighs the penalty in the risk test. Default: 0, which
	// means the mode's default: 2 for heuristic, 4 for comprehensive. Must
	// be >= 0.
	SecurityFactor float64 `yaml:"security_factor"`

	// MinSamples is the (aged) number of runtime samples the statistics of
	// a job's class (or the general statistics it falls back to) must hold
	// before the job may be overbooked. Default: 100 (docs/overbooking.md
	// says why); 0 means the default. Must be >= 0.
	MinSamples float64 `yaml:"min_samples"`

	// History is an SWF file of the site's past jobs that seeds the
	// runtime statistics when the site has learnt nothing yet (its first
	// start). Default: empty (start from no samples: nothing is overbooked
	// until min_samples jobs have ended).
	History string `yaml:"history"`

	// AgeFactor and AgeEvery age the statistics: after every AgeEvery
	// learnt jobs, every sample's weight is multiplied by AgeFactor, so the
	// statistics remember about AgeEvery/(1-AgeFactor) jobs. Default: 0.9
	// and 100 (about the last 1,000 jobs); 0 means the default. AgeFactor 1
	// never forgets. AgeFactor must be in [0, 1], AgeEvery >= 0, and
	// together they must keep at least min_samples of weight.
	AgeFactor float64 `yaml:"age_factor"`
	AgeEvery  int     `yaml:"age_every"`
}

// validateLearning checks the settings of the runtime statistics.
func (o Overbooking) validateLearning(bad func(path, format string, args ...any)) {
	ms, f, k := o.Learning()
	switch {
	case !(ms > 0) || math.IsInf(ms, 0):
		bad("overbooking.min_samples", "must be a finite number >= 0 (0: %d), got %v", DefaultMinSamples, o.MinSamples)
	case !(f > 0 && f <= 1):
		bad("overbooking.age_factor", "must be in [0, 1] (0: %v), got %v", DefaultAgeFactor, o.AgeFactor)
	case k < 1:
		bad("overbooking.age_every", "must be >= 0 (0: %d), got %d", DefaultAgeEvery, o.AgeEvery)
	case f < 1 && float64(k)*f/(1-f) < ms:
		// Right after an ageing step the statistics weigh k·f/(1−f).
		bad("overbooking.age_factor", "with age_every %d the statistics keep only %.1f samples of weight, fewer than min_samples %g: nothing would ever be overbooked; raise age_factor or age_every", k, float64(k)*f/(1-f), ms)
	}
}

// Learning returns MinSamples, AgeFactor and AgeEvery with the defaults in
// place of zeros.
func (o Overbooking) Learning() (minSamples, ageFactor float64, ageEvery int) {
	minSamples, ageFactor, ageEvery = o.MinSamples, o.AgeFactor, o.AgeEvery
	if minSamples == 0 {
		minSamples = DefaultMinSamples
	}
	if ageFactor == 0 {
		ageFactor = DefaultAgeFactor
	}
	if ageEvery == 0 {
		ageEvery = DefaultAgeEvery
	}
	return minSamples, ageFactor, ageEvery
}

// EffectiveSecurityFactor returns SecurityFactor, or the mode's default when
// it is 0.
func (o Overbooking) EffectiveSecurityFactor() float64 {
	switch {
	case o.SecurityFactor != 0:
		return o.SecurityFactor
	case o.Mode == "comprehensive":
		return 4
	}
	return 2
}

// Delegation tunes how a federated site delegates and takes remote work.
// Zero values mean the defaults given here.
type Delegation struct {
	// MaxCandidates is how many peers are asked for quotes in parallel.
	// Default 3.
	MaxCandidates int `yaml:"max_candidates"`
	// QuoteTimeout bounds one quote round trip; SubmitJob answers within
	// about twice this. Default 2s.
	QuoteTimeout time.Duration `yaml:"quote_timeout"`
	// HoldSeconds is how long a quote's hold lasts, in the site's clock.
	// Default 60.
	HoldSeconds int `yaml:"hold_seconds"`
	// MaxHops limits how often one job is delegated: 0 or 1 (0 means 1).
	// Values above 1 are refused: no site offers on a job it received.
	MaxHops int `yaml:"max_hops"`
	// CommunityShare is the share of processors, in [0, 1), a site keeps
	// for its own users: remote jobs are not quoted into slots that would
	// leave less free. Default 0.
	CommunityShare float64 `yaml:"community_share"`
	// Transfer is the transfer policy: "on-reject" (offer to peers only
	// the jobs local admission rejects) or "acf" (also offer, right after
	// accepting it, every job the site's own policy would not start now; a
	// peer quotes only if its own policy would start it now, and the job
	// stays here if none does) or "rqf" (push nothing; while processors
	// are idle and nothing waits here, pull from the queues of peers that
	// disclose them the waiting jobs this site's own policy would start
	// now). Default: on-reject.
	Transfer string `yaml:"transfer"`
	// DiscloseQueue lets peers ask for the jobs waiting here (their
	// specs, users included) and take those they would start now (RQF).
	// An operator's opt-in: off, the site refuses every queue request.
	// Default: false.
	DiscloseQueue bool `yaml:"disclose_queue"`
	// PullInterval is RQF's interval, in the site's clock (scaled by
	// time_scale): an RQF site with idle processors and nothing waiting
	// asks its peers for their queues at most once per interval when
	// something happens to it, and by itself at every whole multiple of
	// the interval on its clock while it stays idle; the simulator's
	// agent runs the same rule (site.PullDue, site.NextPull). Only with
	// transfer: rqf; whole seconds. Default 60s.
	PullInterval time.Duration `yaml:"pull_interval"`
	// Prefer lists peers in preference order (ordered spill-over): each is
	// asked alone, in turn, before the location policy ranks the others,
	// who are asked only when no preferred peer offers. Default: none.
	Prefer []string `yaml:"prefer"`
	// Pricing prices this site's quotes to peers. Default: free.
	Pricing Pricing `yaml:"pricing"`
}

// Pricing is the price model of a site's quotes (docs/protocol.md).
type Pricing struct {
	// Model is "free" (every quote costs 0) or "libra+$" (Yeo's price:
	// per processor-hour alpha·pbase + beta·pbase·RESMax/RESFree over the
	// job's window; a job whose fee is below the price is refused).
	// Default: free.
	Model string `yaml:"model"`
	// PBase is the base price, in virtual coins per processor-hour.
	PBase float64 `yaml:"pbase"`
	// Alpha and Beta weigh the static and the utilisation part.
	Alpha float64 `yaml:"alpha"`
	Beta  float64 `yaml:"beta"`
}

// Gossip is the federation membership configuration.
type Gossip struct {
	// Addr is the host:port this node gossips on. Default: empty, which
	// turns federation off.
	Addr string `yaml:"addr"`

	// Advertise is the host:port of this site's gRPC API that peers should
	// dial. Default: empty, meaning Listen.
	Advertise string `yaml:"advertise"`

	// Join lists host:port gossip addresses of peers to join at start.
	// Default: empty (wait to be joined). Requires Addr.
	Join []string `yaml:"join"`

	// Key is a file of gossip encryption keys (`fedsched tls gossip-key`):
	// one base64 key per line, the first encrypts, the others are accepted
	// too (rotation, see docs/security.md). Required with Addr unless
	// Insecure.
	Key string `yaml:"key"`
}

// TLS names PEM files. Paths are used as given (relative to the node's
// working directory).
type TLS struct {
	// Cert is the certificate of this node. Default: empty (plaintext).
	// Requires Key.
	Cert string `yaml:"cert"`
	// Key is the private key of Cert. Default: empty. Requires Cert.
	Key string `yaml:"key"`
	// CA is the certificate authority that client and peer certificates
	// must chain to (mutual TLS). Default: empty (clients are not
	// authenticated). Requires Cert and Key.
	CA string `yaml:"ca"`
}

// Defaults that do not depend on the host.
const (
	DefaultDataDir   = "./fedsched-data"
	DefaultListen    = "127.0.0.1:7070"
	DefaultExecutor  = ExecutorProcess
	DefaultTimeScale = 1.0
	DefaultPolicy    = "conservative"
	DefaultKillGrace = 10 * time.Second
	// DefaultSlurmPollInterval matches executor.DefaultSlurmPollInterval.
	DefaultSlurmPollInterval = 2 * time.Second
	DefaultOverbookMode      = "heuristic"
	DefaultRiskTest          = "threshold"
	DefaultPoFMax            = 0.1
	DefaultMinSamples        = 100
	DefaultAgeFactor         = 0.9
	DefaultAgeEvery          = 100
	DefaultLogFormat         = "text"
	DefaultLogLevel          = "info"
)

// Executor kinds.
const (
	ExecutorProcess   = "process"
	ExecutorSimulated = "simulated"
	ExecutorSlurm     = "slurm"
)

// Accepted values of the enumerated fields.
var (
	executors  = []string{ExecutorProcess, ExecutorSimulated, ExecutorSlurm}
	policies   = []string{"conservative", "easy", "fcfs", "list"}
	modes      = []string{"heuristic", "comprehensive"}
	riskTests  = []string{"threshold", "risk"}
	logFormats = []string{"text", "json"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// Default returns the configuration a node runs with when nothing is given.
// Site is the host name ("site" if it cannot be read) and Procs the number
// of CPUs.
func Default() Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "site"
	}
	return Config{
		Site:      host,
		DataDir:   DefaultDataDir,
		Listen:    DefaultListen,
		Procs:     runtime.NumCPU(),
		Executor:  DefaultExecutor,
		TimeScale: DefaultTimeScale,
		Policy:    DefaultPolicy,
		KillGrace: DefaultKillGrace,
		Slurm:     Slurm{PollInterval: DefaultSlurmPollInterval},
		Store:     Store{Log: true},
		Overbooking: Overbooking{
			Mode:       DefaultOverbookMode,
			RiskTest:   DefaultRiskTest,
			PoFMax:     DefaultPoFMax,
			MinSamples: DefaultMinSamples,
			AgeFactor:  DefaultAgeFactor,
			AgeEvery:   DefaultAgeEvery,
		},
		Log: Log{Format: DefaultLogFormat, Level: DefaultLogLevel},
	}
}

// Load returns Default() overlaid with the YAML file at path. It does not
// validate.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse returns Default() overlaid with a YAML document. Fields the document
// does not mention keep their defaults; unknown fields are an error. An
// empty document is the defaults. It does not validate.
func Parse(data []byte) (c Config, err error) {
	c = Default()
	// yaml.v3 has panicked on hostile input before; a config file must
	// never crash the node.
	defer func() {
		if r := recover(); r != nil {
			c, err = Config{}, fmt.Errorf("yaml: %v: %w", r, ErrInvalid)
		}
	}()
	if data, err = executorMapping(data, &c); err != nil {
		return Config{}, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("more than one YAML document: %w", ErrInvalid)
	}
	return c, nil
}

// Validate checks every field and returns all problems, joined; each wraps
// ErrInvalid and names its field by YAML path.
func (c Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", path, fmt.Sprintf(format, args...), ErrInvalid))
	}
	d := c.Delegation
	switch {
	case d.MaxCandidates < 0:
		bad("delegation.max_candidates", "must be >= 0")
	case d.QuoteTimeout < 0:
		bad("delegation.quote_timeout", "must be >= 0")
	case d.HoldSeconds < 0:
		bad("delegation.hold_seconds", "must be >= 0")
	case d.MaxHops < 0 || d.MaxHops > 1:
		bad("delegation.max_hops", "must be 0 or 1 (0 means 1), got %d: a site never offers on a job it received (under ACF it starts at once, under on-reject it holds its quoted slot), so a job is delegated at most once and a higher limit would have no effect", d.MaxHops)
	case !(d.CommunityShare >= 0 && d.CommunityShare < 1):
		bad("delegation.community_share", "must be in [0, 1)")
	}
	// The node's own parser (node/launch.go) decides, so that what is
	// accepted here is what runs.
	p := d.Pricing
	switch pr, err := delegation.ParsePricing(p.Model, delegation.LibraPlus{PBase: p.PBase, Alpha: p.Alpha, Beta: p.Beta}); {
	case err != nil:
		bad("delegation.pricing", "%v", err)
	case d.Transfer == "rqf" && pr != (delegation.Free{}):
		bad("delegation.pricing", "an rqf site makes no quotes, so nothing carries a price; leave pricing out or use on-reject or acf")
	}
	switch d.Transfer {
	case "", "on-reject", "acf":
		if d.PullInterval != 0 && c.Gossip.Addr != "" {
			bad("delegation.pull_interval", "only an rqf site pulls; set delegation.transfer: rqf or leave pull_interval out")
		}
	case "rqf":
		if len(d.Prefer) > 0 {
			bad("delegation.prefer", "an rqf site offers no job to peers, so it has no peer to prefer; leave prefer out or use on-reject or acf")
		}
	case "efs":
		bad("delegation.transfer", "efs (the federation study's fuzzy transfer policy with trained rule bases) runs only in the simulator so far (scenario transfer: efs); use on-reject, acf or rqf")
	default:
		bad("delegation.transfer", "%q: want on-reject, acf or rqf", d.Transfer)
	}
	if d.PullInterval < 0 || d.PullInterval%time.Second != 0 {
		bad("delegation.pull_interval", "must be a whole number of seconds >= 0 (the site's clock counts whole seconds)")
	}
	for _, p := range d.Prefer {
		if !validSite(p) || p == c.Site {
			bad("delegation.prefer", "%q must be the name of another site", p)
		}
	}
	if !validSite(c.Site) {
		bad("site", "%q must be 1 to 63 letters, digits, '.', '-' or '_', starting with a letter or digit", c.Site)
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	if err := checkHostPort(c.Listen); err != nil {
		bad("listen", "%v", err)
	}
	if c.Procs < 1 && !(c.Procs == 0 && c.Executor == ExecutorSlurm) {
		bad("procs", "must be >= 1, got %d", c.Procs)
	}
	if c.Slurm.Partition != "" && c.Executor != ExecutorSlurm {
		bad("slurm.partition", "needs executor slurm (the %s executor does not use Slurm)", c.Executor)
	}
	if c.Slurm.PollInterval != DefaultSlurmPollInterval && c.Executor != ExecutorSlurm {
		bad("slurm.poll_interval", "needs executor slurm (the %s executor does not use Slurm)", c.Executor)
	} else if c.Slurm.PollInterval < 100*time.Millisecond {
		bad("slurm.poll_interval", "must be >= 100ms, got %v", c.Slurm.PollInterval)
	}
	if !slices.Contains(executors, c.Executor) {
		bad("executor", "%q is not one of %s", c.Executor, strings.Join(executors, ", "))
	}
	switch {
	case !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0):
		bad("time_scale", "must be a finite number > 0, got %v", c.TimeScale)
	case c.TimeScale != 1 && c.Executor != ExecutorSimulated:
		bad("time_scale", "must be 1 with the %s executor (real jobs run in real time), got %v", c.Executor, c.TimeScale)
	}
	if !slices.Contains(policies, c.Policy) {
		bad("policy", "%q is not one of %s", c.Policy, strings.Join(policies, ", "))
	}
	if c.KillGrace < 0 {
		bad("kill_grace", "must not be negative, got %v", c.KillGrace)
	}
	if !(c.Overbooking.PoFMax >= 0 && c.Overbooking.PoFMax <= 1) {
		bad("overbooking.pof_max", "must be in [0, 1], got %v", c.Overbooking.PoFMax)
	}
	if !slices.Contains(modes, c.Overbooking.Mode) {
		bad("overbooking.mode", "%q is not one of %s", c.Overbooking.Mode, strings.Join(modes, ", "))
	}
	if !slices.Contains(riskTests, c.Overbooking.RiskTest) {
		bad("overbooking.risk_test", "%q is not one of %s", c.Overbooking.RiskTest, strings.Join(riskTests, ", "))
	}
	if sf := c.Overbooking.SecurityFactor; !(sf >= 0) || math.IsInf(sf, 0) {
		bad("overbooking.security_factor", "must be a finite number >= 0, got %v", sf)
	}
	c.Overbooking.validateLearning(bad)
	c.refuseIneffective(bad)
	if c.Gossip.Addr != "" {
		if err := checkHostPort(c.Gossip.Addr); err != nil {
			bad("gossip.addr", "%v", err)
		}
	} else if len(c.Gossip.Join) > 0 {
		bad("gossip.join", "needs gossip.addr")
	}
	if c.Gossip.Advertise != "" {
		if err := checkHostPort(c.Gossip.Advertise); err != nil {
			bad("gossip.advertise", "%v", err)
		}
	}
	for i, j := range c.Gossip.Join {
		if err := checkHostPort(j); err != nil {
			bad(fmt.Sprintf("gossip.join[%d]", i), "%v", err)
		}
	}
	if c.HTTP.Listen != "" {
		if err := checkHostPort(c.HTTP.Listen); err != nil {
			bad("http.listen", "%v", err)
		}
	}
	if !slices.Contains(logFormats, c.Log.Format) {
		bad("log.format", "%q is not one of %s", c.Log.Format, strings.Join(logFormats, ", "))
	}
	if !slices.Contains(logLevels, c.Log.Level) {
		bad("log.level", "%q is not one of %s", c.Log.Level, strings.Join(logLevels, ", "))
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls", "cert and key go together")
	}
	if c.TLS.CA != "" && c.TLS.Cert == "" {
		bad("tls.ca", "needs tls.cert and tls.key")
	}
	if c.TLS.Cert != "" && c.TLS.CA == "" {
		bad("tls.ca", "is required with tls.cert: every caller is authenticated by a certificate of the CA (mutual TLS)")
	}
	if c.Jobs.ServiceAccount != "" && !validSite(c.Jobs.ServiceAccount) {
		bad("executor.service_account", "%q is not an account name", c.Jobs.ServiceAccount)
	}
	l := c.Limits
	if l.MaxMessageBytes < 0 || l.MaxPendingJobs < 0 || l.MaxWatches < 0 || l.MaxIdempotencyKeys < 0 {
		bad("limits", "must not be negative (0 means the default)")
	}
	if st := c.Store; st.CheckpointRecords < 0 || st.CheckpointBytes < 0 || st.CheckpointInterval < 0 {
		bad("store", "checkpoint settings must not be negative (0 means the default)")
	} else if st.CheckpointInterval > 0 && st.CheckpointInterval < time.Millisecond {
		// At 1µs the checkpointer alone took a core of an idle node.
		bad("store.checkpoint_interval", "%v is below 1ms: the checkpointer would spin", st.CheckpointInterval)
	}
	if l.MaxMessageBytes > 0 && l.MaxMessageBytes < 64<<10 {
		bad("limits.max_message_bytes", "%d is too small for a job with its environment; at least 65536", l.MaxMessageBytes)
	}
	return errors.Join(errs...)
}

// Loopback reports whether host:port names a loopback host.
func Loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validSite(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '.' && r != '-' && r != '_') {
			return false
		}
	}
	return true
}

func checkHostPort(s string) error {
	if s == "" {
		return errors.New("must be host:port, got an empty string")
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("must be host:port: %v", err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
		return fmt.Errorf("port %q must be a number from 0 to 65535", port)
	}
	return nil
}

// executorMapping reads the mapping form of the executor field
// (`executor: {kind: process, allow_root: true, service_account: NAME}`)
// into c.Executor and c.Jobs, and returns the document with the scalar
// form (`executor: process`) in its place, for the strict decoding of the
// rest. A document without the mapping form comes back unchanged.
func executorMapping(data []byte, c *Config) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return data, nil
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "executor" || top.Content[i+1].Kind != yaml.MappingNode {
			continue
		}
		m := top.Content[i+1]
		for j := 0; j+1 < len(m.Content); j += 2 {
			k, v := m.Content[j], m.Content[j+1]
			var err error
			switch k.Value {
			case "kind":
				err = v.Decode(&c.Executor)
			case "allow_root":
				err = v.Decode(&c.Jobs.AllowRoot)
			case "service_account":
				err = v.Decode(&c.Jobs.ServiceAccount)
			default:
				return nil, fmt.Errorf("line %d: executor.%s: unknown field (want kind, allow_root, service_account): %w", k.Line, k.Value, ErrInvalid)
			}
			if err != nil {
				return nil, fmt.Errorf("line %d: executor.%s: %v: %w", k.Line, k.Value, err, ErrInvalid)
			}
		}
		top.Content = append(top.Content[:i:i], top.Content[i+2:]...)
		out, err := yaml.Marshal(&doc)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrInvalid)
		}
		return out, nil
	}
	return data, nil
}
