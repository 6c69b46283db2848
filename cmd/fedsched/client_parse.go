package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Parsers of the client commands' duration and time arguments. They never
// panic: every input either parses or yields an error that names it.

const durationHelp = "e.g. 90s, 2h, 1h30m or 2d"

// parseDuration reads a Go duration ("90s", "2h", "1h30m", "-5m") or one
// with a leading whole number of days ("2d", "1d12h", "-1d"). A day is 24
// hours. The sign, if any, comes first.
func parseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	bad := func(why string) error {
		if why != "" {
			why = ": " + why
		}
		return fmt.Errorf("invalid duration %q%s (%s)", s, why, durationHelp)
	}
	if in == "" {
		return 0, bad("empty")
	}
	body, neg := in, false
	switch body[0] {
	case '-':
		body, neg = body[1:], true
	case '+':
		body = body[1:]
	}
	i := strings.IndexByte(body, 'd')
	if i < 0 {
		if body == "" || body[0] == '+' || body[0] == '-' {
			return 0, bad("")
		}
		if isDigits(body) && body != "0" {
			return 0, bad("missing unit")
		}
		d, err := time.ParseDuration(body)
		if err != nil {
			return 0, bad("")
		}
		if neg {
			d = -d
		}
		return d, nil
	}
	days, rest := body[:i], body[i+1:]
	if !isDigits(days) {
		return 0, bad("days must be a whole number")
	}
	n, err := strconv.ParseInt(days, 10, 64)
	const day = int64(24 * time.Hour)
	if err != nil || n > math.MaxInt64/day {
		return 0, bad("too long")
	}
	total := time.Duration(n * day)
	if rest != "" {
		if rest[0] == '+' || rest[0] == '-' {
			return 0, bad("")
		}
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, bad("")
		}
		if r > time.Duration(math.MaxInt64)-total {
			return 0, bad("too long")
		}
		total += r
	}
	if neg {
		total = -total
	}
	return total, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// wholeSeconds converts d to a count of seconds; the API counts in whole
// seconds, so a fraction of a second is an error rather than rounded away.
func wholeSeconds(d time.Duration) (int64, error) {
	if d%time.Second != 0 {
		return 0, fmt.Errorf("%v is not a whole number of seconds", d)
	}
	return int64(d / time.Second), nil
}

// timeArg is a parsed time argument: an instant, or an offset from "now"
// that is resolved later (against the site's clock, see submit).
type timeArg struct {
	set    bool
	rel    bool
	abs    time.Time
	offset time.Duration
}

// parseTimeArg reads an RFC 3339 time ("2026-05-01T12:00:00Z",
// "2026-05-01T14:00:00+02:00"), "now", or "+DURATION" relative to now
// ("+2h", "+90m", "+1d").
func parseTimeArg(s string) (timeArg, error) {
	in := strings.TrimSpace(s)
	switch {
	case in == "":
		return timeArg{}, fmt.Errorf("invalid time %q: empty (want RFC 3339, now or +DURATION)", s)
	case in == "now":
		return timeArg{set: true, rel: true}, nil
	case in[0] == '+':
		rest := in[1:]
		if rest == "" || rest[0] == '+' || rest[0] == '-' {
			return timeArg{}, fmt.Errorf("invalid time %q: want +DURATION (%s)", s, durationHelp)
		}
		d, err := parseDuration(rest)
		if err != nil {
			return timeArg{}, fmt.Errorf("invalid time %q: %w", s, err)
		}
		return timeArg{set: true, rel: true, offset: d}, nil
	}
	t, err := time.Parse(time.RFC3339, in)
	if err != nil {
		return timeArg{}, fmt.Errorf("invalid time %q: want RFC 3339 (2026-05-01T12:00:00Z), now or +DURATION (+2h, +90m)", s)
	}
	return timeArg{set: true, abs: t}, nil
}

// resolve returns the instant: abs, or now + offset.
func (t timeArg) resolve(now time.Time) time.Time {
	if t.rel {
		return now.Add(t.offset)
	}
	return t.abs
}

// durationValue is a pflag.Value for parseDuration.
type durationValue struct{ d time.Duration }

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	v.d = d
	return nil
}

// String is "" for zero, so that --help shows no "(default 0s)".
func (v *durationValue) String() string {
	if v.d == 0 {
		return ""
	}
	return formatDuration(v.d)
}
func (*durationValue) Type() string { return "duration" }

// timeValue is a pflag.Value for parseTimeArg.
type timeValue struct {
	t   timeArg
	raw string
}

func (v *timeValue) Set(s string) error {
	t, err := parseTimeArg(s)
	if err != nil {
		return err
	}
	v.t, v.raw = t, s
	return nil
}

func (v *timeValue) String() string { return v.raw }
func (*timeValue) Type() string     { return "time" }

// formatDuration prints d the way parseDuration reads it, days first:
// 90s, 1h30m, 2d, 1d2h3m4s; sub-second remainders in Go's notation.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d < 0 {
		if d == math.MinInt64 {
			return d.String()
		}
		return "-" + formatDuration(-d)
	}
	var b strings.Builder
	units := []struct {
		suffix string
		size   time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}}
	for _, u := range units {
		if n := d / u.size; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.suffix)
			d -= n * u.size
		}
	}
	if d > 0 {
		b.WriteString(d.String())
	}
	return b.String()
}

// formatSeconds prints a count of seconds like formatDuration, and
// saturates rather than overflowing.
func formatSeconds(s int64) string {
	if s > int64(math.MaxInt64/time.Second) || s < int64(math.MinInt64/time.Second)+1 {
		return strconv.FormatInt(s, 10) + "s"
	}
	return formatDuration(time.Duration(s) * time.Second)
}

var errEmptyEnv = errors.New("want KEY=VALUE with a non-empty KEY")

// parseEnv reads repeated KEY=VALUE arguments. A key given twice is an
// error: the job's environment is exactly what the user wrote.
func parseEnv(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: %w", kv, errEmptyEnv)
		}
		if _, dup := env[k]; dup {
			return nil, fmt.Errorf("--env: %s given twice", k)
		}
		env[k] = v
	}
	return env, nil
}
