package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/node/store"
)

// A site remembers, durably, the gossip addresses of the members it last
// saw alive (store meta key metaMembers), and joins them as well as its
// configured seeds when it starts. So a restarted site rejoins the
// federation it was in, even a seed that was started without --join
// (which others joined): it asks its old peers back. The record is a
// store meta entry, an addition no older node reads.
const metaMembers = "gossip_members"

// knownMembers returns the stored gossip addresses of the site's last
// members, or none.
func knownMembers(ctx context.Context, st store.Store) ([]string, error) {
	v, err := st.GetMeta(ctx, metaMembers)
	if errors.Is(err, store.ErrNotFound) || v == "" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return strings.Split(v, ","), nil
}

// seeds is the configured join list followed by the remembered members not
// already in it.
func seeds(join, known []string) []string {
	out := slices.Clone(join)
	for _, k := range known {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// rememberMembers stores the gossip addresses of the alive peers whenever
// they change, until ctx ends. An empty membership (the site alone) is not
// stored: it would forget the federation.
func (n *Node) rememberMembers(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := ""
	for {
		var addrs []string
		for _, m := range n.fed.Peers.Members() {
			if !m.Local && m.State == discovery.Alive && m.Addr != "" {
				addrs = append(addrs, m.Addr)
			}
		}
		slices.Sort(addrs)
		if v := strings.Join(addrs, ","); v != "" && v != last {
			if err := n.deps.Store.PutMeta(ctx, metaMembers, v); err != nil {
				if ctx.Err() == nil {
					n.log.Warn("remembering the federation's members failed", "err", err)
				}
			} else {
				last = v
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
