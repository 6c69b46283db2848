// Command fedsched is the one binary of the project: the site node, its
// command-line client, the trace-replay simulator and the demo federation.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
		newNodeCmd(),
		newSuperviseCmd(),
		newCheckCmd(),
		newPeersCmd(),
		newSubmitCmd(), // the client commands: client*.go
		newStatusCmd(),
		newJobsCmd(),
		newCancelCmd(),
		newWatchCmd(),
		newLogsCmd(),
		newExplainCmd(),
		newPlanCmd(),
		newReserveCmd(), // operators' reservations: client_reserve.go
		newReservationsCmd(),
		newUnreserveCmd(),
		newDemoCmd(),
		newTLSCmd(), // the federation's CA, certificates and gossip key: tls.go
	)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		if !errors.As(err, new(loggedError)) {
			fmt.Fprintln(os.Stderr, errorLine(err))
		}
		os.Exit(1)
	}
}

// errorLine renders an error as the one line the CLI prints on failure. The
// line begins with the name of a gRPC status code, so that scripts can tell
// failures apart the same way whether the node or the CLI found them:
//   - an error carrying a gRPC status (from a call, or made by the client
//     commands): "<Code>: <message>";
//   - a message that already begins with a code name and ':' (the sim and
//     forecast commands format their errors so): as it is;
//   - a flag or argument that cobra could not parse: "InvalidArgument: ...";
//   - an interrupted or timed-out context: "Canceled: ..." or
//     "DeadlineExceeded: ...";
//   - anything else: "Unknown: ...".
func errorLine(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var withStatus interface{ GRPCStatus() *status.Status }
	var st *status.Status
	if errors.As(err, &withStatus) {
		if st = withStatus.GRPCStatus(); st != nil && st.Code() != codes.OK {
			// A status wrapped with context reads "context: rpc error: code =
			// X desc = message"; keep the context, drop the boilerplate.
			if raw := st.Err().Error(); strings.Contains(msg, raw) {
				msg = strings.Replace(msg, raw, st.Message(), 1)
			}
		} else {
			st = nil
		}
	}
	if strings.ContainsAny(msg, "\r\n") {
		msg = strings.Join(strings.Fields(msg), " ")
	}
	hasCode := func(s string) bool {
		name, _, ok := strings.Cut(s, ":")
		if !ok {
			return false
		}
		for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
			if name == c.String() {
				return true
			}
		}
		return false
	}
	if st != nil {
		if code := st.Code().String(); !strings.HasPrefix(msg, code+":") {
			return code + ": " + msg
		}
		return msg
	}
	if hasCode(msg) {
		return msg
	}
	var (
		notExist   *pflag.NotExistError
		needsValue *pflag.ValueRequiredError
		badValue   *pflag.InvalidValueError
		badSyntax  *pflag.InvalidSyntaxError
	)
	if errors.As(err, &notExist) || errors.As(err, &needsValue) || errors.As(err, &badValue) || errors.As(err, &badSyntax) {
		return "InvalidArgument: " + msg
	}
	// cobra's own usage errors (unknown command, argument counts, required
	// and grouped flags) have no type; they are known by their text.
	for _, prefix := range []string{"unknown command ", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument ", "bad flag syntax", "accepts ", "requires at least ", "required flag(s) ",
		"if any flags in the group ", "at least one of the flags in the group "} {
		if strings.HasPrefix(msg, prefix) {
			return "InvalidArgument: " + msg
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "Canceled: " + msg
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded: " + msg
	}
	return "Unknown: " + msg
}
