package store

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// migration moves a bbolt file from one schema version to the next. apply
// runs inside the one write transaction of the whole upgrade; it must not
// set the version (upgrade does).
type migration struct {
	from, to int
	name     string
	apply    func(tx *bolt.Tx) error
}

// migrations are applied in order; each one's from is the previous one's to,
// and the last one's to is CurrentSchemaVersion. They run when the file
// opens, before OpenWAL replays its write-ahead log into it: after a crash
// the log may hold records encoded for the schema before the migration
// (and the .bak copy lacks them). A migration that changes how records
// are encoded must convert the log's records too.
var migrations = []migration{
	{from: 1, to: 2, name: "index jobs by state and by user", apply: migrateIndexJobs},
	{from: 2, to: 3, name: "agreements bucket for delegation", apply: migrateAgreements},
	{from: 3, to: 4, name: "standing bucket for standing reservations", apply: migrateStanding},
}

// migrateStanding adds the bucket of standing reservation rules (v4).
// Fixed reservations were already ReservationRecords; nothing moves.
func migrateStanding(tx *bolt.Tx) error {
	if _, err := tx.CreateBucket(bucketStanding); err != nil {
		return fmt.Errorf("create %s: %w", bucketStanding, err)
	}
	return nil
}

// migrateAgreements adds the bucket of delegation agreements (v3).
func migrateAgreements(tx *bolt.Tx) error {
	if _, err := tx.CreateBucket(bucketAgreements); err != nil {
		return fmt.Errorf("create %s: %w", bucketAgreements, err)
	}
	return nil
}

// migrateIndexJobs (v1 -> v2) builds the jobs_by_state and jobs_by_user
// indexes from the jobs bucket.
func migrateIndexJobs(tx *bolt.Tx) error {
	if _, err := tx.CreateBucket(bucketJobsByState); err != nil {
		return fmt.Errorf("create %s: %w", bucketJobsByState, err)
	}
	if _, err := tx.CreateBucket(bucketJobsByUser); err != nil {
		return fmt.Errorf("create %s: %w", bucketJobsByUser, err)
	}
	jobs, err := bucket(tx, bucketJobs)
	if err != nil {
		return err
	}
	return jobs.ForEach(func(k, v []byte) error {
		rec, err := decodeJobRecord(v)
		if err != nil {
			return fmt.Errorf("job %q: %w", k, err)
		}
		return indexJob(tx, rec)
	})
}

func schemaVersion(tx *bolt.Tx) (int, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, fmt.Errorf("no %s bucket: %w", bucketMeta, ErrCorrupt)
	}
	v := meta.Get(keySchemaVersion)
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("schema version %q: %w", v, ErrCorrupt)
	}
	return n, nil
}

func setSchemaVersion(tx *bolt.Tx, v int) error {
	meta, err := bucket(tx, bucketMeta)
	if err != nil {
		return err
	}
	return meta.Put(keySchemaVersion, []byte(strconv.Itoa(v)))
}

// isEmpty reports whether the file has no buckets at all (a new file).
func isEmpty(tx *bolt.Tx) bool {
	k, _ := tx.Cursor().First()
	return k == nil
}

// upgrade brings a freshly opened file to CurrentSchemaVersion: it lays out
// a new file, leaves a current one alone, and migrates an older one after
// backing it up.
func (s *BoltStore) upgrade(log *slog.Logger) error {
	var (
		version int
		empty   bool
	)
	if err := s.db.View(func(tx *bolt.Tx) error {
		empty = isEmpty(tx)
		if empty {
			return nil
		}
		var err error
		version, err = schemaVersion(tx)
		return err
	}); err != nil {
		return err
	}
	switch {
	case empty:
		return s.db.Update(func(tx *bolt.Tx) error {
			for _, name := range v1Buckets {
				if _, err := tx.CreateBucket(name); err != nil {
					return err
				}
			}
			// A new file is laid out as v1 plus every migration, so the
			// migrations are exercised on every start of a new node.
			for _, m := range migrations {
				if err := m.apply(tx); err != nil {
					return fmt.Errorf("lay out schema v%d (%s): %w", m.to, m.name, err)
				}
			}
			return setSchemaVersion(tx, CurrentSchemaVersion)
		})
	case version == CurrentSchemaVersion:
		return nil
	case version > CurrentSchemaVersion:
		return fmt.Errorf("file has schema v%d, this fedsched knows up to v%d: %w",
			version, CurrentSchemaVersion, ErrSchemaTooNew)
	}
	backup, err := s.backup(version)
	if err != nil {
		return err
	}
	log.Info("migrating store", "path", s.path, "from", version, "to", CurrentSchemaVersion, "backup", backup)
	err = s.db.Update(func(tx *bolt.Tx) error {
		v := version
		for _, m := range migrations {
			if m.from != v {
				continue
			}
			if err := m.apply(tx); err != nil {
				return fmt.Errorf("migrate v%d to v%d (%s): %w", m.from, m.to, m.name, err)
			}
			v = m.to
		}
		if v != CurrentSchemaVersion {
			return fmt.Errorf("no migration path from v%d to v%d: %w", version, CurrentSchemaVersion, ErrCorrupt)
		}
		return setSchemaVersion(tx, v)
	})
	if err != nil {
		return fmt.Errorf("%w (the file is unchanged; a copy is at %s)", err, backup)
	}
	log.Info("migrated store", "path", s.path, "version", CurrentSchemaVersion)
	return nil
}

// backup writes a consistent, synced copy of the file to
// <path>.v<version>.<UTC time>.bak and returns its path.
func (s *BoltStore) backup(version int) (string, error) {
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	path := fmt.Sprintf("%s.v%d.%s.bak", s.path, version, stamp)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("back up store before migrating: %w", err)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("back up store before migrating: %w", err)
	}
	return path, nil
}

// syncDir makes the creation of a file in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
