package main

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// TestClientTarget: an explicit --addr always wins; without one,
// $FEDSCHED_ADDR, else the local node's socket when it exists, else the
// default address. A --socket that was asked for is used even when
// missing, so that its absence is the error the user sees.
func TestClientTarget(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "fedsched.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	missing := filepath.Join(dir, "none.sock")
	for _, tc := range []struct {
		name               string
		flags              map[string]string
		envAddr, envSocket string
		want               string
	}{
		{name: "the socket when it exists", flags: map[string]string{"socket": sock}, want: "unix://" + sock},
		{name: "the socket from the environment", envSocket: sock, want: "unix://" + sock},
		{name: "--addr wins over the socket", flags: map[string]string{"socket": sock, "addr": "10.0.0.1:7070"}, want: "10.0.0.1:7070"},
		{name: "$FEDSCHED_ADDR wins over the socket", envAddr: "10.0.0.2:7070", envSocket: sock, want: "10.0.0.2:7070"},
		{name: "--addr wins over $FEDSCHED_ADDR", envAddr: "10.0.0.2:7070", flags: map[string]string{"addr": "10.0.0.1:7070"}, want: "10.0.0.1:7070"},
		{name: "no socket: the default address", envSocket: missing, want: "127.0.0.1:7070"},
		{name: "a missing socket asked for", flags: map[string]string{"socket": missing}, want: "unix://" + missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(addrEnv, tc.envAddr)
			t.Setenv(socketEnv, tc.envSocket)
			cmd := &cobra.Command{}
			var f connFlags
			f.register(cmd, "")
			for k, v := range tc.flags {
				if err := cmd.Flags().Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			if tc.flags["socket"] == "" && tc.envSocket == "" {
				// Not the default data directory of wherever the test runs.
				f.socket = missing
			}
			got, err := f.target(cmd)
			if err != nil || got != tc.want {
				t.Fatalf("target = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
