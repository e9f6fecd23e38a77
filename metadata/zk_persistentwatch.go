package metadata

import (
	"unsafe"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper 3.6 added persistent recursive watches (addWatch): one
// registration that reports every create, data change and delete below a
// path, in commit order, without re-arming. That is what Store.Watch
// promises; ZooKeeper's classic one-shot watches cannot keep it (changes
// between a trigger and the re-arm are lost or merged).
//
// go-zookeeper v1.0.4 has no AddWatch (upstream PRs #85 and #122 are not
// merged), but its request path is generic: any struct it can serialise
// goes out with any opcode, and watch notifications for paths it does not
// know still reach the event callback. We reach that request path through
// linkname. The signature below must match (*zk.Conn).request in the
// version go.mod pins; TestZKPersistentWatchBinding fails if it drifts.
// When upstream gains AddWatch this file goes away.

const (
	zkOpRemoveWatches = 18
	zkOpAddWatch      = 106

	zkAddWatchModePersistentRecursive = 1 // AddWatchMode.PERSISTENT_RECURSIVE
	// zkWatcherTypeAny removes every kind of watch on the path. Servers
	// before 3.9 know no PersistentRecursive (5) type and reject it; this
	// store registers nothing but persistent recursive watches, so Any
	// removes exactly those, on 3.6 and later.
	zkWatcherTypeAny = 3
)

// zkAddWatchRequest is ZooKeeper's AddWatchRequest (jute: ustring path,
// int mode).
type zkAddWatchRequest struct {
	Path string
	Mode int32
}

// zkRemoveWatchesRequest is ZooKeeper's RemoveWatchesRequest (jute:
// ustring path, int type).
type zkRemoveWatchesRequest struct {
	Path string
	Type int32
}

// zkEmptyResponse decodes nothing: both replies carry only the header's
// error code.
type zkEmptyResponse struct{}

//go:linkname zkConnRequest github.com/go-zookeeper/zk.(*Conn).request
func zkConnRequest(c *zk.Conn, opcode int32, req any, res any, recvFunc unsafe.Pointer) (int64, error)

// zkAddPersistentRecursiveWatch registers a persistent recursive watch on
// path for this connection.
func zkAddPersistentRecursiveWatch(c *zk.Conn, path string) error {
	_, err := zkConnRequest(c, zkOpAddWatch,
		&zkAddWatchRequest{Path: path, Mode: zkAddWatchModePersistentRecursive}, &zkEmptyResponse{}, nil)
	return err
}

// zkRemovePersistentRecursiveWatch removes it again.
func zkRemovePersistentRecursiveWatch(c *zk.Conn, path string) error {
	_, err := zkConnRequest(c, zkOpRemoveWatches,
		&zkRemoveWatchesRequest{Path: path, Type: zkWatcherTypeAny}, &zkEmptyResponse{}, nil)
	return err
}
