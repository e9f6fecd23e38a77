package registry

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestRegistration(t *testing.T) {
	ctx := context.Background()
	srv := metadata.NewMemoryServer()
	s1, s2 := srv.NewSession(), srv.NewSession()
	defer s2.Close()
	reg, err := Register(ctx, s1, Registration{BookieID: "b1", Address: "127.0.0.1:3181", Rack: "/r1"}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := Register(short, s2, Registration{BookieID: "b1"}, quiet()); err == nil {
		t.Fatal("a second bookie registered under a live id")
	}
	if err := reg.SetReadOnly(ctx, true); err != nil {
		t.Fatal(err)
	}
	list, err := Bookies(ctx, s2)
	if err != nil || len(list) != 1 || !list[0].ReadOnly || list[0].Rack != "/r1" {
		t.Fatalf("bookies: %+v %v", list, err)
	}
	s1.Close() // the session ends: the ephemeral registration goes
	list, err = Bookies(ctx, s2)
	if err != nil || len(list) != 0 {
		t.Fatalf("bookies after the session ended: %+v %v", list, err)
	}
}
