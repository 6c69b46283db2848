package executor

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestSlurmAccountRules: a root node submits each job to Slurm for the
// account the process executor would run it as; the operator's
// allow_root and service_account decide as they do there. No running
// Slurm is needed: the test reads the arguments sbatch would get.
func TestSlurmAccountRules(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: only a root node submits for other accounts")
	}
	tests := []struct {
		name     string
		accounts Accounts
		user     string
		wantUID  string // "" means no --uid (sbatch submits as root)
		wantErr  bool
	}{
		{name: "a local user runs as itself", user: "nobody", wantUID: "--uid=65534"},
		{name: "no user would run as root", user: "", wantErr: true},
		{name: "user root would run as root", user: "root", wantErr: true},
		{name: "root with consent", accounts: Accounts{AllowRoot: true}, user: "root", wantUID: "--uid=0"},
		{name: "no user with consent", accounts: Accounts{AllowRoot: true}, user: "", wantUID: ""},
		{name: "remote user refused", user: "no-such-user-here", wantErr: true},
		{name: "remote user as the service account", accounts: Accounts{ServiceAccount: "nobody"}, user: "no-such-user-here", wantUID: "--uid=65534"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSlurm(SlurmConfig{DataDir: t.TempDir(), Partition: "fedsched", Accounts: tc.accounts})
			if err != nil {
				t.Fatal(err)
			}
			checkErr := s.CheckAccount(tc.user)
			args, _, err := s.sbatchArgs(context.Background(), Spec{JobID: "a.000000000001", User: tc.user, Argv: []string{"true"}}, t.TempDir())
			if tc.wantErr {
				if !errors.Is(err, ErrNoAccount) || !errors.Is(checkErr, ErrNoAccount) {
					t.Fatalf("sbatch arguments %v, err %v, check %v: want ErrNoAccount from both", args, err, checkErr)
				}
				return
			}
			if err != nil || checkErr != nil {
				t.Fatalf("err %v, check %v", err, checkErr)
			}
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--uid=") })
			switch {
			case tc.wantUID == "" && i >= 0:
				t.Errorf("sbatch gets %s, want no --uid", args[i])
			case tc.wantUID != "" && (i < 0 || args[i] != tc.wantUID):
				t.Errorf("sbatch arguments %v, want %s", args, tc.wantUID)
			}
		})
	}
}
