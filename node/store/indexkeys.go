package store

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fedsched/fedsched/node/store/internal/storepb"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// The field numbers indexedFields reads, from the generated descriptors.
var (
	fieldRecordJob = fieldNumber((&storepb.JobRecord{}).ProtoReflect().Descriptor(), "job")
	fieldJobState  = fieldNumber((&fedschedv1.Job{}).ProtoReflect().Descriptor(), "state")
	fieldJobSpec   = fieldNumber((&fedschedv1.Job{}).ProtoReflect().Descriptor(), "spec")
	fieldSpecUser  = fieldNumber((&fedschedv1.JobSpec{}).ProtoReflect().Descriptor(), "user")
)

func fieldNumber(md protoreflect.MessageDescriptor, name protoreflect.Name) protowire.Number {
	f := md.Fields().ByName(name)
	if f == nil {
		panic(fmt.Sprintf("store: %s has no field %s", md.FullName(), name))
	}
	return f.Number()
}

// indexedFields reads from a stored job record (encodeJobRecord) only what
// its index keys are made of, the job's state and user, without decoding
// the record: every write of a job removes the index keys of the version it
// replaces, and decoding the whole job (its spec, route, history) for two
// fields was a sixth of what a node allocated per submission. As with
// proto.Unmarshal, the last value of a field wins, also across repeated
// occurrences of an embedded message (which merge). It returns an error
// wrapping ErrCorrupt for a value that is not well-formed wire format.
func indexedFields(b []byte) (fedschedv1.JobState, string, error) {
	if len(b) == 0 || b[0] != recordFormat {
		return 0, "", fmt.Errorf("not a job record: %w", ErrCorrupt)
	}
	var (
		state fedschedv1.JobState
		user  string
	)
	err := eachField(b[1:], func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != fieldRecordJob || typ != protowire.BytesType {
			return nil
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
			switch {
			case num == fieldJobState && typ == protowire.VarintType:
				state = fedschedv1.JobState(int32(x))
			case num == fieldJobSpec && typ == protowire.BytesType:
				return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					if num == fieldSpecUser && typ == protowire.BytesType {
						user = string(v)
					}
					return nil
				})
			}
			return nil
		})
	})
	return state, user, err
}

// eachField calls f for each field of the wire-format message b, with the
// value's bytes (length-delimited fields) or its integer (varints).
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("bad tag: %w: %w", protowire.ParseError(n), ErrCorrupt)
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("bad field %d: %w: %w", num, protowire.ParseError(n), ErrCorrupt)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
