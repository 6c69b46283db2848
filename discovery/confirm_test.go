package discovery

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestConfirm(t *testing.T) {
	refused := errors.New("connection refused")
	withAddr := func(name string, state MemberState) Member {
		d := testDigest(name)
		d.Addr = name + ".example:7070"
		return Member{Name: name, State: state, Digest: d}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := map[string]struct {
		member    Member
		probeErr  error           // what the probe returns
		ctx       context.Context // nil: Background
		wantAlive bool
		wantErr   error // nil: no error
		wantProbe bool  // whether the member is probed
	}{
		"the local member is alive without a probe": {
			member: Member{Name: "me", State: Alive, Local: true}, wantAlive: true,
		},
		"a member that left is down without a probe": {
			member: withAddr("gone", Left),
		},
		"a dead member that answers is alive": {
			member: withAddr("x", Dead), wantAlive: true, wantProbe: true,
		},
		"a dead member that does not answer is confirmed down": {
			member: withAddr("x", Dead), probeErr: refused, wantProbe: true,
		},
		"a suspect member that does not answer is confirmed down": {
			member: withAddr("x", Suspect), probeErr: refused, wantProbe: true,
		},
		"an alive member that answers is alive": {
			member: withAddr("x", Alive), wantAlive: true, wantProbe: true,
		},
		"a member without an address stays unconfirmed": {
			member:  Member{Name: "new", State: Dead, DigestErr: ErrUnknownVersion},
			wantErr: ErrNoAddress,
		},
		"a cancelled context decides nothing": {
			member: withAddr("x", Dead), ctx: cancelled, wantErr: context.Canceled,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &fakeProber{}
			if tc.probeErr != nil {
				p.fail = map[string]error{tc.member.Digest.Addr: tc.probeErr}
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			alive, err := Confirm(ctx, tc.member, p)
			if alive != tc.wantAlive {
				t.Errorf("alive = %v, want %v", alive, tc.wantAlive)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if probed := p.count(tc.member.Digest.Addr) > 0; probed != tc.wantProbe {
				t.Errorf("probed = %v, want %v", probed, tc.wantProbe)
			}
		})
	}
}

func TestConfirmProbeFailsBecauseContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := ProberFunc(func(ctx context.Context, addr string) error {
		cancel() // the deadline hits during the probe
		return ctx.Err()
	})
	m := Member{Name: "x", State: Dead, Digest: testDigest("x")}
	alive, err := Confirm(ctx, m, p)
	if alive || !errors.Is(err, context.Canceled) {
		t.Fatalf("Confirm = %v, %v; want false, context.Canceled (undecided, not down)", alive, err)
	}
}

func TestClassify(t *testing.T) {
	mk := func(name string, state MemberState, f ...func(*Member)) Member {
		d := testDigest(name)
		d.Addr = name + ":7070"
		m := Member{Name: name, State: state, Digest: d}
		for _, f := range f {
			f(&m)
		}
		return m
	}
	members := []Member{
		mk("alive", Alive),
		mk("alive-leaving", Alive, func(m *Member) { m.Digest.Leaving = true }),
		mk("alive-unknown-version", Alive, func(m *Member) { m.Digest, m.DigestErr = Digest{}, ErrUnknownVersion }),
		mk("dead-answering", Dead),
		mk("dead-silent", Dead),
		mk("dead-unknown-version", Dead, func(m *Member) { m.Digest, m.DigestErr = Digest{}, ErrUnknownVersion }),
		mk("left", Left),
		mk("me", Alive, func(m *Member) { m.Local = true }),
		mk("suspect-silent", Suspect),
	}
	p := &fakeProber{fail: map[string]error{
		"dead-silent:7070":    errors.New("timeout"),
		"suspect-silent:7070": errors.New("timeout"),
		"alive:7070":          errors.New("not probed: alive is enough to ask for a quote"),
	}}
	v := Classify(context.Background(), members, p)
	if got, want := names(v.Reachable), []string{"alive", "dead-answering"}; !slices.Equal(got, want) {
		t.Errorf("Reachable = %v, want %v", got, want)
	}
	if got, want := names(v.Unconfirmed), []string{"dead-unknown-version"}; !slices.Equal(got, want) {
		t.Errorf("Unconfirmed = %v, want %v", got, want)
	}
	if got, want := names(v.Down), []string{"dead-silent", "left", "suspect-silent"}; !slices.Equal(got, want) {
		t.Errorf("Down = %v, want %v", got, want)
	}
	for _, addr := range []string{"alive:7070", "left:7070", "me:7070", "alive-leaving:7070"} {
		if n := p.count(addr); n != 0 {
			t.Errorf("%s probed %d times, want 0", addr, n)
		}
	}
}
