package main

import (
	"slices"
	"testing"
	"time"
)

// TestIdempotencyKeysSortByTime: keys made later sort after keys made
// earlier (so a site appends them to its B+tree), keys made in one
// millisecond still differ, and every key is 128 bits in hex.
func TestIdempotencyKeysSortByTime(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	var keys []string
	for i := range 200 {
		at := t0.Add(time.Duration(i/4) * time.Millisecond) // four keys per millisecond
		k, err := idempotencyKeyAt(at)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != 32 {
			t.Fatalf("key %q: %d hex digits, want 32", k, len(k))
		}
		keys = append(keys, k)
	}
	for i := 4; i < len(keys); i++ {
		if keys[i] <= keys[i-4] {
			t.Fatalf("key %d (%s) made a millisecond after key %d (%s) sorts before it", i, keys[i], i-4, keys[i-4])
		}
	}
	if u := slices.Compact(slices.Sorted(slices.Values(keys))); len(u) != len(keys) {
		t.Fatalf("%d distinct keys of %d", len(u), len(keys))
	}
	if k, _ := newIdempotencyKey(); k[:12] < keys[0][:12] {
		t.Errorf("a key made now (%s) sorts before one of %v (%s)", k, t0, keys[0])
	}
}
