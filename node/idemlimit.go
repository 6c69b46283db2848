package node

import (
	"context"
	"fmt"
	"sync/atomic"
)

// keyCounter counts each user's idempotency keys for
// limits.max_idempotency_keys without walking the store at every
// submission: a user's count is read from the store once
// (CountIdempotencyKeys, a walk bounded by the limit), then kept by the
// core goroutine as it accepts keyed submissions (written or not yet). A
// prune, on another goroutine, makes every count stale: the next check
// reads the store again. The node deletes no job, so nothing else removes
// keys.
type keyCounter struct {
	counts map[string]int // by user; owned by the core goroutine
	seen   uint64         // the prune generation the counts were read in
	gen    atomic.Uint64  // incremented by pruneKeys when it forgot keys
}

// checkKeyLimit refuses a submission with a new idempotency key when its
// user already has limits.max_idempotency_keys keys remembered. Keys are
// user-scoped ("user/KEY", userKey), so the store counts them by prefix.
// A refusal happens before the job takes a sequence number, so it changes
// nothing; a call that passes counts its key.
func (n *Node) checkKeyLimit(ctx context.Context, user string) (submitResult, bool) {
	limit := n.cfg.Limits.WithDefaults().MaxIdempotencyKeys
	kc := &n.keys
	if g := kc.gen.Load(); kc.counts == nil || g != kc.seen {
		kc.counts, kc.seen = make(map[string]int), g
	}
	have, ok := kc.counts[user]
	if !ok {
		stored, err := n.deps.Store.CountIdempotencyKeys(ctx, user+"/", limit)
		if err != nil {
			return submitResult{err: fmt.Errorf("counting the idempotency keys of user %s: %w: %w", user, ErrUnavailable, err)}, true
		}
		have = stored
	}
	if have >= limit {
		kc.counts[user] = have
		return submitResult{err: fmt.Errorf("user %s has %d idempotency keys remembered at site %s, the most it allows (limits.max_idempotency_keys); "+
			"submit without one (fedsched submit --idempotency-key '') or wait: a key is forgotten %s after its job's submission: %w",
			user, have, n.cfg.Site, keyRetention, ErrLimitReached)}, true
	}
	kc.counts[user] = have + 1
	return submitResult{}, false
}
