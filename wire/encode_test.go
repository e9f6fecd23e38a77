package wire

import (
	"bytes"
	"testing"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// AppendEntryHead with the payload sent apart is the entry AppendEntry
// writes whole: same bytes, same checksum.
func TestAppendEntryHeadMatchesAppendEntry(t *testing.T) {
	name, seq := "p", uint64(7)
	md := &pb.MessageMetadata{ProducerName: &name, SequenceId: &seq, PublishTime: &seq}
	whole, err := AppendEntry(nil, md, []byte("the payload"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseEntry(whole)
	if err != nil {
		t.Fatal(err)
	}
	m := e.Metadata()
	head := AppendEntryHead([]byte("x"), e.Payload(), m[:3], m[3:])
	if got := append(head[1:], e.Payload()...); !bytes.Equal(got, whole) {
		t.Fatalf("head+payload\n%x\nwant\n%x", got, whole)
	}
}
