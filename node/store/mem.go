package store

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// MemStore is a Store in memory. It keeps every record encoded, exactly as
// BoltStore does, so it copies and normalises records the same way; it is
// not durable. The zero value is not usable: make one with NewMemStore.
type MemStore struct {
	mu     sync.Mutex
	closed bool
	seq    uint64
	jobs   map[string][]byte
	res    map[string][]byte
	sla    map[string][]byte
	stats  map[string][]byte
	idem   map[string][]byte
	agree  map[string][]byte
	stand  map[string][]byte
	meta   map[string]string
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{
		jobs:  map[string][]byte{},
		res:   map[string][]byte{},
		sla:   map[string][]byte{},
		stats: map[string][]byte{},
		idem:  map[string][]byte{},
		stand: map[string][]byte{},
		meta:  map[string]string{},
	}
}

// Name returns "mem".
func (m *MemStore) Name() string { return "mem" }

// lock checks ctx and that the store is open, and locks it.
func (m *MemStore) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Close marks the store closed.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// GetJob implements JobStore.
func (m *MemStore) GetJob(ctx context.Context, id string) (JobRecord, error) {
	if err := m.lock(ctx); err != nil {
		return JobRecord{}, err
	}
	defer m.mu.Unlock()
	b, ok := m.jobs[id]
	if !ok {
		return JobRecord{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	return decodeJobRecord(b)
}

// PutJob implements JobStore.
func (m *MemStore) PutJob(ctx context.Context, rec JobRecord) error {
	return m.Apply(ctx, Changes{PutJobs: []JobRecord{rec}})
}

// PutJobIfNewKey implements JobStore.
func (m *MemStore) PutJobIfNewKey(ctx context.Context, key string, bodyHash []byte, rec JobRecord) (JobRecord, bool, error) {
	if key == "" {
		return JobRecord{}, false, fmt.Errorf("empty idempotency key: %w", ErrInvalid)
	}
	rec.IdempotencyKey, rec.BodyHash = key, slices.Clone(bodyHash)
	enc, err := encodeJobRecord(rec)
	if err != nil {
		return JobRecord{}, false, err
	}
	if err := m.lock(ctx); err != nil {
		return JobRecord{}, false, err
	}
	defer m.mu.Unlock()
	if b, ok := m.idem[key]; ok {
		ir, err := decodeIdempotency(key, b)
		if err != nil {
			return JobRecord{}, false, err
		}
		if jb, ok := m.jobs[ir.JobID]; ok {
			if !bytes.Equal(ir.BodyHash, bodyHash) {
				return JobRecord{}, false, fmt.Errorf("key %q (job %s): %w", key, ir.JobID, ErrIdempotencyConflict)
			}
			existing, err := decodeJobRecord(jb)
			return existing, false, err
		}
		// A key whose job is gone no longer protects anything: reuse it.
	}
	if _, ok := m.jobs[rec.ID()]; ok {
		return JobRecord{}, false, fmt.Errorf("job %q: %w", rec.ID(), ErrJobExists)
	}
	ib, err := encodeIdempotency(IdempotencyRecord{JobID: rec.ID(), BodyHash: bodyHash, CreatedAt: keyCreatedAt(rec)})
	if err != nil {
		return JobRecord{}, false, err
	}
	m.jobs[rec.ID()] = enc
	m.idem[key] = ib
	stored, err := decodeJobRecord(enc)
	return stored, true, err
}

// DeleteJob implements JobStore.
func (m *MemStore) DeleteJob(ctx context.Context, id string) error {
	return m.Apply(ctx, Changes{DeleteJobs: []string{id}})
}

// ListJobs implements JobStore.
func (m *MemStore) ListJobs(ctx context.Context, q JobQuery) ([]JobRecord, string, error) {
	after, err := q.after()
	if err != nil {
		return nil, "", err
	}
	if err := m.lock(ctx); err != nil {
		return nil, "", err
	}
	defer m.mu.Unlock()
	ids := slices.Sorted(maps.Keys(m.jobs))
	start, _ := slices.BinarySearch(ids, after)
	if start < len(ids) && after != "" && ids[start] == after {
		start++
	}
	var (
		out  []JobRecord
		used int
	)
	for _, id := range ids[start:] {
		rec, err := decodeJobRecord(m.jobs[id])
		if err != nil {
			return nil, "", fmt.Errorf("job %q: %w", id, err)
		}
		if !q.matches(rec.Job) {
			continue
		}
		if q.pageFull(out, used, rec) {
			// One more match exists: this page is not the last.
			return out, q.makePageToken(out[len(out)-1].ID()), nil
		}
		out = append(out, rec)
		used += proto.Size(rec.Job)
	}
	return out, "", nil
}

// GetReservation implements ReservationStore.
func (m *MemStore) GetReservation(ctx context.Context, id string) (ReservationRecord, error) {
	if err := m.lock(ctx); err != nil {
		return ReservationRecord{}, err
	}
	defer m.mu.Unlock()
	b, ok := m.res[id]
	if !ok {
		return ReservationRecord{}, fmt.Errorf("reservation %q: %w", id, ErrNotFound)
	}
	return decodeReservation(b)
}

// PutReservation implements ReservationStore.
func (m *MemStore) PutReservation(ctx context.Context, r ReservationRecord) error {
	return m.Apply(ctx, Changes{PutReservations: []ReservationRecord{r}})
}

// DeleteReservation implements ReservationStore.
func (m *MemStore) DeleteReservation(ctx context.Context, id string) error {
	return m.Apply(ctx, Changes{DeleteReservations: []string{id}})
}

// ListReservations implements ReservationStore.
func (m *MemStore) ListReservations(ctx context.Context) ([]ReservationRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]ReservationRecord, 0, len(m.res))
	for _, id := range slices.Sorted(maps.Keys(m.res)) {
		r, err := decodeReservation(m.res[id])
		if err != nil {
			return nil, fmt.Errorf("reservation %q: %w", id, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// GetSLAOutcome implements SLAStore.
func (m *MemStore) GetSLAOutcome(ctx context.Context, jobID string) (SLARecord, error) {
	if err := m.lock(ctx); err != nil {
		return SLARecord{}, err
	}
	defer m.mu.Unlock()
	b, ok := m.sla[jobID]
	if !ok {
		return SLARecord{}, fmt.Errorf("SLA of job %q: %w", jobID, ErrNotFound)
	}
	return decodeSLA(b)
}

// PutSLAOutcome implements SLAStore.
func (m *MemStore) PutSLAOutcome(ctx context.Context, r SLARecord) error {
	return m.Apply(ctx, Changes{PutSLAOutcomes: []SLARecord{r}})
}

// ListSLAOutcomes implements SLAStore.
func (m *MemStore) ListSLAOutcomes(ctx context.Context) ([]SLARecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]SLARecord, 0, len(m.sla))
	for _, id := range slices.Sorted(maps.Keys(m.sla)) {
		r, err := decodeSLA(m.sla[id])
		if err != nil {
			return nil, fmt.Errorf("SLA of job %q: %w", id, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// GetStats implements StatsStore.
func (m *MemStore) GetStats(ctx context.Context, name string) ([]byte, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	b, ok := m.stats[name]
	if !ok {
		return nil, fmt.Errorf("statistics %q: %w", name, ErrNotFound)
	}
	return slices.Clone(b), nil
}

// PutStats implements StatsStore.
func (m *MemStore) PutStats(ctx context.Context, name string, blob []byte) error {
	return m.Apply(ctx, Changes{PutStats: map[string][]byte{name: blob}})
}

// GetIdempotencyKey implements IdempotencyStore.
func (m *MemStore) GetIdempotencyKey(ctx context.Context, key string) (IdempotencyRecord, error) {
	if err := m.lock(ctx); err != nil {
		return IdempotencyRecord{}, err
	}
	defer m.mu.Unlock()
	b, ok := m.idem[key]
	if !ok {
		return IdempotencyRecord{}, fmt.Errorf("idempotency key %q: %w", key, ErrNotFound)
	}
	return decodeIdempotency(key, b)
}

// PruneIdempotencyKeys implements IdempotencyStore.
func (m *MemStore) PruneIdempotencyKeys(ctx context.Context, before time.Time) (int, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for key, b := range m.idem {
		r, err := decodeIdempotency(key, b)
		if err != nil {
			return n, fmt.Errorf("idempotency key %q: %w", key, err)
		}
		if r.CreatedAt.Before(before) {
			delete(m.idem, key)
			n++
		}
	}
	return n, nil
}

// CountIdempotencyKeys implements IdempotencyStore.
func (m *MemStore) CountIdempotencyKeys(ctx context.Context, prefix string, limit int) (int, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for key := range m.idem {
		if strings.HasPrefix(key, prefix) {
			n++
		}
	}
	if limit > 0 {
		n = min(n, limit)
	}
	return n, nil
}

// SchemaVersion implements MetaStore; a MemStore is always current.
func (m *MemStore) SchemaVersion(ctx context.Context) (int, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return CurrentSchemaVersion, nil
}

// GetMeta implements MetaStore.
func (m *MemStore) GetMeta(ctx context.Context, key string) (string, error) {
	if err := m.lock(ctx); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	v, ok := m.meta[key]
	if !ok {
		return "", fmt.Errorf("meta %q: %w", key, ErrNotFound)
	}
	return v, nil
}

// PutMeta implements MetaStore.
func (m *MemStore) PutMeta(ctx context.Context, key, value string) error {
	if key == "" {
		return fmt.Errorf("empty meta key: %w", ErrInvalid)
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.meta[key] = value
	return nil
}

// NextSequence implements MetaStore.
func (m *MemStore) NextSequence(ctx context.Context) (uint64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	m.seq++
	return m.seq, nil
}

// Apply implements Store.
func (m *MemStore) Apply(ctx context.Context, c Changes) error {
	if err := validateChanges(c); err != nil {
		return err
	}
	// Encode everything first so that a failure writes nothing.
	jobs := make(map[string][]byte, len(c.PutJobs))
	idems := make(map[string][]byte)
	for _, j := range c.PutJobs {
		b, err := encodeJobRecord(j)
		if err != nil {
			return err
		}
		jobs[j.ID()] = b
		if j.IdempotencyKey != "" {
			ib, err := encodeIdempotency(IdempotencyRecord{JobID: j.ID(), BodyHash: j.BodyHash, CreatedAt: keyCreatedAt(j)})
			if err != nil {
				return err
			}
			idems[j.IdempotencyKey] = ib
		}
	}
	res := make(map[string][]byte, len(c.PutReservations))
	for _, r := range c.PutReservations {
		b, err := encodeReservation(r)
		if err != nil {
			return err
		}
		res[r.ID] = b
	}
	stand := make(map[string][]byte, len(c.PutStanding))
	for _, r := range c.PutStanding {
		b, err := encodeStanding(r)
		if err != nil {
			return err
		}
		stand[r.ID] = b
	}
	sla := make(map[string][]byte, len(c.PutSLAOutcomes))
	for _, r := range c.PutSLAOutcomes {
		b, err := encodeSLA(r)
		if err != nil {
			return err
		}
		sla[r.JobID] = b
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for _, id := range c.DeleteJobs {
		if b, ok := m.jobs[id]; ok {
			if rec, err := decodeJobRecord(b); err == nil && rec.IdempotencyKey != "" {
				delete(m.idem, rec.IdempotencyKey)
			}
			delete(m.jobs, id)
		}
	}
	maps.Copy(m.jobs, jobs)
	maps.Copy(m.idem, idems)
	if m.agree == nil {
		m.agree = make(map[string][]byte)
	}
	for _, a := range c.PutAgreements {
		m.agree[a.ID] = slices.Clone(a.Body)
	}
	for _, id := range c.DeleteReservations {
		delete(m.res, id)
	}
	maps.Copy(m.res, res)
	maps.Copy(m.sla, sla)
	for _, id := range c.DeleteStanding {
		delete(m.stand, id)
	}
	maps.Copy(m.stand, stand)
	for name, blob := range c.PutStats {
		m.stats[name] = slices.Clone(blob)
	}
	if c.SiteClock != nil {
		m.meta[SiteClockKey] = c.SiteClock.String()
	}
	return nil
}

// GetAgreement returns one agreement, or ErrNotFound.
func (m *MemStore) GetAgreement(ctx context.Context, id string) (AgreementRecord, error) {
	if err := m.lock(ctx); err != nil {
		return AgreementRecord{}, err
	}
	defer m.mu.Unlock()
	b, ok := m.agree[id]
	if !ok {
		return AgreementRecord{}, fmt.Errorf("agreement %q: %w", id, ErrNotFound)
	}
	return AgreementRecord{ID: id, Body: slices.Clone(b)}, nil
}

// ListAgreements returns every agreement in ascending order of id.
func (m *MemStore) ListAgreements(ctx context.Context) ([]AgreementRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]AgreementRecord, 0, len(m.agree))
	for _, id := range slices.Sorted(maps.Keys(m.agree)) {
		out = append(out, AgreementRecord{ID: id, Body: slices.Clone(m.agree[id])})
	}
	return out, nil
}

// GetStanding implements StandingStore.
func (m *MemStore) GetStanding(ctx context.Context, id string) (StandingRecord, error) {
	if err := m.lock(ctx); err != nil {
		return StandingRecord{}, err
	}
	defer m.mu.Unlock()
	b, ok := m.stand[id]
	if !ok {
		return StandingRecord{}, fmt.Errorf("standing reservation %q: %w", id, ErrNotFound)
	}
	return decodeStanding(b)
}

// ListStanding implements StandingStore.
func (m *MemStore) ListStanding(ctx context.Context) ([]StandingRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]StandingRecord, 0, len(m.stand))
	for _, id := range slices.Sorted(maps.Keys(m.stand)) {
		r, err := decodeStanding(m.stand[id])
		if err != nil {
			return nil, fmt.Errorf("standing reservation %q: %w", id, err)
		}
		out = append(out, r)
	}
	return out, nil
}
