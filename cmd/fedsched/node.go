package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
)

// version is the software version the node reports.
const version = "0.1.0-dev"

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a site node: the scheduler, its gRPC API, durable state and an executor",
		Long: `Run one site of the federation. With no arguments it starts a single site
with its data under ./fedsched-data, as many processors as this machine has
CPUs, the process executor, and its gRPC API on 127.0.0.1:7070.

Settings come from, in increasing precedence: defaults, a YAML file
(--config or FEDSCHED_CONFIG), environment variables FEDSCHED_<NAME>, flags.
SIGINT or SIGTERM stops the node gracefully; running jobs keep running under
their supervisors and are re-attached at the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Resolve(cmd.Flags(), os.LookupEnv)
			if err != nil {
				return fmt.Errorf("InvalidArgument: %w", err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			return runNode(cmd.Context(), cfg, log, nil)
		},
	}
	config.BindFlags(cmd.Flags())
	return cmd
}

// newSuperviseCmd is the hidden command the process executor re-executes
// the binary as: the supervisor of one job.
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "supervise JOB_DIR",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.ExactArgs(1),
		Run:                func(_ *cobra.Command, args []string) { os.Exit(executor.RunSupervisor(args)) },
	}
}

// runNode runs a site until ctx ends. If ready is not nil it receives the
// listener's address once the node serves (tests and the demo use it).
func runNode(ctx context.Context, cfg config.Config, log *slog.Logger, ready chan<- net.Addr) error {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("FailedPrecondition: data directory: %w", err)
	}
	st, err := store.OpenBolt(cfg.DataDir, &store.Options{Logger: log})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("FailedPrecondition: %w (is another node running on %s?)", err, cfg.DataDir)
		}
		return fmt.Errorf("FailedPrecondition: %w", err)
	}
	defer st.Close()
	var clk clock.Clock = clock.Real()
	if cfg.TimeScale != 1 {
		clk = clock.Scaled(time.Now(), cfg.TimeScale)
	}
	var ex executor.Executor
	switch cfg.Executor {
	case "simulated":
		ex = executor.NewSimulated(executor.SimulatedConfig{Clock: clk, Logger: log})
	default:
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("FailedPrecondition: locate own binary for job supervisors: %w", err)
		}
		p, err := executor.NewProcess(executor.ProcessConfig{DataDir: cfg.DataDir, SupervisorCommand: []string{self, "supervise"},
			KillGrace: cfg.KillGrace, Logger: log})
		if err != nil {
			return fmt.Errorf("FailedPrecondition: %w", err)
		}
		ex = p
	}
	n, err := node.New(cfg, node.Deps{Store: st, Executor: ex, Clock: clk, Logger: log, Version: version})
	if err != nil {
		return fmt.Errorf("InvalidArgument: %w", err)
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("Unavailable: listen on %s: %w", cfg.Listen, err)
	}
	if cfg.TLS.Cert == "" {
		log.Warn("serving plaintext gRPC: no TLS certificate configured", "listen", lis.Addr().String())
	}
	log.Info("node starting", "site", cfg.Site, "listen", lis.Addr().String(), "data", cfg.DataDir, "procs", cfg.Procs,
		"executor", cfg.Executor, "policy", cfg.Policy, "time_scale", cfg.TimeScale)
	if ready != nil {
		ready <- lis.Addr()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ex.Run(gctx) })
	g.Go(func() error { return n.Run(gctx) })
	g.Go(func() error { return n.Serve(gctx, lis, 5*time.Second) })
	err = g.Wait()
	log.Info("node stopped", "site", cfg.Site)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("Internal: %w", err)
	}
	return nil
}
