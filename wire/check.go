package wire

// What the protobuf decoder does not check, checked after it (checkCommand):
//
//   - The body of the declared type is present. BaseCommand carries each
//     command's body in the field whose number equals its type's (CONNECT =
//     2 and field connect = 2, and so on for every type); a command without
//     it is refused as malformed, as Pulsar's broker refuses it, so no
//     handler ever sees a nil body.
//   - Strings are valid UTF-8. proto2 does not require it, and Go's decoder
//     keeps invalid bytes as they came; Java's decoder (what Pulsar's
//     broker and the Java client run) turns each invalid byte into U+FFFD.
//     We do the same, so a name read from the wire is always valid UTF-8
//     and is the name Pulsar would have stored (invalid UTF-8 in a topic
//     name crashed the metrics exporter, which refuses such labels).

import (
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// bodyField describes the body field of one command type.
type bodyField struct {
	fd protoreflect.FieldDescriptor
	// hasStrings: the body holds string fields, directly or nested, so it
	// is walked for invalid UTF-8 (SEND, MESSAGE, FLOW do not).
	hasStrings bool
}

// commandBodies maps a command type number to its body field, and
// stringsWithin says which message types can hold a string, directly or
// nested; both read-only after package initialisation.
var (
	stringsWithin = map[protoreflect.FullName]bool{}
	commandBodies = buildCommandBodies()
)

func buildCommandBodies() map[protoreflect.EnumNumber]bodyField {
	md := (&pb.BaseCommand{}).ProtoReflect().Descriptor()
	types := pb.BaseCommand_CONNECT.Descriptor().Values()
	bodies := make(map[protoreflect.EnumNumber]bodyField, types.Len())
	for i := range types.Len() {
		n := types.Get(i).Number()
		fd := md.Fields().ByNumber(protoreflect.FieldNumber(n))
		if fd == nil || fd.Message() == nil {
			panic("wire: BaseCommand has no body field for type " + string(types.Get(i).Name()))
		}
		bodies[n] = bodyField{fd: fd, hasStrings: holdsStrings(fd.Message(), map[protoreflect.FullName]bool{})}
		markStrings(fd.Message())
	}
	return bodies
}

// holdsStrings reports whether messages of md can carry a string field.
func holdsStrings(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() == protoreflect.StringKind {
			return true
		}
		if fd.Message() != nil && holdsStrings(fd.Message(), seen) {
			return true
		}
	}
	return false
}

// markStrings records in stringsWithin every message type reachable from
// md that can hold a string, so fixUTF8 skips the rest (an ACK's message
// ids, thousands of them, have none).
func markStrings(md protoreflect.MessageDescriptor) {
	if _, seen := stringsWithin[md.FullName()]; seen {
		return
	}
	stringsWithin[md.FullName()] = holdsStrings(md, map[protoreflect.FullName]bool{})
	fields := md.Fields()
	for i := range fields.Len() {
		if m := fields.Get(i).Message(); m != nil {
			markStrings(m)
		}
	}
}

// checkCommand refuses a command without the body of its type and
// replaces invalid UTF-8 in its strings.
func checkCommand(cmd *pb.BaseCommand) error {
	body, ok := commandBodies[protoreflect.EnumNumber(cmd.GetType())]
	if !ok {
		return malformed("command type %d is unknown", cmd.GetType())
	}
	m := cmd.ProtoReflect()
	if !m.Has(body.fd) {
		return malformed("%s command without its %s body", cmd.GetType(), body.fd.Name())
	}
	if body.hasStrings {
		fixUTF8(m.Get(body.fd).Message())
	}
	return nil
}

// fixUTF8 replaces invalid UTF-8 in every string of m, recursively.
func fixUTF8(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			fixList(fd, v.List())
		case fd.IsMap():
			return true // the protocol has no maps
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				m.Set(fd, protoreflect.ValueOfString(ValidUTF8(s)))
			}
		case fd.Message() != nil && stringsWithin[fd.Message().FullName()]:
			fixUTF8(v.Message())
		}
		return true
	})
}

func fixList(fd protoreflect.FieldDescriptor, l protoreflect.List) {
	if fd.Message() != nil && !stringsWithin[fd.Message().FullName()] {
		return
	}
	for i := range l.Len() {
		switch {
		case fd.Kind() == protoreflect.StringKind:
			if s := l.Get(i).String(); !utf8.ValidString(s) {
				l.Set(i, protoreflect.ValueOfString(ValidUTF8(s)))
			}
		case fd.Message() != nil:
			fixUTF8(l.Get(i).Message())
		}
	}
}

// ValidUTF8 returns s with each byte that is not part of a valid UTF-8
// sequence replaced by U+FFFD, as Java's decoder does (strings.ToValidUTF8
// would replace a whole run of them by one).
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]rune, 0, len(s))
	for _, r := range s {
		out = append(out, r) // ranging yields RuneError for each invalid byte
	}
	return string(out)
}
