package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func newLogsCmd() *cobra.Command {
	var (
		f              connFlags
		follow, stderr bool
	)
	cmd := &cobra.Command{
		Use:   "logs JOB_ID [--follow] [--stderr]",
		Short: "Print a job's output (also of a job delegated to a peer), optionally following it",
		Long: `Print what a job wrote to its standard output (or, with --stderr, its
standard error), wherever it runs: for a job delegated to a peer, this site
asks the peer. With --follow, keep printing what the job writes until it
has ended (or Ctrl-C). --timeout bounds connecting, not the stream.

A job submitted with --output or --error writes where those say, on the
executing host; logs reads it there.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			req := &fedschedv1.GetJobOutputRequest{JobId: args[0], Follow: follow, Stderr: stderr}
			return runLogs(cmd.Context(), c, req, cmd.OutOrStdout(), f.json)
		},
	}
	f.register(cmd, `print one JSON object per chunk, one per line: {"offset": N, "data": "..."}`)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the job has ended")
	cmd.Flags().BoolVar(&stderr, "stderr", false, "print the job's standard error instead of its output")
	return cmd
}

// logChunkJSON is one line of logs --json.
type logChunkJSON struct {
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
}

func runLogs(ctx context.Context, c *siteClient, req *fedschedv1.GetJobOutputRequest, w io.Writer, asJSON bool) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.GetJobOutput(sctx, req)
	if err != nil {
		return c.wrap(ctx, err, false)
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil || status.Code(err) == codes.Canceled {
				return nil // interrupted
			}
			return c.wrap(ctx, err, false)
		}
		if asJSON {
			err = emitJSONLine(w, logChunkJSON{Offset: chunk.GetOffsetBytes(), Data: string(chunk.GetData())})
		} else {
			_, err = w.Write(chunk.GetData())
		}
		if err != nil {
			return err
		}
	}
}
