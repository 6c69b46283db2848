package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	ok := map[string]time.Duration{
		"90s":      90 * time.Second,
		"2h":       2 * time.Hour,
		"1h30m":    90 * time.Minute,
		"2d":       2 * day,
		"1d12h":    day + 12*time.Hour,
		"1d1h1m1s": day + time.Hour + time.Minute + time.Second,
		"0":        0,
		"0d":       0,
		"-5m":      -5 * time.Minute,
		"-1d":      -day,
		"+2h":      2 * time.Hour,
		" 2h ":     2 * time.Hour,
		"1500ms":   1500 * time.Millisecond,
		"106751d":  106751 * day,
	}
	for in, want := range ok {
		got, err := parseDuration(in)
		if err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := []string{"", " ", "d", "2", "90", "2x", "h", "1.5d", "d2h", "2d-1h", "2d+1h", "--1h", "+-1h", "-+1h",
		"2dd", "1d2d", "99999999999999999999d", "106752d", "106751d24h", "1e3s", "∞", "2 h", "\x00", "-", "+"}
	for _, in := range bad {
		if d, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, d)
		} else if !strings.Contains(err.Error(), "e.g. 90s") {
			t.Errorf("parseDuration(%q): error %q does not show examples", in, err)
		}
	}
}

func TestParseTimeArg(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := map[string]time.Time{
		"2026-05-01T12:00:00Z":           time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		"2026-05-01T14:00:00+02:00":      time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		"2026-05-01T12:00:00.5Z":         time.Date(2026, 5, 1, 12, 0, 0, 5e8, time.UTC),
		"now":                            now,
		"+2h":                            now.Add(2 * time.Hour),
		"+90m":                           now.Add(90 * time.Minute),
		"+1d":                            now.Add(24 * time.Hour),
		"+0s":                            now,
		" +2h":                           now.Add(2 * time.Hour),
		"2026-05-01T12:00:00.123456789Z": time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC),
	}
	for in, want := range ok {
		ta, err := parseTimeArg(in)
		if err != nil || !ta.set || !ta.resolve(now).Equal(want) {
			t.Errorf("parseTimeArg(%q) = %+v, %v; want %v", in, ta, err, want)
		}
	}
	bad := []string{"", "+", "++2h", "+-2h", "-2h", "2h", "tomorrow", "2026-05-01", "2026-05-01T12:00:00",
		"2026-13-01T12:00:00Z", "2026-05-01 12:00:00Z", "+2x", "now+1h", "+1.5d", "\xff"}
	for _, in := range bad {
		if ta, err := parseTimeArg(in); err == nil {
			t.Errorf("parseTimeArg(%q) = %+v, want an error", in, ta)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := map[time.Duration]string{
		0:                            "0s",
		90 * time.Second:             "1m30s",
		5400 * time.Second:           "1h30m",
		48 * time.Hour:               "2d",
		26*time.Hour + 3*time.Second: "1d2h3s",
		-90 * time.Minute:            "-1h30m",
		1500 * time.Millisecond:      "1s500ms",
		100 * time.Millisecond:       "100ms",
		time.Duration(math.MinInt64): time.Duration(math.MinInt64).String(),
		time.Duration(math.MaxInt64): "106751d23h47m16s854.775807ms",
	}
	for d, want := range tests {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", int64(d), got, want)
		}
		// What formatDuration prints, parseDuration reads back (whole
		// units; sub-second remainders aside).
		if d%time.Second == 0 && d != time.Duration(math.MinInt64) {
			if back, err := parseDuration(want); err != nil || back != d {
				t.Errorf("parseDuration(formatDuration(%v)) = %v, %v", d, back, err)
			}
		}
	}
	if got := formatSeconds(math.MaxInt64); got != "9223372036854775807s" {
		t.Errorf("formatSeconds(max) = %q", got)
	}
	if got := formatSeconds(7200); got != "2h" {
		t.Errorf("formatSeconds(7200) = %q", got)
	}
}

func TestParseEnv(t *testing.T) {
	env, err := parseEnv([]string{"A=1", "B=", "C=x=y"})
	if err != nil || len(env) != 3 || env["A"] != "1" || env["B"] != "" || env["C"] != "x=y" {
		t.Errorf("parseEnv = %v, %v", env, err)
	}
	if env, err := parseEnv(nil); env != nil || err != nil {
		t.Errorf("parseEnv(nil) = %v, %v", env, err)
	}
	for _, bad := range [][]string{{"A"}, {"=1"}, {"A=1", "A=2"}} {
		if _, err := parseEnv(bad); err == nil {
			t.Errorf("parseEnv(%q): no error", bad)
		}
	}
}

// FuzzParsers checks that no input makes the parsers panic.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{"90s", "2d", "1d12h", "+2h", "now", "2026-05-01T12:00:00Z", "-", "+", "d", "99999999999999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseDuration(s); err == nil {
			_ = formatDuration(d)
		}
		if ta, err := parseTimeArg(s); err == nil {
			_ = ta.resolve(time.Now())
		}
		_, _ = parseEnv([]string{s})
		_, _ = parseState(s)
	})
}
