package discovery

import "errors"

// Errors returned by this package. They are wrapped with context: test with
// errors.Is.
var (
	// ErrUnknownVersion is returned by Digest.UnmarshalBinary for an encoding
	// version this code does not know, typically a digest gossiped by a
	// newer fedsched. Member.DigestErr wraps it for such a peer.
	ErrUnknownVersion = errors.New("unknown digest encoding version")

	// ErrMalformed is returned by Digest.UnmarshalBinary for bytes that are
	// not a digest: truncated, overlong, a value out of range, a varint that
	// is not in its shortest form, or trailing bytes.
	ErrMalformed = errors.New("malformed digest")

	// ErrInvalidDigest is returned by Digest.Validate (and so by
	// MarshalBinary, UnmarshalBinary, New and Update) for a digest whose
	// fields break the documented limits.
	ErrInvalidDigest = errors.New("invalid digest")

	// ErrInvalidConfig is returned by Config.Validate and New for a
	// configuration that cannot work: an empty node name, a bad port, a
	// secret key that is not 16, 24 or 32 bytes long.
	ErrInvalidConfig = errors.New("invalid discovery config")

	// ErrNoSeeds is returned by Membership.Join when it is given no seed
	// and Config.Seeds is empty. A site that is meant to start a federation
	// alone may ignore it.
	ErrNoSeeds = errors.New("no seed addresses")

	// ErrJoin is returned by Membership.Join when no seed could be reached.
	// It wraps memberlist's own errors, one per seed address tried.
	ErrJoin = errors.New("no seed reachable")

	// ErrShutdown is returned by the methods of a Membership that has been
	// shut down.
	ErrShutdown = errors.New("membership is shut down")

	// ErrNoAddress is returned by Confirm for a member whose digest carries
	// no gRPC address (its digest could not be decoded), so it cannot be
	// probed.
	ErrNoAddress = errors.New("member has no gRPC address")

	// ErrPartitioned is returned by PartitionTransport when memberlist dials
	// a blocked address.
	ErrPartitioned = errors.New("address blocked by partition")
)
