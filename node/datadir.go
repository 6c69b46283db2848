package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fedsched/fedsched/node/store"
)

// metaEpoch names the store's epoch in its metadata.
const metaEpoch = "epoch"

// unsetEpoch is the epoch of a new store not yet given one.
const unsetEpoch = "-"

// jobsSubdir is where a data directory keeps its jobs' directories.
const jobsSubdir = "jobs"

// StoreEpoch returns the epoch of a store: a random name given to the
// store when it is made, under which the process executor keeps the jobs'
// directories (<data dir>/jobs/<epoch>/<job id>). Job ids count from 1 in
// each store, so a store made afresh in a used data directory (emptied,
// truncated, deleted) never finds an earlier store's job directory under a
// new job's id. A store made before epochs, which holds jobs but no epoch,
// keeps the old layout: "" (<data dir>/jobs/<job id>).
//
// With create false (a read-only check), a store without one gets
// unsetEpoch, which names no directory.
func StoreEpoch(ctx context.Context, st store.Store, create bool) (string, error) {
	switch e, err := st.GetMeta(ctx, metaEpoch); {
	case err == nil:
		return e, nil
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	jobs, _, err := st.ListJobs(ctx, store.JobQuery{PageSize: 1})
	if err != nil {
		return "", err
	}
	if len(jobs) > 0 {
		return "", nil
	}
	if !create {
		return unsetEpoch, nil
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	e := "e" + hex.EncodeToString(b[:])
	if err := st.PutMeta(ctx, metaEpoch, e); err != nil {
		return "", err
	}
	return e, nil
}

// CheckDataDir checks that the job directories of dataDir belong to its
// store, whose epoch is epoch: that jobs/ holds nothing but this store's
// epoch directory (another epoch, or job directories of the layout before
// epochs, are left over from an earlier store), and that every job
// directory names a job the store has (one it lacks was started by a store
// that has since lost committed writes: a damaged file, or a restored older
// copy). It returns one line per problem; the error is for a check that
// could not run.
func CheckDataDir(ctx context.Context, st store.Store, dataDir, epoch string) ([]string, error) {
	root := filepath.Join(dataDir, jobsSubdir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var problems []string
	var leftovers []string
	check := func(dir string, names []string) error {
		for _, name := range names {
			if strings.HasPrefix(name, ".") {
				continue // being prepared (removed by the executor) or not ours
			}
			switch _, err := st.GetJob(ctx, name); {
			case errors.Is(err, store.ErrNotFound):
				problems = append(problems, fmt.Sprintf("%s: the store has no job %s: it was started by a store that has since lost committed writes (a damaged file or an older copy)",
					filepath.Join(dir, name), name))
			case err != nil:
				return err
			}
		}
		return nil
	}
	var names []string
	for _, e := range ents {
		switch {
		case epoch != "" && e.Name() == epoch:
			sub, err := os.ReadDir(filepath.Join(root, epoch))
			if err != nil {
				return nil, err
			}
			for _, s := range sub {
				names = append(names, s.Name())
			}
		case epoch != "" && !strings.HasPrefix(e.Name(), "."):
			leftovers = append(leftovers, filepath.Join(root, e.Name()))
		case epoch == "":
			names = append(names, e.Name())
		}
	}
	if err := check(filepath.Join(root, epoch), names); err != nil {
		return nil, err
	}
	if len(leftovers) > 0 {
		problems = append(problems, fmt.Sprintf("%s: job directories of an earlier store (this store's are under %s): the store was emptied, replaced or made afresh",
			strings.Join(leftovers, ", "), filepath.Join(root, epoch)))
	}
	return problems, nil
}

// dataDirAdvice says what to do when CheckDataDir finds problems.
func dataDirAdvice(dataDir string) string {
	return fmt.Sprintf("if %s was lost or damaged, restore it from your latest backup (docs/operations.md, \"Backup and restore\"); "+
		"to start afresh instead, move the old job directories out of the way (mv %s %s.old) and start again",
		store.Path(dataDir), filepath.Join(dataDir, jobsSubdir), filepath.Join(dataDir, jobsSubdir))
}

// checkStore runs the store's and the data directory's checks before the
// node serves, and returns the epoch of the jobs' directories. A problem
// refuses the start with a message that says what to do.
func checkStore(ctx context.Context, st store.FileStore, dataDir string) (string, error) {
	problems, err := st.Check(ctx)
	if err != nil {
		return "", fmt.Errorf("check store: %w", err)
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("store %s is damaged: %s: %w; stop here, run `fedsched check --data %s` for the full list, and restore %s and %s%s from your latest backup (docs/operations.md, \"Backup and restore\")",
			st.Path(), summarize(problems), store.ErrCorrupt, dataDir, store.FileName, store.FileName, store.MarkSuffix)
	}
	epoch, err := StoreEpoch(ctx, st, true)
	if err != nil {
		return "", fmt.Errorf("store epoch: %w", err)
	}
	problems, err = CheckDataDir(ctx, st, dataDir, epoch)
	if err != nil {
		return "", fmt.Errorf("check job directories: %w", err)
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("data directory %s: %s: %w; %s", dataDir, summarize(problems), ErrDataDirMismatch, dataDirAdvice(dataDir))
	}
	return epoch, nil
}

// summarize joins the first few problems.
func summarize(problems []string) string {
	const show = 3
	if len(problems) <= show {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(problems[:show], "; "), len(problems)-show)
}
