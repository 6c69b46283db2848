package executor

import (
	"errors"
	"os/user"
	"strings"
	"testing"
)

// TestAccountRules: whose account a job runs as, by the rules of
// Accounts, for a node running as root (uid 0) and as another user. The
// node's uid is a parameter, so the rules are checked without root; the
// switch itself is TestSocketJobRunsAsItsUser's (cmd/fedsched, as root).
func TestAccountRules(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("SKIP: the host has no user nobody to run jobs as: %v", err)
	}
	for _, tc := range []struct {
		name     string
		accounts Accounts
		user     string
		nodeUID  int
		want     string // the account's name; "" for the node's own user
		wantErr  string // part of the refusal; "" for none
	}{
		{name: "a node not root runs every job as itself", user: "no-such-user-here", nodeUID: 1000},
		{name: "a local user runs as itself", user: "nobody", want: nobody.Username},
		{name: "a remote user is refused", user: "no-such-user-here", wantErr: "executor.service_account"},
		{name: "a remote user as the service account", accounts: Accounts{ServiceAccount: "nobody"}, user: "no-such-user-here", want: nobody.Username},
		{name: "a missing service account", accounts: Accounts{ServiceAccount: "no-such-account"}, user: "no-such-user-here", wantErr: "service account no-such-account"},
		{name: "user root is refused", user: "root", wantErr: "--allow-root-jobs"},
		{name: "no user would run as root", user: "", wantErr: "--allow-root-jobs"},
		{name: "root with consent", accounts: Accounts{AllowRoot: true}, user: "root", want: "root"},
		{name: "no user with consent runs as the node", accounts: Accounts{AllowRoot: true}, user: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc, err := tc.accounts.resolve(tc.user, tc.nodeUID)
			switch {
			case tc.wantErr != "":
				if !errors.Is(err, ErrNoAccount) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %+v, %v; want ErrNoAccount saying %q", acc, err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && acc.Switch:
				t.Fatalf("switches to %s; want the node's own user", acc.Name)
			case tc.want != "" && (!acc.Switch || acc.Name != tc.want):
				t.Fatalf("runs as %+v; want %s", acc, tc.want)
			}
		})
	}
}
