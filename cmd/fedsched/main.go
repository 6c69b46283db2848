// Command fedsched is the one binary of the project: the site node, its
// command-line client, the trace-replay simulator and the demo federation.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "fedsched",
		Short:         "A federation of planning-based compute sites with risk-aware overbooking",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Each subcommand lives in its own file and is registered here, in one place.
	root.AddCommand(
		newSimCmd(),
		newForecastCmd(),
	)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine renders an error as the one line the CLI prints on failure.
func errorLine(err error) string { return err.Error() }
