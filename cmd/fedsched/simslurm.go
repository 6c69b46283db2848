package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/sim"
)

// runSlurmCells dispatches an experiment's cells as one Slurm job array:
// task i runs this binary with --experiment F --cell i --json DIR/cell-i.json
// on whatever node Slurm gives it, and `sbatch --wait` returns when every
// task has ended. The rows are then read back and merged in cell order
// (sim.ExperimentFile.MergeCells), so the tidy CSV is the one a local run
// writes. The binary, the experiment, its scenarios and traces, the
// working directory and DIR must be at the same paths on the compute nodes
// (a shared file system).
func runSlurmCells(cmd *cobra.Command, f simFlags, e *sim.ExperimentFile) ([]sim.ExperimentRow, error) {
	n, err := e.NumCells()
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--slurm: the binary the tasks run: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, fmt.Errorf("--slurm: the binary the tasks run: %w", err)
	}
	expPath, err := filepath.Abs(f.experiment)
	if err != nil {
		return nil, fmt.Errorf("--slurm: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("--slurm: %w", err)
	}
	dir, made := f.slurmDir, false
	if dir == "" {
		if dir, err = os.MkdirTemp(wd, "fedsched-slurm-"); err != nil {
			return nil, fmt.Errorf("--slurm: the shared directory: %w", err)
		}
		made = true
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--slurm-dir: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("--slurm-dir: %w", err)
	}
	part := func(i int) string { return filepath.Join(dir, fmt.Sprintf("cell-%d.json", i)) }
	for i := range n { // a part left from an earlier run must not pass for this one's
		if err := os.Remove(part(i)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--slurm-dir: %w", err)
		}
	}
	line := "exec " + shellQuote(exe) + " sim --experiment " + shellQuote(expPath)
	if cmd.Flags().Changed("runs") {
		line += " --runs " + strconv.Itoa(f.sla.runs)
	}
	line += ` --cell "$SLURM_ARRAY_TASK_ID" --json ` + shellQuote(dir) + `/cell-"$SLURM_ARRAY_TASK_ID".json`
	script := filepath.Join(dir, "cells.sh")
	body := "#!/bin/sh\n# fedsched sim --experiment --slurm: one cell of the grid per array task.\n" + line + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return nil, fmt.Errorf("--slurm: %w", err)
	}
	args := []string{"--parsable", "--wait", fmt.Sprintf("--array=0-%d", n-1), "--job-name=fedsched-" + e.Name, "--ntasks=1", "--cpus-per-task=1",
		"--chdir=" + wd, "--output=" + filepath.Join(dir, "cell-%a.log"), "--export=ALL"}
	if f.slurmPartition != "" {
		args = append(args, "--partition="+f.slurmPartition)
	}
	args = append(args, script)
	slog.Info("dispatching the experiment's cells as a Slurm job array", "experiment", e.Name, "cells", n, "dir", dir)
	if submitted, err := sbatchWait(cmd.Context(), args); err != nil {
		if !submitted {
			if made {
				os.RemoveAll(dir) //nolint:errcheck // nothing ran in it
			}
			return nil, fmt.Errorf("FailedPrecondition: --slurm: the job array was not submitted: %w", err)
		}
		var failed []string
		for i := range n {
			if _, err := os.Stat(part(i)); err != nil {
				log, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("cell-%d.log", i)))
				lines := strings.Split(strings.TrimSpace(string(log)), "\n")
				failed = append(failed, fmt.Sprintf("cell %d: %s", i, lines[len(lines)-1]))
				if len(failed) == 3 {
					break
				}
			}
		}
		return nil, fmt.Errorf("Aborted: --slurm: %w; %s (the tasks' logs: %s/cell-*.log)", err, strings.Join(failed, "; "), dir)
	}
	parts := make([][]sim.ExperimentRow, n)
	for i := range n {
		b, err := os.ReadFile(part(i))
		if err != nil {
			return nil, fmt.Errorf("--slurm: cell %d wrote no rows (its log: %s): %w", i, filepath.Join(dir, fmt.Sprintf("cell-%d.log", i)), err)
		}
		if err := json.Unmarshal(b, &parts[i]); err != nil {
			return nil, fmt.Errorf("--slurm: cell %d's rows (%s): %w", i, part(i), err)
		}
	}
	rows, err := e.MergeCells(parts)
	if err != nil {
		return nil, fmt.Errorf("--slurm: %w", err)
	}
	if made {
		if err := os.RemoveAll(dir); err != nil {
			slog.Warn("could not remove the Slurm directory", "dir", dir, "err", err)
		}
	}
	return rows, nil
}

// sbatchWait submits the array and waits for all its tasks (sbatch
// --wait: a non-zero exit when a task failed). If ctx ends first, the
// array is cancelled (scancel), so that no task outlives the command.
func sbatchWait(ctx context.Context, args []string) (submitted bool, err error) {
	c := exec.Command("sbatch", args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return false, fmt.Errorf("sbatch: %w", err)
	}
	if err := c.Start(); err != nil {
		return false, fmt.Errorf("sbatch (is Slurm's client installed?): %w", err)
	}
	// --parsable prints "<job id>[;cluster]" once the array is queued.
	ids := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ids <- strings.TrimSpace(strings.SplitN(line, ";", 2)[0])
		io.Copy(io.Discard, out) //nolint:errcheck // nothing more is expected
	}()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var id string
	select {
	case id = <-ids:
	case err := <-done:
		if err == nil {
			err = errors.New("no job id")
		}
		return false, fmt.Errorf("sbatch: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if id == "" {
		return false, fmt.Errorf("sbatch: %w: %s", <-done, strings.TrimSpace(stderr.String()))
	}
	slog.Info("Slurm job array submitted; waiting for its tasks", "job", id)
	select {
	case err := <-done:
		if err != nil {
			return true, fmt.Errorf("sbatch: job array %s: %w: %s", id, err, strings.TrimSpace(stderr.String()))
		}
		return true, nil
	case <-ctx.Done():
		if out, err := exec.Command("scancel", id).CombinedOutput(); err != nil {
			slog.Warn("scancel of the job array failed", "job", id, "err", err, "output", strings.TrimSpace(string(out)))
		}
		c.Process.Kill() //nolint:errcheck // it may have ended
		<-done
		return true, fmt.Errorf("sbatch: job array %s cancelled: %w", id, ctx.Err())
	}
}

// shellQuote quotes s for sh, in single quotes.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
