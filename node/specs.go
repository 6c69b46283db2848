package node

import (
	"crypto/sha256"
	"fmt"

	"google.golang.org/protobuf/proto"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// SpecHash returns the body hash under which an idempotent submission of
// spec is remembered (store.JobStore.PutJobIfNewKey): the SHA-256 of its
// deterministic protobuf encoding. Equal specs hash equal; a nil spec hashes
// like an empty one.
//
// The deterministic encoding is stable for one build of fedsched; after an
// upgrade that changes the protobuf library, a retry of a request submitted
// before the upgrade may be taken for a different body (and fail with
// ErrIdempotencyConflict) during the key's lifetime.
func SpecHash(spec *fedschedv1.JobSpec) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("hash job spec: %w", err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}
