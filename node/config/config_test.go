package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestDefaultIsValid(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if host != "" && d.Site != host {
		t.Errorf("Site = %q, want host name %q", d.Site, host)
	}
	if d.Procs != runtime.NumCPU() || d.DataDir != "./fedsched-data" || d.Listen != "127.0.0.1:7070" ||
		d.Executor != "process" || d.TimeScale != 1 || d.Policy != "conservative" {
		t.Errorf("Default() = %+v", d)
	}
}

// yamlPaths lists the YAML paths of every leaf field of a struct type.
func yamlPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			name = f.Tag.Get("config") // a field with a YAML form of its own
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, yamlPaths(f.Type, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

func TestEveryFieldHasEnvAndFlag(t *testing.T) {
	var table []string
	for _, f := range fields {
		table = append(table, f.path)
	}
	want := yamlPaths(reflect.TypeFor[Config](), "")
	slices.Sort(table)
	slices.Sort(want)
	if !slices.Equal(table, want) {
		t.Fatalf("field table %v\ndoes not match the Config struct %v", table, want)
	}
	// Each table entry points at the field its path names.
	for _, f := range fields {
		var c Config
		if err := set(f.ptr(&c), sample(f.ptr(&c))); err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(c, Config{}) {
			t.Errorf("setting %s changed nothing", f.path)
		}
	}
}

func sample(p any) string {
	switch p.(type) {
	case *int:
		return "7"
	case *float64:
		return "0.5"
	case *bool:
		return "true"
	case *time.Duration:
		return "3s"
	}
	return "x:1"
}

func TestParse(t *testing.T) {
	c, err := Parse([]byte(`
site: alpha
procs: 64
kill_grace: 30s
overbooking:
  enabled: true
  pof_max: 0.05
gossip:
  addr: 10.0.0.1:7946
  join: [10.0.0.2:7946, 10.0.0.3:7946]
`))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.Site != "alpha" || c.Procs != 64 || c.KillGrace != 30*time.Second || !c.Overbooking.Enabled ||
		c.Overbooking.PoFMax != 0.05 || len(c.Gossip.Join) != 2 {
		t.Errorf("Parse = %+v", c)
	}
	// What the file does not mention keeps its default, nested fields too.
	if c.Listen != d.Listen || c.Overbooking.RiskTest != "threshold" || c.Overbooking.Mode != "heuristic" || c.Overbooking.EffectiveSecurityFactor() != 2 {
		t.Errorf("defaults lost: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}

	for name, doc := range map[string]string{
		"unknown field":     "procz: 4\n",
		"unknown nested":    "overbooking:\n  pofmax: 0.1\n",
		"wrong type":        "procs: many\n",
		"bad duration":      "kill_grace: soon\n",
		"two documents":     "procs: 1\n---\nprocs: 2\n",
		"not a mapping":     "- a\n- b\n",
		"broken yaml":       "site: [\n",
		"duplicate mapping": "procs: 1\nprocs: 2\n",
	} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Parse = %v, want ErrInvalid", name, err)
		}
	}
	if c, err := Parse(nil); err != nil || !reflect.DeepEqual(c, Default()) {
		t.Errorf("empty document: %+v, %v", c, err)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte("site: beta\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil || c.Site != "beta" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load(missing) = %v", err)
	}
}

func TestPrecedence(t *testing.T) {
	type want struct {
		site  string
		procs int
		pof   float64
		join  []string
		grace time.Duration
	}
	d := Default()
	tests := map[string]struct {
		file string            // YAML file content; "" for no file
		env  map[string]string // environment
		args []string          // command line
		want want
	}{
		"defaults alone": {
			want: want{d.Site, d.Procs, 0.1, nil, 10 * time.Second},
		},
		"file over defaults": {
			file: "site: f\nprocs: 4\noverbooking: {enabled: true, pof_max: 0.3}\ngossip: {addr: 'h:1', join: ['a:1']}\n",
			want: want{"f", 4, 0.3, []string{"a:1"}, 10 * time.Second},
		},
		"env over file": {
			file: "site: f\nprocs: 4\ngossip: {addr: 'h:1', join: ['a:1']}\n",
			env:  map[string]string{"FEDSCHED_PROCS": "8", "FEDSCHED_GOSSIP_JOIN": "b:1, c:2", "FEDSCHED_KILL_GRACE": "1m"},
			want: want{"f", 8, 0.1, []string{"b:1", "c:2"}, time.Minute},
		},
		"flags over env over file": {
			file: "site: f\nprocs: 4\noverbooking: {enabled: true, pof_max: 0.3}\n",
			env:  map[string]string{"FEDSCHED_PROCS": "8", "FEDSCHED_SITE": "e", "FEDSCHED_OVERBOOKING_POF_MAX": "0.4"},
			args: []string{"--procs=16", "--overbooking-pof-max", "0.5"},
			want: want{"e", 16, 0.5, nil, 10 * time.Second},
		},
		"flag equal to the default still wins": {
			env:  map[string]string{"FEDSCHED_PROCS": "8"},
			args: []string{"--procs", "1"},
			want: want{d.Site, 1, 0.1, nil, 10 * time.Second},
		},
		"list flag": {
			args: []string{"--gossip=h:1", "--join=x:1,y:2", "--join=z:3"},
			want: want{d.Site, d.Procs, 0.1, []string{"x:1", "y:2", "z:3"}, 10 * time.Second},
		},
		"config file named by env": {
			file: "site: viaenv\n",
			env:  map[string]string{"FEDSCHED_CONFIG": "FILE"},
			want: want{"viaenv", d.Procs, 0.1, nil, 10 * time.Second},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			args := slices.Clone(tc.args)
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "node.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				if tc.env["FEDSCHED_CONFIG"] == "FILE" {
					env["FEDSCHED_CONFIG"] = path
				} else {
					args = append(args, "--config", path)
				}
			}
			for k, v := range tc.env {
				if k != "FEDSCHED_CONFIG" {
					env[k] = v
				}
			}
			fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
			BindFlags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			c, err := Resolve(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			got := want{c.Site, c.Procs, c.Overbooking.PoFMax, c.Gossip.Join, c.KillGrace}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		args []string
	}{
		"env not a number":    {env: map[string]string{"FEDSCHED_PROCS": "lots"}},
		"env empty procs":     {env: map[string]string{"FEDSCHED_PROCS": ""}},
		"env empty site":      {env: map[string]string{"FEDSCHED_SITE": ""}},
		"invalid result":      {args: []string{"--procs=0"}},
		"scaled process":      {args: []string{"--time-scale=60"}},
		"missing config file": {args: []string{"--config=/nonexistent/fedsched.yaml"}},
		"env bool":            {env: map[string]string{"FEDSCHED_OVERBOOKING_ENABLED": "maybe"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
			BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			_, err := Resolve(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err == nil {
				t.Fatal("Resolve succeeded")
			}
		})
	}
	// A simulated site may run faster than real time.
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	BindFlags(fs)
	if err := fs.Parse([]string{"--executor=simulated", "--time-scale=60"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(fs, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*Config)
		field  string // the YAML path the error must name
	}{
		"empty site":                {func(c *Config) { c.Site = "" }, "site"},
		"site with a slash":         {func(c *Config) { c.Site = "a/b" }, "site"},
		"site starting with a dash": {func(c *Config) { c.Site = "-a" }, "site"},
		"site too long":             {func(c *Config) { c.Site = strings.Repeat("a", 64) }, "site"},
		"empty data dir":            {func(c *Config) { c.DataDir = "" }, "data_dir"},
		"listen without port":       {func(c *Config) { c.Listen = "localhost" }, "listen"},
		"listen with a bad port":    {func(c *Config) { c.Listen = "localhost:http" }, "listen"},
		"listen port out of range":  {func(c *Config) { c.Listen = ":70000" }, "listen"},
		"zero procs":                {func(c *Config) { c.Procs = 0 }, "procs"},
		"unknown executor":          {func(c *Config) { c.Executor = "pbs" }, "executor"},
		"negative procs with slurm": {func(c *Config) { c.Executor = "slurm"; c.Procs = -1 }, "procs"},
		"partition without slurm":   {func(c *Config) { c.Slurm.Partition = "p" }, "slurm.partition"},
		"scaled slurm executor":     {func(c *Config) { c.Executor = "slurm"; c.TimeScale = 2 }, "time_scale"},
		"zero time scale":           {func(c *Config) { c.TimeScale = 0 }, "time_scale"},
		"negative time scale":       {func(c *Config) { c.Executor = "simulated"; c.TimeScale = -2 }, "time_scale"},
		"scaled process executor":   {func(c *Config) { c.TimeScale = 10 }, "time_scale"},
		"unknown policy":            {func(c *Config) { c.Policy = "random" }, "policy"},
		"negative kill grace":       {func(c *Config) { c.KillGrace = -time.Second }, "kill_grace"},
		"negative checkpoint":       {func(c *Config) { c.Store.CheckpointRecords = -1 }, "store"},
		"checkpoint interval 1µs":   {func(c *Config) { c.Store.CheckpointInterval = time.Microsecond }, "store.checkpoint_interval"},
		"pof_max above one":         {func(c *Config) { c.Overbooking.PoFMax = 1.5 }, "overbooking.pof_max"},
		"unknown risk test":         {func(c *Config) { c.Overbooking.RiskTest = "vibes" }, "overbooking.risk_test"},
		"negative security factor":  {func(c *Config) { c.Overbooking.SecurityFactor = -1 }, "overbooking.security_factor"},
		"negative min samples":      {func(c *Config) { c.Overbooking.MinSamples = -1 }, "overbooking.min_samples"},
		"age factor above 1":        {func(c *Config) { c.Overbooking.AgeFactor = 1.5 }, "overbooking.age_factor"},
		"negative age period":       {func(c *Config) { c.Overbooking.AgeEvery = -1 }, "overbooking.age_every"},
		"ageing forgets below min":  {func(c *Config) { c.Overbooking.AgeFactor, c.Overbooking.AgeEvery = 0.5, 10 }, "overbooking.age_factor"},
		"join without gossip addr":  {func(c *Config) { c.Gossip.Join = []string{"a:1"} }, "gossip.join"},
		"bad join entry":            {func(c *Config) { c.Gossip.Addr = ":7946"; c.Gossip.Join = []string{"nope"} }, "gossip.join[0]"},
		"bad advertise":             {func(c *Config) { c.Gossip.Advertise = "x" }, "gossip.advertise"},
		"cert without key":          {func(c *Config) { c.TLS.Cert = "c.pem" }, "tls"},
		"ca without cert":           {func(c *Config) { c.TLS.CA = "ca.pem" }, "tls.ca"},
		"unknown transfer policy":   {func(c *Config) { c.Delegation.Transfer = "push" }, "delegation.transfer"},
		"rqf without federation":    {func(c *Config) { c.Delegation.Transfer = "rqf" }, "delegation.transfer"},
		"disclose without gossip":   {func(c *Config) { c.Delegation.DiscloseQueue = true }, "delegation.disclose_queue"},
		"pull interval without rqf": {func(c *Config) { c.Gossip.Addr = ":7946"; c.Delegation.PullInterval = time.Second }, "delegation.pull_interval"},
		"negative pull interval": {func(c *Config) {
			c.Gossip.Addr, c.Delegation.Transfer, c.Delegation.PullInterval = ":7946", "rqf", -time.Second
		}, "delegation.pull_interval"},
		"rqf with prefer": {func(c *Config) {
			c.Gossip.Addr, c.Delegation.Transfer, c.Delegation.Prefer = ":7946", "rqf", []string{"b"}
		}, "delegation.prefer"},
		"efs live":          {func(c *Config) { c.Delegation.Transfer = "efs" }, "delegation.transfer"},
		"prefer itself":     {func(c *Config) { c.Delegation.Prefer = []string{c.Site} }, "delegation.prefer"},
		"prefer a bad name": {func(c *Config) { c.Delegation.Prefer = []string{"a b"} }, "delegation.prefer"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Default()
			tc.mutate(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), tc.field+":") && !strings.Contains(err.Error(), "\n"+tc.field+":") {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
		})
	}
	// Every problem is reported, not just the first.
	c := Default()
	c.Procs, c.Policy = 0, ""
	if err := c.Validate(); !strings.Contains(err.Error(), "procs:") || !strings.Contains(err.Error(), "policy:") {
		t.Fatalf("Validate = %v, want both problems", err)
	}
}

// TestRQFValidates: an rqf site and a site that discloses its queue are
// valid configurations once they federate.
func TestRQFValidates(t *testing.T) {
	c := Default()
	c.Gossip.Addr = ":7946"
	c.Delegation.Transfer, c.Delegation.PullInterval = "rqf", 2*time.Second
	if err := c.Validate(); err != nil {
		t.Fatalf("rqf site: %v", err)
	}
	c = Default()
	c.Gossip.Addr = ":7946"
	c.Delegation.DiscloseQueue = true
	if err := c.Validate(); err != nil {
		t.Fatalf("disclosing site: %v", err)
	}
}

func TestHelpDocumentsEveryOption(t *testing.T) {
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	BindFlags(fs)
	help := fs.FlagUsages()
	for _, f := range fields {
		if !strings.Contains(help, "--"+FlagName(f.path)) || !strings.Contains(help, EnvName(f.path)) {
			t.Errorf("--help lacks %s", f.path)
		}
	}
	for _, s := range []string{"--config", DefaultListen, DefaultDataDir, "conservative", "10s"} {
		if !strings.Contains(help, s) {
			t.Errorf("--help lacks %q:\n%s", s, help)
		}
	}
}

func TestEffectiveSecurityFactor(t *testing.T) {
	for _, tc := range []struct {
		o    Overbooking
		want float64
	}{
		{Overbooking{Mode: "heuristic"}, 2},
		{Overbooking{Mode: "comprehensive"}, 4},
		{Overbooking{Mode: "comprehensive", SecurityFactor: 1}, 1},
	} {
		if got := tc.o.EffectiveSecurityFactor(); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.o, got, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	if got := FlagName("overbooking.pof_max"); got != "overbooking-pof-max" {
		t.Errorf("FlagName = %s", got)
	}
	if got := EnvName("overbooking.pof_max"); got != "FEDSCHED_OVERBOOKING_POF_MAX" {
		t.Errorf("EnvName = %s", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("site: a\nprocs: 4\n"))
	f.Add([]byte("overbooking: {pof_max: .nan}\n"))
	f.Add([]byte("gossip:\n  join: [a:1, b:2]\nkill_grace: 1h\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("site: !!binary aGk=\n"))
	f.Add([]byte("procs: 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error %v does not wrap ErrInvalid", err)
			}
			return
		}
		_ = c.Validate()
	})
}

// TestSlurmProcsDefault: with the slurm executor and no procs given
// anywhere, procs is 0 (read from the partition at start); given by a
// flag, the environment or the YAML file, it is kept.
func TestSlurmProcsDefault(t *testing.T) {
	yamlWith := filepath.Join(t.TempDir(), "with.yaml")
	if err := os.WriteFile(yamlWith, []byte("executor: slurm\nprocs: 12\nslurm:\n  partition: fed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yamlWithout := filepath.Join(t.TempDir(), "without.yaml")
	if err := os.WriteFile(yamlWithout, []byte("executor: slurm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		procs int
	}{
		{"flag executor only", []string{"--executor", "slurm"}, nil, 0},
		{"flag procs", []string{"--executor", "slurm", "--procs", "8"}, nil, 8},
		{"env procs", []string{"--executor", "slurm"}, map[string]string{"FEDSCHED_PROCS": "6"}, 6},
		{"yaml procs", []string{"--config", yamlWith}, nil, 12},
		{"yaml without procs", []string{"--config", yamlWithout}, nil, 0},
		{"process executor", nil, nil, runtime.NumCPU()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
			BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := Resolve(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			if c.Procs != tc.procs {
				t.Errorf("procs = %d, want %d", c.Procs, tc.procs)
			}
		})
	}
}

// TestExecutorMapping: the executor field in its mapping form carries the
// job accounts' settings; the scalar form keeps working; unknown keys in
// the mapping are refused.
func TestExecutorMapping(t *testing.T) {
	c, err := Parse([]byte("site: a\nexecutor:\n  kind: simulated\n  allow_root: true\n  service_account: batch\nprocs: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Executor != ExecutorSimulated || !c.Jobs.AllowRoot || c.Jobs.ServiceAccount != "batch" || c.Procs != 3 || c.Site != "a" {
		t.Errorf("got executor %q, jobs %+v, procs %d, site %q", c.Executor, c.Jobs, c.Procs, c.Site)
	}
	c, err = Parse([]byte("executor: simulated\n"))
	if err != nil || c.Executor != ExecutorSimulated || c.Jobs.AllowRoot {
		t.Errorf("scalar form: %+v %v", c.Jobs, err)
	}
	for _, doc := range []string{"executor:\n  allow_roots: true\n", "executor:\n  allow_root: maybe\n", "executor:\n  kind: process\nbogus: 1\n"} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", doc, err)
		}
	}
}

// TestIneffectiveSettingsRefused: a setting that would have no effect in
// the configuration is refused with a message saying why.
func TestIneffectiveSettingsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		mod  func(*Config)
		path string
	}{
		"overbooking under easy":       {func(c *Config) { c.Policy, c.Overbooking.Enabled = "easy", true }, "overbooking.enabled"},
		"overbooking under fcfs":       {func(c *Config) { c.Policy, c.Overbooking.Enabled = "fcfs", true }, "overbooking.enabled"},
		"overbooking under list":       {func(c *Config) { c.Policy, c.Overbooking.Enabled = "list", true }, "overbooking.enabled"},
		"pof_max without overbooking":  {func(c *Config) { c.Overbooking.PoFMax = 0.3 }, "overbooking.pof_max"},
		"mode without overbooking":     {func(c *Config) { c.Overbooking.Mode = "comprehensive" }, "overbooking.mode"},
		"security factor on threshold": {func(c *Config) { c.Overbooking.Enabled, c.Overbooking.SecurityFactor = true, 3 }, "overbooking.security_factor"},
		"max_hops alone":               {func(c *Config) { c.Delegation.MaxHops = 1 }, "delegation.max_hops"},
		"advertise alone":              {func(c *Config) { c.Gossip.Advertise = "h:1" }, "gossip.advertise"},
		"allow_root, simulated":        {func(c *Config) { c.Executor, c.Jobs.AllowRoot = ExecutorSimulated, true }, "executor.allow_root"},
		"service account, simulated":   {func(c *Config) { c.Executor, c.Jobs.ServiceAccount = ExecutorSimulated, "batch" }, "executor.service_account"},
		"checkpoint records, no log":   {func(c *Config) { c.Store.Log, c.Store.CheckpointRecords = false, 10 }, "store.checkpoint_records"},
		"checkpoint bytes, no log":     {func(c *Config) { c.Store.Log, c.Store.CheckpointBytes = false, 10 }, "store.checkpoint_bytes"},
		"checkpoint interval, no log":  {func(c *Config) { c.Store.Log, c.Store.CheckpointInterval = false, time.Second }, "store.checkpoint_interval"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Default()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.path+":") {
				t.Errorf("Validate() = %v, want %s refused", err, tc.path)
			}
		})
	}
	c := Default()
	c.Overbooking.Enabled, c.Overbooking.RiskTest, c.Overbooking.SecurityFactor = true, "risk", 3
	c.Gossip.Addr, c.Delegation.MaxHops = "127.0.0.1:7946", 1
	if err := c.Validate(); err != nil {
		t.Errorf("a configuration where every setting works: %v", err)
	}
}
