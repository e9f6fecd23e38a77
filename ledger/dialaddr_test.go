package ledger

import (
	"context"
	"net"
	"testing"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/metadata"
)

// A client with DialAddresses dials a bookie at the mapped address, not
// the registered one; a client without the mapping cannot reach it.
func TestDialAddressesReplaceRegisteredEndpoint(t *testing.T) {
	meta := metadata.NewMemoryServer()
	startTLSBookie(t, meta, "real", nil, true)
	ctx := context.Background()
	store := meta.NewSession()
	defer store.Close()
	regs, err := registry.Bookies(ctx, store)
	if err != nil || len(regs) != 1 {
		t.Fatalf("registered: %+v %v", regs, err)
	}
	// A second registration of the same bookie at an address where
	// nothing listens: only a mapping makes it reachable.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close()
	if _, err := registry.Register(ctx, store, registry.Registration{BookieID: "mapped", Address: nowhere}, quietLog()); err != nil {
		t.Fatal(err)
	}
	direct := netClient(t, meta, Config{})
	if _, err := doInfo(direct.transport, "mapped"); err == nil {
		t.Fatal("a client without DialAddresses reached a bookie registered where nothing listens")
	}
	mapped := netClient(t, meta, Config{DialAddresses: map[string]string{nowhere: regs[0].Address}})
	if _, err := doInfo(mapped.transport, "mapped"); err != nil {
		t.Fatalf("through the mapped address: %v", err)
	}
}
