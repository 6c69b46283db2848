package executor

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// Accounts says whose account the process executor runs jobs as. It
// matters only when the node runs as root, the one case where it can
// switch users: then every job runs as its user's account, never as root
// unless AllowRoot.
type Accounts struct {
	// AllowRoot is the operator's consent to run jobs as root.
	AllowRoot bool
	// ServiceAccount runs the jobs of users without a local account
	// (remote users); empty refuses them.
	ServiceAccount string
}

// ErrNoAccount is returned for a job that has no account to run as: its
// user has none on this host (and there is no service account), or it
// would run as root without consent.
var ErrNoAccount = errors.New("no account to run the job as")

// Account is the Unix account a job runs as.
type Account struct {
	// Switch is false when the job runs as the node's own user (the node
	// is not root); the other fields are then unset.
	Switch   bool
	Name     string
	UID, GID uint32
	Groups   []uint32
}

// AccountChecker is implemented by executors that run jobs under Unix
// accounts: the node asks before it accepts a job, so that a job that
// cannot run is refused with the reason rather than failing later.
type AccountChecker interface {
	CheckAccount(user string) error
}

// CheckAccount implements AccountChecker.
func (p *Process) CheckAccount(name string) error {
	_, err := p.cfg.Accounts.resolve(name, os.Getuid())
	return err
}

// resolve returns the account the jobs of user name run as, for a node
// running as uid.
func (a Accounts) resolve(name string, uid int) (Account, error) {
	if uid != 0 {
		return Account{}, nil // cannot switch: the node's own user
	}
	if name == "" {
		// No user to switch to: the job would run as root.
		if a.AllowRoot {
			return Account{}, nil
		}
		return Account{}, fmt.Errorf("the job names no user and would run as root, which this site does not allow (--allow-root-jobs, executor.allow_root): %w", ErrNoAccount)
	}
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) && a.ServiceAccount != "" {
		if u, err = user.Lookup(a.ServiceAccount); err != nil {
			return Account{}, fmt.Errorf("user %s has no account on this host and the service account %s cannot be used: %v: %w", name, a.ServiceAccount, err, ErrNoAccount)
		}
	} else if errors.As(err, &unknown) {
		return Account{}, fmt.Errorf("user %s has no account on this host (an operator can map such users to a service account: executor.service_account): %w", name, ErrNoAccount)
	} else if err != nil {
		return Account{}, fmt.Errorf("look up user %s: %v: %w", name, err, ErrNoAccount)
	}
	acc := Account{Switch: true, Name: u.Username}
	uid64, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid64, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return Account{}, fmt.Errorf("user %s: uid %q or gid %q is not a number: %w", u.Username, u.Uid, u.Gid, ErrNoAccount)
	}
	acc.UID, acc.GID = uint32(uid64), uint32(gid64)
	if acc.UID == 0 && !a.AllowRoot {
		return Account{}, fmt.Errorf("the job of user %s would run as root, which this site does not allow (--allow-root-jobs, executor.allow_root): %w", name, ErrNoAccount)
	}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if v, err := strconv.ParseUint(g, 10, 32); err == nil {
				acc.Groups = append(acc.Groups, uint32(v))
			}
		}
	}
	return acc, nil
}

// openJobDir sets up the directory of a job that runs as acc: the
// directory itself stays the node's (the supervisor's files in it must not
// be forged by the job), others may only traverse it; the job's working
// directory work/ and its output files are the job user's, readable by it
// alone.
func openJobDir(dir string, acc Account) error {
	if !acc.Switch {
		return nil
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	work := filepath.Join(dir, workDir)
	if err := os.Mkdir(work, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Chown(work, int(acc.UID), int(acc.GID)); err != nil {
		return err
	}
	for _, f := range []string{stdoutFile, stderrFile} {
		fh, err := os.OpenFile(filepath.Join(dir, f), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		err = fh.Chown(int(acc.UID), int(acc.GID))
		fh.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
