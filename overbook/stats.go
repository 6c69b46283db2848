package overbook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
)

// JobInfo is what the statistics need to know about a job to pick its class.
type JobInfo struct {
	ID       int64  // the job's id; Stats ignores it, per-job statistics (RatioStats) key on it
	Procs    int    // requested processors (nodes)
	Estimate int64  // the user's runtime estimate, seconds
	User     string // user name; "" = unknown (the job then only has the general class for ByUser)
	App      string // application / executable; "" = unknown
}

// Classifier chooses the attribute that keys the job classes.
type Classifier int

// The classifiers of the thesis (§3.2.1). General uses one histogram over all
// jobs; the others key by one attribute and fall back to the general
// histogram for thin classes.
const (
	General   Classifier = iota // one class over all jobs
	ByRuntime                   // runtime-estimate band (RuntimeBand)
	ByProcs                     // processor-count band (ProcsBand)
	ByUser                      // user name
	ByApp                       // application name
	numClassifiers
)

var classifierNames = [numClassifiers]string{"general", "runtime", "procs", "user", "app"}

// String returns "general", "runtime", "procs", "user" or "app".
func (c Classifier) String() string {
	if c >= 0 && c < numClassifiers {
		return classifierNames[c]
	}
	return "Classifier(" + strconv.Itoa(int(c)) + ")"
}

// ParseClassifier is the inverse of String.
func ParseClassifier(s string) (Classifier, error) {
	for i, n := range classifierNames {
		if n == s {
			return Classifier(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown classifier %q", ErrBadConfig, s)
}

// MarshalText encodes the classifier by name.
func (c Classifier) MarshalText() ([]byte, error) {
	if c < 0 || c >= numClassifiers {
		return nil, fmt.Errorf("%w: classifier %d", ErrBadConfig, int(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText decodes a classifier name.
func (c *Classifier) UnmarshalText(b []byte) error {
	v, err := ParseClassifier(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// RuntimeBandLimits are the upper bounds (exclusive, seconds) of the runtime
// estimate bands of the thesis: <10 min, 10 min–1 h, 1–2 h, 2–3 h, 3–5 h,
// 5–12 h, >=12 h. A band is half-open: an estimate of exactly 1 h is in the
// 1–2 h band.
var RuntimeBandLimits = [...]int64{600, 3600, 7200, 10800, 18000, 43200}

// NumRuntimeBands is the number of runtime bands (7).
const NumRuntimeBands = len(RuntimeBandLimits) + 1

// RuntimeBand returns the runtime band 0..6 of an estimate (see
// RuntimeBandLimits). Non-positive estimates are in band 0.
func RuntimeBand(estimate int64) int {
	for i, l := range RuntimeBandLimits {
		if estimate < l {
			return i
		}
	}
	return len(RuntimeBandLimits)
}

// ProcsBandLimits are the upper bounds (inclusive) of the processor bands of
// the thesis: 1, 2, 3–4, 5–8, 9–16, 17–32, 33–64, >64.
var ProcsBandLimits = [...]int{1, 2, 4, 8, 16, 32, 64}

// NumProcsBands is the number of processor bands (8).
const NumProcsBands = len(ProcsBandLimits) + 1

// ProcsBand returns the processor band 0..7 of a processor count (see
// ProcsBandLimits). Counts below 1 are in band 0.
func ProcsBand(procs int) int {
	for i, l := range ProcsBandLimits {
		if procs <= l {
			return i
		}
	}
	return len(ProcsBandLimits)
}

// ClassKey names one job class: the classifier and the key within it (the
// band number in decimal for ByRuntime and ByProcs, the name for ByUser and
// ByApp, "" for General).
type ClassKey struct {
	By  Classifier
	Key string
}

// String formats the key as "runtime/3", "user/alice", "general".
func (k ClassKey) String() string {
	if k.By == General {
		return General.String()
	}
	return k.By.String() + "/" + k.Key
}

// KeyOf returns the class of j under classifier c. ok is false when j has no
// class under c (empty user or application name, or an unknown classifier);
// such a job uses the general class.
func KeyOf(c Classifier, j JobInfo) (k ClassKey, ok bool) {
	switch c {
	case General:
		return ClassKey{By: General}, true
	case ByRuntime:
		return ClassKey{By: c, Key: strconv.Itoa(RuntimeBand(j.Estimate))}, true
	case ByProcs:
		return ClassKey{By: c, Key: strconv.Itoa(ProcsBand(j.Procs))}, true
	case ByUser:
		return ClassKey{By: c, Key: j.User}, j.User != ""
	case ByApp:
		return ClassKey{By: c, Key: j.App}, j.App != ""
	}
	return ClassKey{By: General}, false
}

// Defaults of StatsConfig.
const (
	// DefaultMinSamples is the class weight below which a class falls back
	// to the general histogram when StatsConfig.MinSamples is 0. Our
	// choice: the thesis gives personal PDFs only to the top 10 users and
	// states no threshold.
	DefaultMinSamples = 30
	// DefaultAgeEvery is the number of observations between two ageing
	// steps when StatsConfig.AgeEvery is 0.
	DefaultAgeEvery = 100
)

// StatsConfig configures Stats.
type StatsConfig struct {
	// Classifier is the attribute Histogram keys by.
	Classifier Classifier `json:"classifier"`
	// MinSamples: a class whose (aged) weight is below this falls back to
	// the general histogram. 0 means DefaultMinSamples.
	MinSamples float64 `json:"min_samples"`
	// AgeFactor: after every AgeEvery observations (counted over all
	// classes, so "time" is site-wide job completions), every histogram of
	// every class, and the general one, is multiplied by AgeFactor. 0 or 1
	// means no ageing; otherwise it must be in (0, 1). With factor a and
	// period K the effective memory is about K/(1−a) jobs.
	AgeFactor float64 `json:"age_factor"`
	// AgeEvery is the ageing period in observations; 0 means
	// DefaultAgeEvery.
	AgeEvery int `json:"age_every"`
}

func (c StatsConfig) validate() error {
	switch {
	case c.Classifier < 0 || c.Classifier >= numClassifiers:
		return fmt.Errorf("%w: classifier %d", ErrBadConfig, int(c.Classifier))
	case !(c.MinSamples >= 0) || math.IsInf(c.MinSamples, 0):
		return fmt.Errorf("%w: MinSamples %v", ErrBadConfig, c.MinSamples)
	case !(c.AgeFactor >= 0 && c.AgeFactor <= 1):
		return fmt.Errorf("%w: AgeFactor %v", ErrBadConfig, c.AgeFactor)
	case c.AgeEvery < 0:
		return fmt.Errorf("%w: AgeEvery %d", ErrBadConfig, c.AgeEvery)
	}
	return nil
}

func (c StatsConfig) minSamples() float64 {
	if c.MinSamples == 0 {
		return DefaultMinSamples
	}
	return c.MinSamples
}

func (c StatsConfig) ageing() (factor float64, every int64, on bool) {
	if c.AgeFactor == 0 || c.AgeFactor == 1 {
		return 1, 0, false
	}
	every = int64(c.AgeEvery)
	if every == 0 {
		every = DefaultAgeEvery
	}
	return c.AgeFactor, every, true
}

// class is one histogram and its published read-only snapshot.
type class struct {
	h    Histogram
	snap *Histogram // prepared clone handed out to readers; nil when stale
}

func (c *class) snapshot() *Histogram {
	if c.snap == nil {
		c.snap = c.h.Clone()
	}
	return c.snap
}

// Stats holds the runtime-ratio histograms of every job class under every
// classifier at once (runtime band, procs band, user, application) plus the
// general histogram, learned from finished jobs. Config.Classifier only
// decides which one Histogram returns, so one Stats serves all classifiers.
//
// Stats is safe for concurrent use. The zero value is usable and has the
// zero StatsConfig (general class, default MinSamples, no ageing).
type Stats struct {
	mu      sync.Mutex
	cfg     StatsConfig
	updates int64
	general class
	classes [numClassifiers]map[string]*class // index General unused
}

// NewStats returns empty statistics. It returns ErrBadConfig for an invalid
// configuration.
func NewStats(cfg StatsConfig) (*Stats, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Stats{cfg: cfg}, nil
}

// Config returns the configuration.
func (s *Stats) Config() StatsConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Updates is the number of observations so far (Record, Observe and Train).
func (s *Stats) Updates() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

// Observation is what the end of a job tells about its runtime: it ran Ran
// seconds and then either ended by itself (it completed, or its command
// failed, or it was killed after receiving its full estimate: bin 100), or,
// when Censored, was stopped before it ended (cut at the end of an
// overbooked reservation, cancelled while running): it needed more than Ran.
type Observation struct {
	Ran      int64
	Censored bool
}

// Observe records a finished job (the online update): actual is its real
// runtime in seconds. It is Record with an uncensored observation.
func (s *Stats) Observe(j JobInfo, actual int64) error {
	return s.Record(j, Observation{Ran: actual})
}

// Record records what the end of job j tells about its runtime. It updates
// the general histogram and j's class under every classifier (AddCensored
// for a censored observation), then ages everything if an ageing period
// just ended. It returns ErrBadSample for a non-positive estimate or a
// negative runtime.
func (s *Stats) Record(j JobInfo, o Observation) error {
	if j.Estimate <= 0 || o.Ran < 0 {
		return fmt.Errorf("%w: ran %d, estimate %d", ErrBadSample, o.Ran, j.Estimate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observe(j, o)
	return nil
}

func (s *Stats) observe(j JobInfo, o Observation) {
	add := (*Histogram).Add
	if o.Censored {
		add = (*Histogram).AddCensored
	}
	_ = add(&s.general.h, o.Ran, j.Estimate) // validated by the caller
	s.general.snap = nil
	for c := ByRuntime; c < numClassifiers; c++ {
		k, ok := KeyOf(c, j)
		if !ok {
			continue
		}
		if s.classes[c] == nil {
			s.classes[c] = make(map[string]*class)
		}
		cl := s.classes[c][k.Key]
		if cl == nil {
			cl = new(class)
			s.classes[c][k.Key] = cl
		}
		_ = add(&cl.h, o.Ran, j.Estimate)
		cl.snap = nil
	}
	s.updates++
	if f, every, on := s.cfg.ageing(); on && s.updates%every == 0 {
		s.ageAll(f)
	}
}

func (s *Stats) ageAll(f float64) {
	_ = s.general.h.Age(f)
	s.general.snap = nil
	for _, m := range s.classes {
		for _, cl := range m {
			_ = cl.h.Age(f)
			cl.snap = nil
		}
	}
}

// Train records a batch of finished jobs, in order, as repeated Observe
// calls (so ageing applies in that order). jobs[i] ran actuals[i] seconds.
// The batch is validated first: on error (ErrLengthMismatch, or ErrBadSample
// naming the index) nothing is recorded.
func (s *Stats) Train(jobs []JobInfo, actuals []int64) error {
	if len(jobs) != len(actuals) {
		return fmt.Errorf("%w: %d jobs, %d actuals", ErrLengthMismatch, len(jobs), len(actuals))
	}
	for i, j := range jobs {
		if j.Estimate <= 0 || actuals[i] < 0 {
			return fmt.Errorf("%w: job %d: actual %d, estimate %d", ErrBadSample, i, actuals[i], j.Estimate)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range jobs {
		s.observe(j, Observation{Ran: actuals[i]})
	}
	return nil
}

// Histogram returns the histogram for j under the configured classifier, or
// the general histogram when j's class is missing or thinner than
// MinSamples. The result is a read-only snapshot shared with other callers
// until the next update: do not call Add or Age on it.
func (s *Stats) Histogram(j JobInfo) *Histogram {
	h, _ := s.Resolve(j)
	return h
}

// Resolve is Histogram that also reports which class was used (the general
// class after a fallback).
func (s *Stats) Resolve(j JobInfo) (*Histogram, ClassKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resolve(s.cfg.Classifier, j)
}

// HistogramBy is Histogram under classifier c instead of the configured one.
func (s *Stats) HistogramBy(c Classifier, j JobInfo) *Histogram {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.resolve(c, j)
	return h
}

func (s *Stats) resolve(c Classifier, j JobInfo) (*Histogram, ClassKey) {
	if k, ok := KeyOf(c, j); ok && c != General {
		if cl := s.classes[c][k.Key]; cl != nil && cl.h.N() >= s.cfg.minSamples() {
			return cl.snapshot(), k
		}
	}
	return s.general.snapshot(), ClassKey{By: General}
}

// Classes lists the keys of all classes that have samples under classifier
// c (for General, the single general key if it has samples). Order is
// unspecified.
func (s *Stats) Classes(c Classifier) []ClassKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == General {
		if s.general.h.N() > 0 {
			return []ClassKey{{By: General}}
		}
		return nil
	}
	if c < 0 || c >= numClassifiers {
		return nil
	}
	out := make([]ClassKey, 0, len(s.classes[c]))
	for k := range s.classes[c] {
		out = append(out, ClassKey{By: c, Key: k})
	}
	return out
}

// statsVersion is the serialisation format version.
const statsVersion = 1

type statsJSON struct {
	Version int                              `json:"version"`
	Config  StatsConfig                      `json:"config"`
	Updates int64                            `json:"updates"`
	General *Histogram                       `json:"general"`
	Classes map[string]map[string]*Histogram `json:"classes,omitempty"`
}

// MarshalJSON serialises the configuration, the observation counter (it
// drives the ageing schedule) and every histogram. UnmarshalJSON restores a
// Stats whose histograms are bit-identical and which continues ageing on the
// same schedule.
func (s *Stats) MarshalJSON() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := statsJSON{
		Version: statsVersion,
		Config:  s.cfg,
		Updates: s.updates,
		General: &s.general.h,
	}
	for c := ByRuntime; c < numClassifiers; c++ {
		if len(s.classes[c]) == 0 {
			continue
		}
		if out.Classes == nil {
			out.Classes = make(map[string]map[string]*Histogram)
		}
		m := make(map[string]*Histogram, len(s.classes[c]))
		for k, cl := range s.classes[c] {
			m[k] = &cl.h
		}
		out.Classes[c.String()] = m
	}
	return json.Marshal(out)
}

// UnmarshalJSON replaces s with the serialised statistics. Any malformed
// input (bad JSON, unknown fields, trailing data, wrong version, invalid
// configuration, bad band keys, corrupt histograms) returns an error
// wrapping ErrCorrupt and leaves s unchanged. It never panics.
func (s *Stats) UnmarshalJSON(b []byte) error {
	var in statsJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data", ErrCorrupt)
	}
	if in.Version != statsVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrCorrupt, in.Version, statsVersion)
	}
	if err := in.Config.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if in.Updates < 0 {
		return fmt.Errorf("%w: negative update count", ErrCorrupt)
	}
	if in.General == nil {
		return fmt.Errorf("%w: missing general histogram", ErrCorrupt)
	}
	var classes [numClassifiers]map[string]*class
	for name, m := range in.Classes {
		c, err := ParseClassifier(name)
		if err != nil || c == General {
			return fmt.Errorf("%w: unknown class family %q", ErrCorrupt, name)
		}
		classes[c] = make(map[string]*class, len(m))
		for k, h := range m {
			if h == nil {
				return fmt.Errorf("%w: null histogram %s/%s", ErrCorrupt, name, k)
			}
			if err := validKey(c, k); err != nil {
				return err
			}
			classes[c][k] = &class{h: *h}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = in.Config
	s.updates = in.Updates
	s.general = class{h: *in.General}
	s.classes = classes
	return nil
}

func validKey(c Classifier, k string) error {
	var n int
	switch c {
	case ByRuntime:
		n = NumRuntimeBands
	case ByProcs:
		n = NumProcsBands
	default:
		if k == "" {
			return fmt.Errorf("%w: empty %s key", ErrCorrupt, c)
		}
		return nil
	}
	i, err := strconv.Atoi(k)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != k {
		return fmt.Errorf("%w: bad %s band %q", ErrCorrupt, c, k)
	}
	return nil
}

// Reconfigure replaces the configuration (classifier, fallback, ageing)
// and keeps the samples and the observation count; it returns ErrBadConfig
// for an invalid configuration. Statistics loaded from JSON carry the
// configuration they were saved with; a site whose settings changed
// reapplies its own.
func (s *Stats) Reconfigure(cfg StatsConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = cfg
	s.general.snap = nil
	for _, m := range s.classes {
		for _, cl := range m {
			cl.snap = nil
		}
	}
	return nil
}
