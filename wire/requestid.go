package wire

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// requestIDFields maps a command type to its body's request_id field, for
// the types whose body has one; read-only after package initialisation.
var requestIDFields = buildRequestIDFields()

func buildRequestIDFields() map[protoreflect.EnumNumber]protoreflect.FieldDescriptor {
	out := map[protoreflect.EnumNumber]protoreflect.FieldDescriptor{}
	for n, body := range commandBodies {
		if fd := body.fd.Message().Fields().ByName("request_id"); fd != nil && fd.Kind() == protoreflect.Uint64Kind {
			out[n] = fd
		}
	}
	return out
}

// RequestID is the request id a command carries in its body; ok is false
// when the command's type has none, or its body is missing.
func RequestID(cmd *pb.BaseCommand) (id uint64, ok bool) {
	fd, body, ok := requestIDField(cmd)
	if !ok {
		return 0, false
	}
	return body.Get(fd).Uint(), true
}

// SetRequestID sets the request id of a command whose type has one (and
// whose body is set); it reports whether it did.
func SetRequestID(cmd *pb.BaseCommand, id uint64) bool {
	fd, body, ok := requestIDField(cmd)
	if ok {
		body.Set(fd, protoreflect.ValueOfUint64(id))
	}
	return ok
}

func requestIDField(cmd *pb.BaseCommand) (protoreflect.FieldDescriptor, protoreflect.Message, bool) {
	n := protoreflect.EnumNumber(cmd.GetType())
	fd, ok := requestIDFields[n]
	if !ok {
		return nil, nil, false
	}
	m := cmd.ProtoReflect()
	bodyField := commandBodies[n].fd
	if !m.Has(bodyField) {
		return nil, nil, false
	}
	return fd, m.Get(bodyField).Message(), true
}
