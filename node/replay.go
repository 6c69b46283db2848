package node

import (
	"bytes"
	"context"

	"google.golang.org/protobuf/proto"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// storedReplay answers a retry of a stored submission (same idempotency
// key, same body) with the stored job when the request fails validation:
// a client that retries after a crash, once its deadline has come closer
// than its estimate, must learn what became of its job, not that the
// request is invalid. Anything else (no key, a new key, another body) gets
// the validation's error. (A retry that validates is replayed by the
// loop's own check of the key, so a new submission costs the store one
// read of its key, not two.)
func (s *service) storedReplay(ctx context.Context, req *fedschedv1.SubmitJobRequest) (*fedschedv1.SubmitJobResponse, bool) {
	key := userKey(req)
	if key == "" {
		return nil, false
	}
	hash, err := SpecHash(req.GetSpec())
	if err != nil {
		return nil, false
	}
	ir, err := s.n.deps.Store.GetIdempotencyKey(ctx, key)
	if err != nil || !bytes.Equal(ir.BodyHash, hash) {
		return nil, false
	}
	rec, err := s.n.deps.Store.GetJob(ctx, ir.JobID)
	if err != nil {
		return nil, false
	}
	return &fedschedv1.SubmitJobResponse{Job: proto.Clone(rec.Job).(*fedschedv1.Job), Replayed: true}, true
}
