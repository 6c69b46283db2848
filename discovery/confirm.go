package discovery

import (
	"context"
	"fmt"
	"sync"
)

// Prober checks over gRPC that a site is serving. The node implements it
// with the gRPC health check of the site at addr (a Digest.Addr); tests use
// a fake.
//
// Probe returns nil if the site answered, an error otherwise. It must
// return once ctx is done, and be safe for concurrent use: Classify probes
// several members at once.
type Prober interface {
	Probe(ctx context.Context, addr string) error
}

// ProberFunc adapts a function to the Prober interface.
type ProberFunc func(ctx context.Context, addr string) error

// Probe calls f(ctx, addr).
func (f ProberFunc) Probe(ctx context.Context, addr string) error { return f(ctx, addr) }

// Confirm checks a member's gossip state against its gRPC API, so that the
// site acts on what it can verify rather than on gossip alone. The rule:
//
//   - The local member is alive; it is not probed.
//   - A Left member announced its own departure: not alive, err nil; it is
//     not probed.
//   - Any other member (Alive, Suspect or Dead by gossip) is probed at its
//     Digest.Addr. If the probe succeeds it is alive, whatever gossip says.
//     If the probe fails while ctx is still live, it is confirmed down: not
//     alive, err nil.
//
// A non-nil error means Confirm could not decide and the member stays
// unconfirmed: the member has no gRPC address (ErrNoAddress; its digest
// could not be decoded), or ctx ended before or during the probe (the error
// wraps ctx.Err()). A member gossip marks Suspect or Dead is unconfirmed
// until a probe fails: the site must not, for example, give up on the work
// it delegated there before then.
func Confirm(ctx context.Context, m Member, p Prober) (alive bool, err error) {
	switch {
	case m.Local:
		return true, nil
	case m.State == Left:
		return false, nil
	case m.Digest.Addr == "":
		if m.DigestErr != nil {
			return false, fmt.Errorf("confirm %s: %w: %w", m.Name, ErrNoAddress, m.DigestErr)
		}
		return false, fmt.Errorf("confirm %s: %w", m.Name, ErrNoAddress)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("confirm %s: %w", m.Name, err)
	}
	probeErr := p.Probe(ctx, m.Digest.Addr)
	if probeErr == nil {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("confirm %s at %s: %w (probe: %w)", m.Name, m.Digest.Addr, err, probeErr)
	}
	return false, nil
}

// Verdict sorts the other members of the federation by what the site may
// do with them. Each list keeps the order of the members given to Classify;
// the local member is in none.
type Verdict struct {
	// Reachable members may be asked for quotes: Alive by gossip and not
	// leaving (not probed: the quote itself is the check, and gossip alone
	// never decides a delegation), or Suspect or Dead by gossip but
	// answering the probe.
	Reachable []Member

	// Unconfirmed members are Suspect or Dead by gossip and not confirmed:
	// the probe could not be made (no gRPC address, ctx ended). The site
	// neither delegates to them nor gives up on them yet.
	Unconfirmed []Member

	// Down members are confirmed gone: they Left, or they are Suspect or
	// Dead by gossip and the probe failed. The site may act on their
	// absence, for example by re-placing the work it delegated there.
	Down []Member
}

// Classify applies Confirm's rule to members (typically Membership.Members)
// and sorts them into a Verdict. It probes the Suspect and Dead members, all
// at once, and returns when every probe has returned. Alive members that
// are leaving (Digest.Leaving) or have no gRPC address (a digest this code
// cannot decode) are in no list.
func Classify(ctx context.Context, members []Member, p Prober) Verdict {
	type result struct {
		alive bool
		err   error
	}
	results := make([]result, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.Local || m.State == Alive || m.State == Left {
			continue
		}
		wg.Go(func() {
			alive, err := Confirm(ctx, m, p)
			results[i] = result{alive, err}
		})
	}
	wg.Wait()

	var v Verdict
	for i, m := range members {
		switch {
		case m.Local:
		case m.State == Left:
			v.Down = append(v.Down, m)
		case m.State == Alive:
			if m.Digest.Addr != "" && !m.Digest.Leaving {
				v.Reachable = append(v.Reachable, m)
			}
		case results[i].err != nil:
			v.Unconfirmed = append(v.Unconfirmed, m)
		case results[i].alive:
			v.Reachable = append(v.Reachable, m)
		default:
			v.Down = append(v.Down, m)
		}
	}
	return v
}

// Reachable returns the other members the site may ask for quotes:
// Classify(ctx, m.Members(), p).Reachable. See Classify for the rule.
func (m *Membership) Reachable(ctx context.Context, p Prober) []Member {
	return Classify(ctx, m.Members(), p).Reachable
}
