package node

import (
	"errors"
	"testing"
)

func TestGossipBind(t *testing.T) {
	for _, tc := range []struct {
		addr, host, port string
		ok               bool
	}{
		{":7946", "0.0.0.0", "7946", true},
		{"127.0.0.1:7946", "127.0.0.1", "7946", true},
		{"[::1]:7946", "::1", "7946", true},
		{"localhost:7946", "127.0.0.1", "7946", true},
		{"7946", "", "", false},
		{"no-such-host.invalid:7946", "", "", false},
	} {
		host, port, err := gossipBind(tc.addr)
		if tc.ok != (err == nil) || host != tc.host || port != tc.port {
			t.Errorf("gossipBind(%q) = %q, %q, %v; want %q, %q, ok %v", tc.addr, host, port, err, tc.host, tc.port, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("gossipBind(%q): %v does not wrap ErrInvalidRequest", tc.addr, err)
		}
	}
}
