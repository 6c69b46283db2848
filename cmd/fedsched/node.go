package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
)

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a site node: the scheduler, its gRPC API, durable state, an executor and (with --gossip) federation",
		Long: `Run one site of the federation. With no arguments it starts a single site
with its data under ./fedsched-data, as many processors as this machine has
CPUs, the process executor, and its gRPC API on 127.0.0.1:7070.

With --gossip HOST:PORT the site gossips its capabilities and joins the
peers given by --join; jobs it cannot take are delegated to peers that can.

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
			if err := node.Launch(cmd.Context(), cfg, node.LaunchOptions{Logger: log}); err != nil {
				return fmt.Errorf("%s: %w", node.CodeOf(err), err)
			}
			return nil
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
