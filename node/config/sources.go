package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// EnvPrefix starts the name of every environment variable of the node.
const EnvPrefix = "FEDSCHED_"

// ConfigFlag is the flag that names the YAML file; ConfigEnv the variable
// used when the flag is not given.
const (
	ConfigFlag = "config"
	ConfigEnv  = EnvPrefix + "CONFIG"
)

// field is one setting: its YAML path, the one-line usage of its flag and
// a pointer to it in a Config. The table below is the one list that the
// environment and the flags are derived from.
type field struct {
	path  string
	usage string
	ptr   func(*Config) any
}

var fields = []field{
	{"site", "site name, unique in the federation (default: host name)", func(c *Config) any { return &c.Site }},
	{"data_dir", "directory of the node's state: store file and job directories", func(c *Config) any { return &c.DataDir }},
	{"listen", "host:port of the gRPC API", func(c *Config) any { return &c.Listen }},
	{"procs", "processors the site schedules (default: CPUs of this host; slurm executor: CPUs of its partition)", func(c *Config) any { return &c.Procs }},
	{"executor", "how jobs run: process, simulated or slurm", func(c *Config) any { return &c.Executor }},
	{"slurm.partition", "Slurm partition the slurm executor submits to (default: the cluster's default partition)", func(c *Config) any { return &c.Slurm.Partition }},
	{"slurm.poll_interval", "how often the slurm executor asks Slurm about its jobs and nodes", func(c *Config) any { return &c.Slurm.PollInterval }},
	{"time_scale", "how many times faster than the wall clock the site's clock runs (simulated executor only)", func(c *Config) any { return &c.TimeScale }},
	{"policy", "queue policy: conservative, easy, fcfs or list", func(c *Config) any { return &c.Policy }},
	{"kill_grace", "time between SIGTERM and SIGKILL when a job is killed", func(c *Config) any { return &c.KillGrace }},
	{"overbooking.enabled", "accept SLA jobs into gaps shorter than their estimate", func(c *Config) any { return &c.Overbooking.Enabled }},
	{"overbooking.mode", "how the probability of failure is computed: heuristic or comprehensive", func(c *Config) any { return &c.Overbooking.Mode }},
	{"overbooking.risk_test", "acceptance test: threshold (PoF < pof_max) or risk ((1-PoF)*fee > PoF*penalty*security_factor)", func(c *Config) any { return &c.Overbooking.RiskTest }},
	{"overbooking.pof_max", "highest probability of failure the threshold test accepts, in [0, 1]", func(c *Config) any { return &c.Overbooking.PoFMax }},
	{"overbooking.security_factor", "weight of the penalty in the risk test; 0 means 2 (heuristic) or 4 (comprehensive)", func(c *Config) any { return &c.Overbooking.SecurityFactor }},
	{"overbooking.min_samples", "runtime samples a job's statistics must hold before it may be overbooked", func(c *Config) any { return &c.Overbooking.MinSamples }},
	{"overbooking.history", "SWF file of the site's past jobs that seeds the runtime statistics on first start", func(c *Config) any { return &c.Overbooking.History }},
	{"overbooking.age_factor", "weight kept by the runtime samples at every ageing step, in (0, 1]; 1 never forgets", func(c *Config) any { return &c.Overbooking.AgeFactor }},
	{"overbooking.age_every", "learnt jobs between two ageing steps of the runtime statistics", func(c *Config) any { return &c.Overbooking.AgeEvery }},
	{"gossip.addr", "host:port to gossip on; empty runs the site alone", func(c *Config) any { return &c.Gossip.Addr }},
	{"gossip.advertise", "host:port of this site's API for peers (default: listen)", func(c *Config) any { return &c.Gossip.Advertise }},
	{"gossip.join", "comma-separated gossip host:port of peers to join", func(c *Config) any { return &c.Gossip.Join }},
	{"delegation.max_candidates", "peers asked for quotes in parallel (0: 3)", func(c *Config) any { return &c.Delegation.MaxCandidates }},
	{"delegation.quote_timeout", "time limit of one quote round trip (0: 2s)", func(c *Config) any { return &c.Delegation.QuoteTimeout }},
	{"delegation.hold_seconds", "how long a quote's hold lasts, in the site's seconds (0: 60)", func(c *Config) any { return &c.Delegation.HoldSeconds }},
	{"delegation.max_hops", "how often one job may be delegated: 0 or 1 (0: 1; a received job is never offered on)", func(c *Config) any { return &c.Delegation.MaxHops }},
	{"delegation.community_share", "share of processors kept for the site's own users, in [0, 1)", func(c *Config) any { return &c.Delegation.CommunityShare }},
	{"delegation.transfer", "transfer policy: on-reject (offer only rejected jobs), acf (also offer jobs this site would not start now) or rqf (pull, when idle, waiting jobs from peers that disclose their queues)", func(c *Config) any { return &c.Delegation.Transfer }},
	{"delegation.disclose_queue", "answer peers' queue requests (RQF): disclose the jobs waiting here and let peers take those they would start now", func(c *Config) any { return &c.Delegation.DiscloseQueue }},
	{"delegation.pull_interval", "rqf's interval in the site's clock: an idle rqf site asks peers for their queues at most once per interval when something happens to it, and at every multiple of it while idle (whole seconds; 0: 60s)", func(c *Config) any { return &c.Delegation.PullInterval }},
	{"delegation.prefer", "comma-separated peers asked first, one at a time, in this order (ordered spill-over)", func(c *Config) any { return &c.Delegation.Prefer }},
	{"delegation.pricing.model", "price model of this site's quotes: free or libra+$ (Yeo's price over the job's window)", func(c *Config) any { return &c.Delegation.Pricing.Model }},
	{"delegation.pricing.pbase", "libra+$ base price, in virtual coins per processor-hour", func(c *Config) any { return &c.Delegation.Pricing.PBase }},
	{"delegation.pricing.alpha", "libra+$ weight of the static part", func(c *Config) any { return &c.Delegation.Pricing.Alpha }},
	{"delegation.pricing.beta", "libra+$ weight of the utilisation part", func(c *Config) any { return &c.Delegation.Pricing.Beta }},
	{"tls.cert", "PEM certificate of this node; empty serves plaintext", func(c *Config) any { return &c.TLS.Cert }},
	{"tls.key", "PEM private key of tls.cert", func(c *Config) any { return &c.TLS.Key }},
	{"tls.ca", "PEM CA that client and peer certificates must chain to (mutual TLS)", func(c *Config) any { return &c.TLS.CA }},
	{"gossip.key", "file of gossip encryption keys (fedsched tls gossip-key); required to federate", func(c *Config) any { return &c.Gossip.Key }},
	{"insecure", "serve plaintext TCP and gossip without certificates (loopback only; callers are trusted as they claim)", func(c *Config) any { return &c.Insecure }},
	{"socket", "path of the node's Unix socket for local users (default: fedsched.sock in the data directory)", func(c *Config) any { return &c.Socket }},
	{"executor.allow_root", "consent to run jobs as root", func(c *Config) any { return &c.Jobs.AllowRoot }},
	{"executor.service_account", "local account for jobs of users without one (remote users)", func(c *Config) any { return &c.Jobs.ServiceAccount }},
	{"limits.max_message_bytes", "largest gRPC message received (0: 4 MiB)", func(c *Config) any { return &c.Limits.MaxMessageBytes }},
	{"limits.max_pending_jobs", "PENDING jobs one user may have (0: 10000)", func(c *Config) any { return &c.Limits.MaxPendingJobs }},
	{"limits.max_watches", "open WatchJobs streams per identity (0: 64)", func(c *Config) any { return &c.Limits.MaxWatches }},
	{"limits.max_idempotency_keys", "idempotency keys remembered per user (0: 10000)", func(c *Config) any { return &c.Limits.MaxIdempotencyKeys }},
	{"http.listen", "host:port of the HTTP listener serving /metrics and the status page; empty: off", func(c *Config) any { return &c.HTTP.Listen }},
	{"log.format", "log format: text or json (one JSON object per line)", func(c *Config) any { return &c.Log.Format }},
	{"log.level", "lowest level logged: debug, info, warn or error", func(c *Config) any { return &c.Log.Level }},
	{"store.log", "write-ahead log in front of the store file: one fdatasync per group commit (false: bbolt's two fsyncs each)", func(c *Config) any { return &c.Store.Log }},
	{"store.checkpoint_records", "write the log to the store file when it holds this many records (0: 1024)", func(c *Config) any { return &c.Store.CheckpointRecords }},
	{"store.checkpoint_bytes", "... or this many bytes (0: 16 MiB)", func(c *Config) any { return &c.Store.CheckpointBytes }},
	{"store.checkpoint_interval", "... or when this much time has passed since the last checkpoint (0: 1s)", func(c *Config) any { return &c.Store.CheckpointInterval }},
}

// shortFlags are the flags the command-line contract names differently
// from their YAML path.
var shortFlags = map[string]string{
	"data_dir":    "data",
	"gossip.addr": "gossip",
	"gossip.join": "join",

	"executor.allow_root":      "allow-root-jobs",
	"executor.service_account": "service-account",
	"http.listen":              "http",
}

// FlagName returns the flag of a YAML path: "overbooking.pof_max" ->
// "overbooking-pof-max"; a few have the short names of the command-line
// contract ("data_dir" -> "data", "gossip.addr" -> "gossip", "gossip.join"
// -> "join").
func FlagName(path string) string {
	if f, ok := shortFlags[path]; ok {
		return f
	}
	return strings.NewReplacer(".", "-", "_", "-").Replace(path)
}

// EnvName returns the environment variable of a YAML path:
// "overbooking.pof_max" -> "FEDSCHED_OVERBOOKING_POF_MAX".
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// set parses s into the field p points to.
func set(p any, s string) error {
	switch p := p.(type) {
	case *string:
		*p = s
	case *int:
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		*p = v
	case *float64:
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		*p = v
	case *bool:
		v, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		*p = v
	case *time.Duration:
		v, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 10s", s)
		}
		*p = v
	case *[]string:
		*p = nil
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				*p = append(*p, e)
			}
		}
	default:
		panic(fmt.Sprintf("config: field of unhandled type %T", p))
	}
	return nil
}

// ApplyEnv overrides c with the FEDSCHED_<FIELD> variables that lookup
// finds (pass os.LookupEnv). A variable set to the empty string overrides
// too.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	for _, f := range fields {
		name := EnvName(f.path)
		v, ok := lookup(name)
		if !ok {
			continue
		}
		if err := set(f.ptr(c), v); err != nil {
			return fmt.Errorf("%s: %v: %w", name, err, ErrInvalid)
		}
	}
	return nil
}

// BindFlags registers --config and one flag per field on fs, each with its
// default from Default() and its usage, so that --help documents every
// option. Read the values back with Resolve (or ApplyFlags).
func BindFlags(fs *pflag.FlagSet) {
	d := Default()
	fs.String(ConfigFlag, "", "YAML configuration file (env "+ConfigEnv+")")
	for _, f := range fields {
		name, usage := FlagName(f.path), f.usage+" (env "+EnvName(f.path)+")"
		switch p := f.ptr(&d).(type) {
		case *string:
			fs.String(name, *p, usage)
		case *int:
			fs.Int(name, *p, usage)
		case *float64:
			fs.Float64(name, *p, usage)
		case *bool:
			fs.Bool(name, *p, usage)
		case *time.Duration:
			fs.Duration(name, *p, usage)
		case *[]string:
			fs.StringSlice(name, *p, usage)
		default:
			panic(fmt.Sprintf("config: field %s of unhandled type %T", f.path, p))
		}
	}
}

// ApplyFlags overrides c with the flags of fs that were given on the
// command line. fs must have been set up by BindFlags and parsed.
func (c *Config) ApplyFlags(fs *pflag.FlagSet) error {
	for _, f := range fields {
		name := FlagName(f.path)
		fl := fs.Lookup(name)
		if fl == nil {
			return fmt.Errorf("config: flag --%s is not bound; call BindFlags", name)
		}
		if !fl.Changed {
			continue
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			*(f.ptr(c).(*[]string)) = sv.GetSlice()
			continue
		}
		if err := set(f.ptr(c), fl.Value.String()); err != nil {
			return fmt.Errorf("--%s: %v: %w", name, err, ErrInvalid)
		}
	}
	return nil
}

// Resolve builds the node's configuration: Default(), then the YAML file
// named by --config (or by FEDSCHED_CONFIG if the flag is not given), then
// the environment, then the flags given on the command line; and validates
// it. fs must have been set up by BindFlags and parsed; lookup is
// os.LookupEnv outside tests.
func Resolve(fs *pflag.FlagSet, lookup func(string) (string, bool)) (Config, error) {
	path, _ := lookup(ConfigEnv)
	if fl := fs.Lookup(ConfigFlag); fl != nil && fl.Changed {
		path = fl.Value.String()
	}
	c := Default()
	if path != "" {
		var err error
		if c, err = Load(path); err != nil {
			return Config{}, err
		}
	}
	if err := c.ApplyEnv(lookup); err != nil {
		return Config{}, fmt.Errorf("config: environment: %w", err)
	}
	if err := c.ApplyFlags(fs); err != nil {
		return Config{}, fmt.Errorf("config: flags: %w", err)
	}
	if c.Executor == ExecutorSlurm && !procsGiven(path, fs, lookup) {
		// The partition's CPUs, read from sinfo when the node starts.
		c.Procs = 0
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// procsGiven reports whether procs was set by the YAML file at path, the
// environment or a flag (the default depends on the executor).
func procsGiven(path string, fs *pflag.FlagSet, lookup func(string) (string, bool)) bool {
	if fl := fs.Lookup(FlagName("procs")); fl != nil && fl.Changed {
		return true
	}
	if _, ok := lookup(EnvName("procs")); ok {
		return true
	}
	if path == "" {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var doc map[string]any
	return yaml.Unmarshal(data, &doc) == nil && doc["procs"] != nil
}
