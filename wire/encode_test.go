package wire

import (
	"bytes"
	"testing"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// An entry's head re-framed with nothing added (AppendHeadWith), with the
// payload sent apart, is the entry AppendEntry writes whole: same bytes,
// same checksum.
func TestAppendHeadWithNothingIsTheEntry(t *testing.T) {
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
	head := e.AppendHeadWith([]byte("x"))
	if got := append(head[1:], e.Payload()...); !bytes.Equal(got, whole) {
		t.Fatalf("head+payload\n%x\nwant\n%x", got, whole)
	}
}
