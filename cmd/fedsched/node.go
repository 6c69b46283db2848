package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/grpclog"

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
				err = fmt.Errorf("InvalidArgument: %w", err)
				if f := cmd.Flags().Lookup("log-format"); f != nil && f.Value.String() == "json" {
					// Even a configuration the node refuses is reported in
					// the format the operator asked for.
					return logged(slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)), err)
				}
				return err
			}
			log := node.NewLogger(cfg.Log, cmd.ErrOrStderr())
			grpclog.SetLoggerV2(node.GRPCLogger(log))
			if err := node.Launch(cmd.Context(), cfg, node.LaunchOptions{Logger: log}); err != nil {
				return logged(log, fmt.Errorf("%s: %w", node.CodeOf(err), err))
			}
			return nil
		},
	}
	config.BindFlags(cmd.Flags())
	return cmd
}

// loggedError is an error the command has already written to its log;
// main exits with status 1 without printing it again, so that a node
// logging JSON writes nothing but JSON lines.
type loggedError struct{ err error }

func (e loggedError) Error() string { return e.err.Error() }
func (e loggedError) Unwrap() error { return e.err }

// logged writes err to log as the node's last line and marks it written.
func logged(log *slog.Logger, err error) error {
	log.Error("node failed", "err", errorLine(err))
	return loggedError{err}
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
