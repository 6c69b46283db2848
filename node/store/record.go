package store

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/store/internal/storepb"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// recordFormat is the first byte of every stored value: 1 = a storepb
// message in protobuf wire format.
const recordFormat byte = 1

func marshalRecord(m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	return append([]byte{recordFormat}, b...), nil
}

func unmarshalRecord(b []byte, m proto.Message) error {
	if len(b) == 0 {
		return fmt.Errorf("empty value: %w", ErrCorrupt)
	}
	if b[0] != recordFormat {
		return fmt.Errorf("unknown record format %d: %w", b[0], ErrCorrupt)
	}
	if err := proto.Unmarshal(b[1:], m); err != nil {
		return fmt.Errorf("decode %T: %v: %w", m, err, ErrCorrupt)
	}
	return nil
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func fromTS(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func validateJob(rec JobRecord) error {
	if rec.Job == nil {
		return fmt.Errorf("job record without a job: %w", ErrInvalid)
	}
	if rec.Job.GetId() == "" {
		return fmt.Errorf("job without an id: %w", ErrInvalid)
	}
	id, user := rec.Job.GetId(), rec.Job.GetSpec().GetUser()
	if strings.IndexByte(user, 0) >= 0 {
		return fmt.Errorf("job %s: user name contains NUL: %w", id, ErrInvalid)
	}
	// The longest keys a job makes: its index entries by state (stateKey:
	// 4 bytes and the id) and by user (userKey: the user, 0 and the id),
	// and its idempotency key.
	if err := keyFits("job id", 4+len(id)); err != nil {
		return err
	}
	if err := keyFits("job user and id", len(user)+1+len(id)); err != nil {
		return err
	}
	return keyFits("idempotency key", len(rec.IdempotencyKey))
}

// keyFits refuses a key of n bytes that bbolt would refuse (longer than
// bolt.MaxKeySize). Every store refuses it up front: WALStore would
// otherwise acknowledge a change that no checkpoint, and no replay, can
// write to the file.
func keyFits(what string, n int) error {
	if n > bolt.MaxKeySize {
		return fmt.Errorf("%s: a key of %d bytes, above the store's %d: %w", what, n, bolt.MaxKeySize, ErrInvalid)
	}
	return nil
}

// encodeJobRecord encodes a validated job record.
func encodeJobRecord(rec JobRecord) ([]byte, error) {
	if err := validateJob(rec); err != nil {
		return nil, err
	}
	return marshalRecord(&storepb.JobRecord{
		Job:            rec.Job,
		IdempotencyKey: rec.IdempotencyKey,
		BodyHash:       rec.BodyHash,
	})
}

// decodeJobRecord decodes a stored job. It returns an error wrapping
// ErrCorrupt for any value that is not a well-formed job record, and never
// panics.
func decodeJobRecord(b []byte) (JobRecord, error) {
	var m storepb.JobRecord
	if err := unmarshalRecord(b, &m); err != nil {
		return JobRecord{}, err
	}
	if m.GetJob() == nil || m.GetJob().GetId() == "" {
		return JobRecord{}, fmt.Errorf("job record without a job id: %w", ErrCorrupt)
	}
	return JobRecord{Job: m.Job, IdempotencyKey: m.IdempotencyKey, BodyHash: m.BodyHash}, nil
}

func validateReservation(r ReservationRecord) error {
	if r.ID == "" {
		return fmt.Errorf("reservation without an id: %w", ErrInvalid)
	}
	return keyFits("reservation id", len(r.ID))
}

func encodeReservation(r ReservationRecord) ([]byte, error) {
	if err := validateReservation(r); err != nil {
		return nil, err
	}
	return marshalRecord(&storepb.ReservationRecord{
		Id: r.ID, JobId: r.JobID, Procs: int32(r.Procs),
		Start: ts(r.Start), End: ts(r.End),
		Overbooked: r.Overbooked, Fixed: r.Fixed, Note: r.Note,
	})
}

func decodeReservation(b []byte) (ReservationRecord, error) {
	var m storepb.ReservationRecord
	if err := unmarshalRecord(b, &m); err != nil {
		return ReservationRecord{}, err
	}
	return ReservationRecord{
		ID: m.Id, JobID: m.JobId, Procs: int(m.Procs),
		Start: fromTS(m.Start), End: fromTS(m.End),
		Overbooked: m.Overbooked, Fixed: m.Fixed, Note: m.Note,
	}, nil
}

func validateSLA(r SLARecord) error {
	if r.JobID == "" {
		return fmt.Errorf("SLA record without a job id: %w", ErrInvalid)
	}
	return keyFits("SLA job id", len(r.JobID))
}

func encodeSLA(r SLARecord) ([]byte, error) {
	if err := validateSLA(r); err != nil {
		return nil, err
	}
	return marshalRecord(&storepb.SlaRecord{
		JobId: r.JobID, Outcome: r.Outcome, Fee: r.Fee, Penalty: r.Penalty,
		Pof: r.PoF, DecideTime: ts(r.DecidedAt),
	})
}

func decodeSLA(b []byte) (SLARecord, error) {
	var m storepb.SlaRecord
	if err := unmarshalRecord(b, &m); err != nil {
		return SLARecord{}, err
	}
	return SLARecord{
		JobID: m.JobId, Outcome: m.Outcome, Fee: m.Fee, Penalty: m.Penalty,
		PoF: m.Pof, DecidedAt: fromTS(m.DecideTime),
	}, nil
}

func encodeIdempotency(r IdempotencyRecord) ([]byte, error) {
	return marshalRecord(&storepb.IdempotencyRecord{
		JobId: r.JobID, BodyHash: r.BodyHash, CreateTime: ts(r.CreatedAt),
	})
}

func decodeIdempotency(key string, b []byte) (IdempotencyRecord, error) {
	var m storepb.IdempotencyRecord
	if err := unmarshalRecord(b, &m); err != nil {
		return IdempotencyRecord{}, err
	}
	return IdempotencyRecord{Key: key, JobID: m.JobId, BodyHash: m.BodyHash, CreatedAt: fromTS(m.CreateTime)}, nil
}

// keyCreatedAt is the creation time recorded for an idempotency key.
func keyCreatedAt(rec JobRecord) time.Time {
	if t := rec.Job.GetSubmitTime(); t != nil {
		return t.AsTime()
	}
	return time.Now().UTC()
}

// validateChanges checks every record of c before anything is written.
func validateChanges(c Changes) error {
	for _, j := range c.PutJobs {
		if err := validateJob(j); err != nil {
			return err
		}
	}
	for _, id := range c.DeleteJobs {
		if id == "" {
			return fmt.Errorf("delete job without an id: %w", ErrInvalid)
		}
	}
	for _, r := range c.PutReservations {
		if err := validateReservation(r); err != nil {
			return err
		}
	}
	for _, id := range c.DeleteReservations {
		if id == "" {
			return fmt.Errorf("delete reservation without an id: %w", ErrInvalid)
		}
	}
	for _, r := range c.PutSLAOutcomes {
		if err := validateSLA(r); err != nil {
			return err
		}
	}
	for name := range c.PutStats {
		if name == "" {
			return fmt.Errorf("statistics blob without a name: %w", ErrInvalid)
		}
		if err := keyFits("statistics name", len(name)); err != nil {
			return err
		}
	}
	for _, a := range c.PutAgreements {
		if a.ID == "" {
			return fmt.Errorf("agreement without an id: %w", ErrInvalid)
		}
		if err := keyFits("agreement id", len(a.ID)); err != nil {
			return err
		}
	}
	for _, r := range c.PutStanding {
		if err := validateStanding(r); err != nil {
			return err
		}
	}
	for _, id := range c.DeleteStanding {
		if id == "" {
			return fmt.Errorf("delete standing reservation without an id: %w", ErrInvalid)
		}
	}
	return nil
}

func validateStanding(r StandingRecord) error {
	switch {
	case r.ID == "":
		return fmt.Errorf("standing reservation without an id: %w", ErrInvalid)
	case r.EverySeconds <= 0:
		return fmt.Errorf("standing reservation %s: period %d s: %w", r.ID, r.EverySeconds, ErrInvalid)
	}
	if err := keyFits("standing reservation id", len(r.ID)); err != nil {
		return err
	}
	for _, d := range r.Weekdays {
		if d < time.Sunday || d > time.Saturday {
			return fmt.Errorf("standing reservation %s: weekday %d: %w", r.ID, int(d), ErrInvalid)
		}
	}
	return nil
}

func encodeStanding(r StandingRecord) ([]byte, error) {
	if err := validateStanding(r); err != nil {
		return nil, err
	}
	days := make([]int32, len(r.Weekdays))
	for i, d := range r.Weekdays {
		days[i] = int32(d)
	}
	return marshalRecord(&storepb.StandingRecord{
		Id: r.ID, Name: r.Name, Procs: int32(r.Procs), Start: ts(r.Start), End: ts(r.End),
		EverySeconds: r.EverySeconds, Until: ts(r.Until), Weekdays: days,
	})
}

// decodeStanding decodes a stored rule. It never panics.
func decodeStanding(b []byte) (StandingRecord, error) {
	var m storepb.StandingRecord
	if err := unmarshalRecord(b, &m); err != nil {
		return StandingRecord{}, err
	}
	r := StandingRecord{
		ID: m.Id, Name: m.Name, Procs: int(m.Procs), Start: fromTS(m.Start), End: fromTS(m.End),
		EverySeconds: m.EverySeconds, Until: fromTS(m.Until),
	}
	for _, d := range m.Weekdays {
		r.Weekdays = append(r.Weekdays, time.Weekday(d))
	}
	if err := validateStanding(r); err != nil {
		return StandingRecord{}, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return r, nil
}

// matches reports whether a job passes the filters of q.
func (q JobQuery) matches(job *fedschedv1.Job) bool {
	if q.User != "" && job.GetSpec().GetUser() != q.User {
		return false
	}
	return len(q.States) == 0 || slices.Contains(q.States, job.GetState())
}

func (q JobQuery) pageSize() int {
	switch {
	case q.PageSize <= 0:
		return DefaultPageSize
	case q.PageSize > MaxPageSize:
		return MaxPageSize
	}
	return q.PageSize
}

// pageFull reports whether a page of out, whose jobs encode to used bytes,
// must end before rec: it holds PageSize jobs, or rec would take it past
// MaxBytes.
func (q JobQuery) pageFull(out []JobRecord, used int, rec JobRecord) bool {
	return len(out) == q.pageSize() || q.MaxBytes > 0 && len(out) > 0 && used+proto.Size(rec.Job) > q.MaxBytes
}

// Page tokens are opaque to clients: base64url of
// [format 1][8-byte digest of the filters][id of the last job returned].
const pageTokenFormat byte = 1

func (q JobQuery) filterDigest() uint64 {
	states := slices.Clone(q.States)
	slices.Sort(states)
	states = slices.Compact(states)
	h := fnv.New64a()
	for _, s := range states {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(s))
		h.Write(b[:])
	}
	h.Write([]byte{0})
	h.Write([]byte(q.User))
	return h.Sum64()
}

func (q JobQuery) makePageToken(lastID string) string {
	b := make([]byte, 9, 9+len(lastID))
	b[0] = pageTokenFormat
	binary.BigEndian.PutUint64(b[1:], q.filterDigest())
	b = append(b, lastID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// after returns the id after which the page starts ("" for the first page).
func (q JobQuery) after() (string, error) {
	if q.PageToken == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(q.PageToken)
	if err != nil || len(b) < 10 || b[0] != pageTokenFormat {
		return "", ErrInvalidPageToken
	}
	if binary.BigEndian.Uint64(b[1:9]) != q.filterDigest() {
		return "", fmt.Errorf("token was made for other filters: %w", ErrInvalidPageToken)
	}
	return string(b[9:]), nil
}

// decodeAgreement decodes a stored agreement: a format byte and the node's
// body. It never panics.
func decodeAgreement(id string, b []byte) (AgreementRecord, error) {
	if len(b) == 0 || b[0] != recordFormat {
		return AgreementRecord{}, fmt.Errorf("agreement %q: unknown record format: %w", id, ErrCorrupt)
	}
	return AgreementRecord{ID: id, Body: append([]byte(nil), b[1:]...)}, nil
}
