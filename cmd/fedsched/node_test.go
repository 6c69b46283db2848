package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/executor/supervisortest"
)

// TestMain lets a test run this binary's main as a child process (the node
// command installs process-wide loggers, and a node is stopped by a
// signal): with FEDSCHED_TEST_RUN_MAIN=1 the test binary is fedsched.
func TestMain(m *testing.M) {
	if os.Getenv("FEDSCHED_TEST_RUN_MAIN") == "1" {
		if len(os.Args) > 1 && os.Args[1] == "supervise" && os.Getenv(supervisortest.PauseEnv) != "" {
			// A supervisor that pauses at a step of its start.
			os.Exit(executor.RunSupervisorSteps(os.Args[2:], func(dir string, s executor.SupervisorStep) { supervisortest.Pause(dir, string(s)) }))
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fedschedProcess starts `fedsched args...` as a child process.
func fedschedProcess(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FEDSCHED_TEST_RUN_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() //nolint:errcheck // may have exited
			cmd.Wait()         //nolint:errcheck // killed
		}
	})
	return cmd, &stderr
}

// jsonLines checks that every line of out is a JSON object and returns
// their messages.
func jsonLines(t *testing.T, out string) []string {
	t.Helper()
	var msgs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("line is not a JSON object: %q", sc.Text())
			continue
		}
		msg, _ := rec["msg"].(string)
		msgs = append(msgs, msg)
	}
	return msgs
}

func TestNodeLogsJSONOnly(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "node", "--site", "j", "--data", dir, "--listen", "127.0.0.1:0", "--executor", "simulated",
		"--procs", "2", "--log-format", "json", "--log-level", "debug", "--insecure")
	cmd.Env = append(os.Environ(), "FEDSCHED_TEST_RUN_MAIN=1")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // normally stopped by SIGTERM below
	var stderr strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "node ready") {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node exited with %v; stderr:\n%s", err, stderr.String())
	}
	msgs := jsonLines(t, stderr.String())
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"INSECURE: plaintext gRPC", "node ready", "node stopped"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no JSON line says %q; lines:\n%s", want, stderr.String())
		}
	}
}

func TestNodeRefusedConfigIsAJSONLine(t *testing.T) {
	cmd, stderr := fedschedProcess(t, "node", "--data", t.TempDir(), "--procs", "0", "--log-format", "json")
	if err := cmd.Wait(); err == nil {
		t.Fatal("node with 0 processors started")
	}
	msgs := jsonLines(t, stderr.String())
	if len(msgs) != 1 || msgs[0] != "node failed" || !strings.Contains(stderr.String(), "procs: must be >= 1") {
		t.Errorf("stderr = %q, want one JSON line reporting the refused procs", stderr)
	}
}
