package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/store"
)

func newCheckCmd() *cobra.Command {
	dataDir := config.Default().DataDir
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check a stopped node's data directory: store pages and records, lost writes, job directories",
		Long: `Check the data directory of a stopped node, read only: bbolt's page check of
the store, the write-ahead log (wal/: its records are read as the node's
next start replays them; a damaged record followed by good ones is a
problem, a torn last record is not), every record decoded, indexes and idempotency keys against the jobs,
the store's transaction against its high-water mark (fedsched.db.txid: a
damaged meta page makes bbolt fall back to the previous transaction without a
word), and the job directories against the jobs the store knows. The node runs
the same check at every start and refuses to start on a problem.

Exit status 0 when everything is consistent; otherwise one line per problem
and exit status 1. See docs/operations.md, "Backup and restore".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Read through the write-ahead log: the changes it holds that the
			// file does not are checked as the node will see them.
			st, err := store.OpenWAL(dataDir, &store.Options{ReadOnly: true, LockTimeout: 2 * time.Second})
			if err != nil {
				return fmt.Errorf("%s: %w", node.CodeOf(err), err)
			}
			defer st.Close()
			problems, err := st.Check(cmd.Context())
			if err != nil {
				return fmt.Errorf("Unavailable: check %s: %w", st.Path(), err)
			}
			if len(problems) == 0 {
				epoch, err := node.StoreEpoch(cmd.Context(), st, false)
				if err != nil {
					return fmt.Errorf("DataLoss: %s: %w", st.Path(), err)
				}
				if problems, err = node.CheckDataDir(cmd.Context(), st, dataDir, epoch); err != nil {
					return fmt.Errorf("Unavailable: check job directories: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			for _, p := range problems {
				fmt.Fprintln(out, p)
			}
			if len(problems) > 0 {
				return fmt.Errorf("DataLoss: %d problem(s) in %s; see docs/operations.md, \"Backup and restore\"", len(problems), dataDir)
			}
			fmt.Fprintf(out, "%s: consistent\n", dataDir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", dataDir, "the node's data directory")
	return cmd
}
