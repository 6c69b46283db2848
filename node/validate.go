package node

import (
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fedsched/fedsched/node/executor"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// Limits on request fields; oversize input is refused, never truncated.
const (
	maxKeyLen     = 128
	maxNameLen    = 128 // user, app
	maxArgs       = 1024
	maxArgLen     = 8192
	maxEnv        = 1024
	maxPathLen    = 4096
	maxEstimate   = 366 * 24 * 3600 // a year
	maxFutureTime = 10 * 366 * 24 * 3600
	maxMessageLen = 1024
	// maxPageBytes bounds a ListJobs page's jobs, well inside gRPC's
	// default 4 MiB message limit: large jobs page by size, not only count.
	maxPageBytes = 3 << 20
)

// validateSubmit checks a submission against the site. It returns an error
// wrapping ErrInvalidJob whose message says what to fix. now is the site's
// time in seconds.
func (n *Node) validateSubmit(req *fedschedv1.SubmitJobRequest, now int64) error {
	if err := noUnknownFields(req); err != nil {
		return err
	}
	if k := req.GetIdempotencyKey(); len(k) > maxKeyLen || !utf8.ValidString(k) {
		return fmt.Errorf("idempotency_key: at most %d bytes of UTF-8: %w", maxKeyLen, ErrInvalidJob)
	}
	return n.validateSpec(req.GetSpec(), now)
}

// validateSpec checks a job spec against the site (for a submission or a
// peer's quote request).
func (n *Node) validateSpec(s *fedschedv1.JobSpec, now int64) error {
	if s == nil {
		return fmt.Errorf("spec is required: %w", ErrInvalidJob)
	}
	if err := noUnknownFields(s); err != nil {
		return err
	}
	switch {
	case s.GetProcs() <= 0:
		return fmt.Errorf("procs must be at least 1, got %d: %w", s.GetProcs(), ErrInvalidJob)
	case int(s.GetProcs()) > n.procs && !n.federating():
		// A federated site may delegate a job wider than itself.
		return fmt.Errorf("procs %d exceeds the site's %d processors: %w", s.GetProcs(), n.procs, ErrInvalidJob)
	case s.GetEstimateSeconds() <= 0:
		return fmt.Errorf("estimate_seconds must be at least 1, got %d: %w", s.GetEstimateSeconds(), ErrInvalidJob)
	case s.GetEstimateSeconds() > maxEstimate:
		return fmt.Errorf("estimate_seconds %d exceeds the limit of one year: %w", s.GetEstimateSeconds(), ErrInvalidJob)
	case s.GetSimRuntimeSeconds() < 0:
		return fmt.Errorf("sim_runtime_seconds must not be negative: %w", ErrInvalidJob)
	case !finiteNonNegative(s.GetFee()):
		return fmt.Errorf("fee must be a finite number >= 0, got %v: %w", s.GetFee(), ErrInvalidJob)
	case !finiteNonNegative(s.GetPenalty()):
		return fmt.Errorf("penalty must be a finite number >= 0, got %v: %w", s.GetPenalty(), ErrInvalidJob)
	case s.GetUser() == "":
		return fmt.Errorf("user is required: %w", ErrInvalidJob)
	case len(s.GetUser()) > maxNameLen || !printable(s.GetUser()):
		return fmt.Errorf("user: at most %d bytes of printable UTF-8 (no control, format or bidirectional characters): %w", maxNameLen, ErrInvalidJob)
	case len(s.GetApp()) > maxNameLen || !printable(s.GetApp()):
		return fmt.Errorf("app: at most %d bytes of printable UTF-8 (no control, format or bidirectional characters): %w", maxNameLen, ErrInvalidJob)
	case len(s.GetWorkdir()) > maxPathLen || containsNUL(s.GetWorkdir()):
		return fmt.Errorf("workdir: at most %d bytes without NUL: %w", maxPathLen, ErrInvalidJob)
	case len(s.GetCommand()) > maxArgs:
		return fmt.Errorf("command: at most %d arguments: %w", maxArgs, ErrInvalidJob)
	case len(s.GetEnv()) > maxEnv:
		return fmt.Errorf("env: at most %d variables: %w", maxEnv, ErrInvalidJob)
	}
	for i, a := range s.GetCommand() {
		if len(a) > maxArgLen || !utf8.ValidString(a) || containsNUL(a) {
			return fmt.Errorf("command[%d]: at most %d bytes of UTF-8 without NUL: %w", i, maxArgLen, ErrInvalidJob)
		}
	}
	for k, v := range s.GetEnv() {
		if k == "" || len(k)+len(v) > maxArgLen || containsNUL(k) || containsNUL(v) || containsByte(k, '=') {
			return fmt.Errorf("env %q: names must be non-empty without '=' or NUL, and name plus value at most %d bytes: %w", k, maxArgLen, ErrInvalidJob)
		}
	}
	if err := checkBatchFields(s, n.cfg.Executor); err != nil {
		return err
	}
	if ac, ok := n.deps.Executor.(executor.AccountChecker); ok {
		if err := ac.CheckAccount(s.GetUser()); err != nil {
			return fmt.Errorf("site %s cannot run the job: %w", n.cfg.Site, err)
		}
	}
	release := now
	if r := s.GetRelease(); r != nil {
		if err := r.CheckValid(); err != nil {
			return fmt.Errorf("release: %v: %w", err, ErrInvalidJob)
		}
		if r.AsTime().Unix() > now+maxFutureTime {
			return fmt.Errorf("release is more than ten years ahead: %w", ErrInvalidJob)
		}
		release = max(now, r.AsTime().Unix())
	}
	if d := s.GetDeadline(); d != nil {
		if err := d.CheckValid(); err != nil {
			return fmt.Errorf("deadline: %v: %w", err, ErrInvalidJob)
		}
		if d.AsTime().Unix() > now+maxFutureTime {
			return fmt.Errorf("deadline is more than ten years ahead: %w", ErrInvalidJob)
		}
		if d.AsTime().Unix() < release+s.GetEstimateSeconds() {
			return fmt.Errorf("deadline %s is before release + estimate (%s): %w", d.AsTime().UTC().Format(time.RFC3339),
				time.Unix(release+s.GetEstimateSeconds(), 0).UTC().Format(time.RFC3339), ErrInvalidJob)
		}
	} else if s.GetFee() != 0 || s.GetPenalty() != 0 {
		return fmt.Errorf("fee and penalty need a deadline (a job without one is best-effort): %w", ErrInvalidJob)
	}
	return nil
}

// noUnknownFields refuses a message (or any message inside it) carrying
// fields this server does not know: a client built against a newer API
// must not have its intent silently dropped.
func noUnknownFields(m proto.Message) error {
	if hasUnknown(m.ProtoReflect()) {
		return fmt.Errorf("the request has fields this site does not know (is the client newer than the site?): %w", ErrInvalidRequest)
	}
	return nil
}

func hasUnknown(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		if fd.IsList() {
			for i := 0; i < v.List().Len(); i++ {
				if hasUnknown(v.List().Get(i).Message()) {
					found = true
				}
			}
		} else if hasUnknown(v.Message()) {
			found = true
		}
		return !found
	})
	return found
}

func finiteNonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

func containsNUL(s string) bool { return containsByte(s, 0) }

// printable reports whether s is valid UTF-8 without control or format
// characters, nor line or paragraph separators (names end up in index keys
// and tables; a bidirectional override such as U+202E or a zero-width
// character would make one name look like another).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func containsByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}
