package node

import (
	"context"
	"fmt"
)

// checkKeyLimit refuses a submission with a new idempotency key when its
// user already has limits.max_idempotency_keys keys remembered: those in
// the store and those of this turn's new jobs, not yet written. Keys are
// user-scoped ("user/KEY", userKey), so the store counts them by prefix.
// A refusal happens before the job takes a sequence number, so it changes
// nothing; a call that passes counts its key in this turn.
func (n *Node) checkKeyLimit(ctx context.Context, user string) (submitResult, bool) {
	limit := n.cfg.Limits.WithDefaults().MaxIdempotencyKeys
	stored, err := n.deps.Store.CountIdempotencyKeys(ctx, user+"/", limit)
	if err != nil {
		return submitResult{err: fmt.Errorf("counting the idempotency keys of user %s: %w: %w", user, ErrUnavailable, err)}, true
	}
	if have := stored + n.pending.newKeys[user]; have >= limit {
		return submitResult{err: fmt.Errorf("user %s has %d idempotency keys remembered at site %s, the most it allows (limits.max_idempotency_keys); "+
			"submit without one (fedsched submit --idempotency-key '') or wait: a key is forgotten %s after its job's submission: %w",
			user, have, n.cfg.Site, keyRetention, ErrLimitReached)}, true
	}
	if n.pending.newKeys == nil {
		n.pending.newKeys = make(map[string]int)
	}
	n.pending.newKeys[user]++
	return submitResult{}, false
}
