package node_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// launch runs node.Launch on dir with the process executor until the test
// ends; it returns the client once the site serves, or Launch's error.
func launch(t *testing.T, dir string) (fedschedv1.SiteServiceClient, error) {
	t.Helper()
	cfg := testConfig(dir)
	cfg.Executor = "process"
	c, _, err := launchConfig(t, cfg)
	return c, err
}

// launchConfig runs node.Launch with cfg (insecure, on loopback) until stop
// is called or the test ends; it returns the client once the site serves,
// or Launch's error.
func launchConfig(t *testing.T, cfg config.Config) (c fedschedv1.SiteServiceClient, stop func(), err error) {
	t.Helper()
	cfg.Insecure = true
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	// The supervisor is never run by these tests' jobs, or runs `true`.
	go func() {
		done <- node.Launch(ctx, cfg, node.LaunchOptions{Listener: lis, Ready: ready, Supervisor: []string{"/bin/true"}})
	}()
	select {
	case err := <-done:
		cancel()
		return nil, nil, err
	case addr := <-ready:
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return fedschedv1.NewSiteServiceClient(conn), stop, nil
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("node neither served nor failed")
		return nil, nil, nil
	}
}

// leaveJobDir makes the directory of a job that ran and exited with 42.
func leaveJobDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"spec.json":       `{"job_id":"t.000000000001","argv":["true"]}`,
		"claim":           "1\n",
		"supervisor.json": `{"pid":1073741824,"pgid":1073741824}`,
		"exit.json":       `{"exit_code":42,"at":"2026-01-01T00:00:00Z"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLaunchRefusesLeftoverJobDirs: defect 11. With fedsched.db emptied
// and the job directories of the earlier store still there, the node
// started afresh, and its new job t.000000000001 never ran: it was
// reported COMPLETED with the old job's exit code. The node must refuse to
// start and say what to do; once the old directories are moved away, new
// jobs never meet them again.
func TestLaunchRefusesLeftoverJobDirs(t *testing.T) {
	for name, leftover := range map[string]string{
		"layout before epochs": "jobs/t.000000000001",
		"an earlier epoch":     "jobs/e0123456789ab/t.000000000001",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			leaveJobDir(t, filepath.Join(dir, leftover))
			if err := os.WriteFile(store.Path(dir), nil, 0o600); err != nil { // truncated
				t.Fatal(err)
			}
			_, err := launch(t, dir)
			if !errors.Is(err, node.ErrDataDirMismatch) {
				t.Fatalf("Launch over leftover job directories = %v, want ErrDataDirMismatch", err)
			}
			for _, want := range []string{"earlier store", "mv ", "Backup and restore"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
			if err := os.Rename(filepath.Join(dir, "jobs"), filepath.Join(dir, "jobs.old")); err != nil {
				t.Fatal(err)
			}
			c, err := launch(t, dir)
			if err != nil {
				t.Fatalf("Launch after moving the old directories away: %v", err)
			}
			if _, err := c.GetSite(context.Background(), &fedschedv1.GetSiteRequest{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLaunchRefusesJobDirUnknownToStore: a job directory of this store's
// epoch whose job the store lacks means the store lost committed writes.
func TestLaunchRefusesJobDirUnknownToStore(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := node.StoreEpoch(context.Background(), st, true)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	leaveJobDir(t, filepath.Join(dir, "jobs", epoch, "t.000000000007"))
	_, err = launch(t, dir)
	if !errors.Is(err, node.ErrDataDirMismatch) || !strings.Contains(err.Error(), "lost committed writes") {
		t.Fatalf("Launch = %v, want ErrDataDirMismatch for lost writes", err)
	}
}
