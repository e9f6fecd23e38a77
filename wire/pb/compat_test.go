package pb_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	// Linking the official Go client registers its generated descriptors
	// (package pulsar.proto) in protoregistry.GlobalFiles.
	_ "github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/magnetar-io/magnetar/wire/pb"
)

const clientPackage = "pulsar.proto"

// TestCompatibleWithGoClient compares our file descriptor with the one the Go
// client compiled in, both ways: every message, nested type, field (number,
// name, kind, label, packing, default, referenced type) and enum value.
func TestCompatibleWithGoClient(t *testing.T) {
	ours := pb.File_wire_proto_pulsar_api_proto
	theirs := clientFile(t)
	if ours.Package() == theirs.Package() {
		t.Fatalf("our package %q must differ from the client's, or the registries would clash", ours.Package())
	}
	c := compareFiles(ours, theirs)
	for _, d := range c.diffs {
		t.Error(d)
	}
	// v0.19.0 has 72 messages with 407 fields; far fewer means we compared
	// against something else.
	if c.msgs < 70 || c.fields < 400 {
		t.Errorf("compared only %d messages and %d fields: is the client's descriptor complete?", c.msgs, c.fields)
	}
	t.Logf("compared %d messages, %d fields, %d enums, %d enum values", c.msgs, c.fields, c.enumCount, c.enumValues)
}

// TestComparerCatchesDifferences breaks copies of our descriptor in the ways
// that matter and checks that each break is reported, so a green
// TestCompatibleWithGoClient means something.
func TestComparerCatchesDifferences(t *testing.T) {
	ours := pb.File_wire_proto_pulsar_api_proto
	cases := []struct {
		name string
		edit func(*descriptorpb.FileDescriptorProto)
		want []string
	}{
		{"default", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "MessageIdData", "partition").DefaultValue = proto.String("-2")
		}, []string{"field MessageIdData.partition = 3: default is -2, client has -1"}},
		{"label", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandSend", "num_messages").Label = descriptorpb.FieldDescriptorProto_LABEL_REQUIRED.Enum()
		}, []string{"field CommandSend.num_messages = 3: label is required, client has optional"}},
		{"type", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandFlow", "messagePermits").Type = descriptorpb.FieldDescriptorProto_TYPE_UINT64.Enum()
		}, []string{"field CommandFlow.messagePermits = 2: kind is uint64, client has uint32"}},
		{"number", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandAck", "request_id").Number = proto.Int32(9)
		}, []string{
			"field CommandAck.request_id = 9: ours only",
			"field CommandAck.request_id = 8: missing from ours",
		}},
		{"name", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandConnected", "server_version").Name = proto.String("serverVersion")
		}, []string{"field CommandConnected.serverVersion = 1: name is serverVersion, client has server_version"}},
		{"enum value", func(f *descriptorpb.FileDescriptorProto) {
			for _, e := range f.EnumType {
				if e.GetName() == "ServerError" {
					e.Value = e.Value[:len(e.Value)-1]
				}
			}
		}, []string{"enum ServerError: value ProducerFenced = 25: missing from ours"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fdp := protodesc.ToFileDescriptorProto(ours)
			tc.edit(fdp)
			broken, err := protodesc.NewFile(fdp, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := compareFiles(broken, ours)
			if !slices.Equal(c.diffs, tc.want) {
				t.Fatalf("diffs %q, want exactly %q", c.diffs, tc.want)
			}
		})
	}
}

func field(f *descriptorpb.FileDescriptorProto, msg, name string) *descriptorpb.FieldDescriptorProto {
	for _, m := range f.MessageType {
		if m.GetName() != msg {
			continue
		}
		for _, fd := range m.Field {
			if fd.GetName() == name {
				return fd
			}
		}
	}
	panic(msg + "." + name + " not found")
}

func compareFiles(ours, theirs protoreflect.FileDescriptor) *comparer {
	c := &comparer{}
	c.messages("", ours.Messages(), theirs.Messages())
	c.enums("", ours.Enums(), theirs.Enums())
	return c
}

func clientFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(clientPackage + ".BaseCommand")
	if err != nil {
		t.Fatalf("the Go client's descriptors are not registered: %v", err)
	}
	return d.ParentFile()
}

type comparer struct {
	diffs                               []string
	msgs, fields, enumCount, enumValues int
}

func (c *comparer) errorf(format string, args ...any) {
	c.diffs = append(c.diffs, fmt.Sprintf(format, args...))
}

// messages matches two lists of message descriptors by name and compares
// each pair; scope names the enclosing message for error messages.
func (c *comparer) messages(scope string, ours, theirs protoreflect.MessageDescriptors) {
	for i := 0; i < ours.Len(); i++ {
		o := ours.Get(i)
		th := theirs.ByName(o.Name())
		if th == nil {
			c.errorf("message %s%s: ours only, the client has no such message", scope, o.Name())
			continue
		}
		c.message(scope+string(o.Name())+".", o, th)
	}
	for i := 0; i < theirs.Len(); i++ {
		if th := theirs.Get(i); ours.ByName(th.Name()) == nil {
			c.errorf("message %s%s: missing from ours", scope, th.Name())
		}
	}
}

func (c *comparer) message(scope string, o, th protoreflect.MessageDescriptor) {
	c.msgs++
	if o.Oneofs().Len() != th.Oneofs().Len() {
		c.errorf("message %s: %d oneofs, client %d", strings.TrimSuffix(scope, "."), o.Oneofs().Len(), th.Oneofs().Len())
	}
	for i := 0; i < o.Fields().Len(); i++ {
		of := o.Fields().Get(i)
		tf := th.Fields().ByNumber(of.Number())
		if tf == nil {
			c.errorf("field %s%s = %d: ours only", scope, of.Name(), of.Number())
			continue
		}
		c.field(scope, of, tf)
	}
	for i := 0; i < th.Fields().Len(); i++ {
		if tf := th.Fields().Get(i); o.Fields().ByNumber(tf.Number()) == nil {
			c.errorf("field %s%s = %d: missing from ours", scope, tf.Name(), tf.Number())
		}
	}
	c.messages(scope, o.Messages(), th.Messages())
	c.enums(scope, o.Enums(), th.Enums())
}

func (c *comparer) field(scope string, o, th protoreflect.FieldDescriptor) {
	c.fields++
	where := fmt.Sprintf("field %s%s = %d", scope, o.Name(), o.Number())
	check := func(what string, ours, theirs any) {
		if ours != theirs {
			c.errorf("%s: %s is %v, client has %v", where, what, ours, theirs)
		}
	}
	check("name", o.Name(), th.Name())
	check("json name", o.JSONName(), th.JSONName())
	check("kind", o.Kind(), th.Kind())
	check("label", o.Cardinality(), th.Cardinality())
	check("packed", o.IsPacked(), th.IsPacked())
	check("presence", o.HasPresence(), th.HasPresence())
	check("explicit default", o.HasDefault(), th.HasDefault())
	check("default", defaultString(o), defaultString(th))
	check("type", relName(o), relName(th))
}

// defaultString renders a field's default so that ours and the client's
// compare equal when they are the same value.
func defaultString(f protoreflect.FieldDescriptor) string {
	if f.Cardinality() == protoreflect.Repeated || f.Message() != nil {
		return ""
	}
	if ev := f.DefaultEnumValue(); ev != nil {
		return fmt.Sprintf("%s(%d)", ev.Name(), ev.Number())
	}
	return fmt.Sprintf("%#v", f.Default().Interface())
}

// relName is the referenced message or enum type without its package.
func relName(f protoreflect.FieldDescriptor) string {
	var full protoreflect.FullName
	switch {
	case f.Message() != nil:
		full = f.Message().FullName()
	case f.Enum() != nil:
		full = f.Enum().FullName()
	default:
		return ""
	}
	pkg := f.ParentFile().Package()
	return strings.TrimPrefix(string(full), string(pkg)+".")
}

func (c *comparer) enums(scope string, ours, theirs protoreflect.EnumDescriptors) {
	for i := 0; i < ours.Len(); i++ {
		o := ours.Get(i)
		th := theirs.ByName(o.Name())
		if th == nil {
			c.errorf("enum %s%s: ours only, the client has no such enum", scope, o.Name())
			continue
		}
		c.enum(scope+string(o.Name()), o, th)
	}
	for i := 0; i < theirs.Len(); i++ {
		if th := theirs.Get(i); ours.ByName(th.Name()) == nil {
			c.errorf("enum %s%s: missing from ours", scope, th.Name())
		}
	}
}

func (c *comparer) enum(where string, o, th protoreflect.EnumDescriptor) {
	c.enumCount++
	for i := 0; i < o.Values().Len(); i++ {
		c.enumValues++
		ov := o.Values().Get(i)
		tv := th.Values().ByName(ov.Name())
		switch {
		case tv == nil:
			c.errorf("enum %s: value %s = %d: ours only", where, ov.Name(), ov.Number())
		case tv.Number() != ov.Number():
			c.errorf("enum %s: value %s is %d, client has %d", where, ov.Name(), ov.Number(), tv.Number())
		}
	}
	for i := 0; i < th.Values().Len(); i++ {
		if tv := th.Values().Get(i); o.Values().ByName(tv.Name()) == nil {
			c.errorf("enum %s: value %s = %d: missing from ours", where, tv.Name(), tv.Number())
		}
	}
}

// TestBytesDecodeInClientTypes encodes one fully populated instance of every
// message of ours and decodes it with the client's generated type, then back:
// a second, behavioural check that the two schemas agree on the wire,
// including the client's required-field checks.
func TestBytesDecodeInClientTypes(t *testing.T) {
	msgs := pb.File_wire_proto_pulsar_api_proto.Messages()
	var names []string
	for i := 0; i < msgs.Len(); i++ {
		names = append(names, string(msgs.Get(i).Name()))
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ourType, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("magnetar.wire." + name))
			if err != nil {
				t.Fatal(err)
			}
			theirType, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(clientPackage + "." + name))
			if err != nil {
				t.Fatal(err)
			}
			ours := ourType.New()
			fill(ours, 3)
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ours.Interface())
			if err != nil {
				t.Fatalf("marshal ours: %v", err)
			}
			theirs := theirType.New().Interface()
			if err := proto.Unmarshal(b, theirs); err != nil {
				t.Fatalf("the client cannot decode our %s: %v", name, err)
			}
			b2, err := proto.MarshalOptions{Deterministic: true}.Marshal(theirs)
			if err != nil {
				t.Fatalf("marshal theirs: %v", err)
			}
			back := ourType.New().Interface()
			if err := proto.Unmarshal(b2, back); err != nil {
				t.Fatalf("decode the client's re-encoding: %v", err)
			}
			if !proto.Equal(ours.Interface(), back) {
				t.Fatalf("%s changed on a trip through the client's type:\nours: %v\nback: %v", name, ours, back)
			}
			if u := theirs.ProtoReflect().GetUnknown(); len(u) != 0 {
				t.Fatalf("the client saw %d bytes of unknown fields in our %s", len(u), name)
			}
		})
	}
}

// fill sets every field of m to a non-default value, nesting messages up to
// depth levels (recursive types such as MessageIdData stop there).
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Message() != nil {
			if depth == 0 {
				if fd.Cardinality() == protoreflect.Required {
					fill(m.Mutable(fd).Message(), 0)
				}
				continue
			}
			if fd.IsList() {
				fill(m.Mutable(fd).List().AppendMutable().Message(), depth-1)
			} else {
				fill(m.Mutable(fd).Message(), depth-1)
			}
			continue
		}
		v := scalar(fd, i)
		if fd.IsList() {
			m.Mutable(fd).List().Append(v)
			m.Mutable(fd).List().Append(v)
		} else {
			m.Set(fd, v)
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, i int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(!fd.Default().Bool())
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(-7 - i))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(int64(-1<<40 - i))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(1<<31 + i))
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(1<<63 + uint64(i))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(i) + 0.5)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), i))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(i), 0, 0xff})
	}
	panic(fmt.Sprintf("kind %v not handled", fd.Kind()))
}
