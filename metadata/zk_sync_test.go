package metadata_test

import (
	"context"
	"testing"

	"github.com/magnetar-io/magnetar/metadata"
)

// TestZKSync: the ZooKeeper store is a Syncer (its session's server may
// lag), and a sync, through a chroot, is followed by current reads.
func TestZKSync(t *testing.T) {
	zk := sharedZK(t)
	writer := openZK(t, freshChroot(t, zk), metadata.ZKOptions{})
	ctx := context.Background()
	if _, _, err := writer.Create(ctx, "/ledgers/L1", []byte("x"), metadata.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := writer.(metadata.Syncer); !ok {
		t.Fatal("the ZooKeeper store does not implement Syncer")
	}
	if err := metadata.Sync(ctx, writer, "/ledgers/L1"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if ok, _, err := writer.Exists(ctx, "/ledgers/L1"); !ok || err != nil {
		t.Fatalf("exists after sync: %v %v", ok, err)
	}
}
