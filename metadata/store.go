// Package metadata is the one metadata-store contract every Magnetar
// component uses (ledger metadata, topic ownership, cursors' pointers,
// tenants and namespace policies, bookie registration, load reports), with
// ZooKeeper semantics: a tree of versioned nodes, compare-and-set by
// version, ephemeral nodes bound to the client's session, sequential nodes,
// watches, and session events.
//
// Backends are chosen by connection string, as Pulsar's --metadata-store:
//
//	memory:                         in-process, for unit tests
//	zk:host1:2181,host2:2181/chroot ZooKeeper (cluster and configuration stores)
//	etcd:http://h1:2379,h2:2379/pfx etcd (the same roles; key layout in etcd.go)
//	local:/path/to/dir              embedded and persisted, for standalone
//
// Every backend passes one conformance suite, metadatatest.
//
// The interface avoids ZooKeeper-only ideas so that an etcd backend fits:
// versions are opaque per-key counters, watches are on a path prefix
// (etcd watch with prefix, ZooKeeper persistent recursive watch), and
// sessions map to etcd leases.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AnyVersion, as an expected version, matches whatever version a node has.
const AnyVersion int64 = -1

// MaxValueSize is the largest value a node may hold, in every backend
// (ZooKeeper's own packet limit is configured above it).
const MaxValueSize = 1 << 20

// Errors every backend returns (wrapped with the path); test with errors.Is.
var (
	ErrNotFound      = errors.New("metadata: node does not exist")
	ErrExists        = errors.New("metadata: node already exists")
	ErrBadVersion    = errors.New("metadata: version conflict")
	ErrNotEmpty      = errors.New("metadata: node has children")
	ErrInvalidPath   = errors.New("metadata: invalid path")
	ErrValueTooLarge = errors.New("metadata: value too large")
	ErrEphemeralKids = errors.New("metadata: ephemeral nodes cannot have children")
	ErrClosed        = errors.New("metadata: store closed")
	ErrSessionLost   = errors.New("metadata: session lost")
	ErrWatchOverflow = errors.New("metadata: watcher fell behind; events were not dropped, the watch was closed and must be re-established")
	// ErrWatchInterrupted ends watches when the connection to the backend
	// is lost: changes made meanwhile cannot be replayed, so the owner must
	// re-read what it cares about and watch again.
	ErrWatchInterrupted = errors.New("metadata: connection to the store was lost; changes may have been missed, re-read and watch again")
	// ErrStoreFailed means the backend can no longer make changes durable
	// (a local store's disk failed); every later operation fails with it.
	ErrStoreFailed = errors.New("metadata: store failed")
)

// Stat describes a node.
type Stat struct {
	// Version counts modifications of the node's value; a new node has 0.
	Version int64
	// Created and Modified are the server's timestamps.
	Created, Modified time.Time
	// CreateID tells this node from another created at the same path
	// before or after it (ZooKeeper's czxid, etcd's create revision, the
	// memory store's creation count): a deleted and re-created node has
	// another, though its value and version may be the same. 0 where the
	// backend did not report it (the answer of a Create).
	CreateID int64
	// Ephemeral is set for nodes that vanish with their owner's session.
	Ephemeral bool
	// NumChildren is the number of direct children.
	NumChildren int
}

// CreateOptions choose the kind of node Create makes.
type CreateOptions struct {
	// Ephemeral nodes are deleted when the creating session ends.
	Ephemeral bool
	// Sequential appends a 10-digit, zero-padded, per-parent increasing
	// counter to the name; Create returns the actual path.
	Sequential bool
}

// EventType is the kind of change a watch reports.
type EventType int

// The events a watch delivers.
const (
	EventCreated EventType = iota + 1
	EventModified
	EventDeleted
	EventChildrenChanged // delivered for the parent of a created or deleted node
)

func (t EventType) String() string {
	switch t {
	case EventCreated:
		return "created"
	case EventModified:
		return "modified"
	case EventDeleted:
		return "deleted"
	case EventChildrenChanged:
		return "children-changed"
	}
	return fmt.Sprintf("event(%d)", int(t))
}

// Event is one change under a watched prefix.
type Event struct {
	Type EventType
	Path string
}

// SessionState is the state of the store's session with its backend.
type SessionState int

// Session states, as Pulsar's SessionEvent.
const (
	// SessionConnected: connected, ephemeral nodes held.
	SessionConnected SessionState = iota + 1
	// SessionSuspended: connection lost, the session may still be alive;
	// owners should stop taking new work but keep what they own.
	SessionSuspended
	// SessionReconnected: back after a suspension, same session.
	SessionReconnected
	// SessionLost: the session expired; every ephemeral node it held is
	// gone. Owners must stop serving what they owned at once.
	SessionLost
)

func (s SessionState) String() string {
	switch s {
	case SessionConnected:
		return "connected"
	case SessionSuspended:
		return "suspended"
	case SessionReconnected:
		return "reconnected"
	case SessionLost:
		return "lost"
	}
	return fmt.Sprintf("session(%d)", int(s))
}

// Store is the metadata store contract. Implementations are safe for
// concurrent use. Every method taking a context fails with the context's
// error when it is done, never hanging past it.
type Store interface {
	// Get returns a node's value and stat; ErrNotFound if absent.
	Get(ctx context.Context, path string) ([]byte, Stat, error)
	// Put sets a node's value if its version is expectedVersion (or any
	// version with AnyVersion, creating the node if absent). Missing
	// parents are created as empty persistent nodes.
	Put(ctx context.Context, path string, value []byte, expectedVersion int64) (Stat, error)
	// Create makes a new node (ErrExists if present) and returns its path,
	// which differs from path for sequential nodes. Missing parents are
	// created as empty persistent nodes.
	Create(ctx context.Context, path string, value []byte, opts CreateOptions) (string, Stat, error)
	// Delete removes a node with no children if its version matches.
	Delete(ctx context.Context, path string, expectedVersion int64) error
	// Children returns the names of a node's children, sorted.
	Children(ctx context.Context, path string) ([]string, error)
	// Exists reports whether a node exists, with its stat when it does.
	Exists(ctx context.Context, path string) (bool, Stat, error)
	// Watch delivers, in order, every change at prefix or below it, from
	// the moment Watch returns until the watcher is closed.
	Watch(ctx context.Context, prefix string) (*Watcher, error)
	// SessionEvents returns a new stream of the session's states, in
	// order, starting with the current one. Each call is its own
	// subscriber, so every owner sees every state.
	SessionEvents() *SessionWatcher
	// Close ends the session (its ephemeral nodes are deleted) and
	// releases the backend.
	Close() error
}

// ValidatePath checks a node path: absolute, no empty, "." or ".."
// segments, no trailing slash (except the root), no control characters.
func ValidatePath(path string) error {
	if path == "/" {
		return nil
	}
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") {
		return fmt.Errorf("%w %q: must start with / and not end with /", ErrInvalidPath, path)
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w %q: empty, . or .. segment", ErrInvalidPath, path)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("%w %q: control character %U", ErrInvalidPath, path, r)
			}
		}
	}
	return nil
}

// validateValue rejects values over MaxValueSize.
func validateValue(path string, value []byte) error {
	if len(value) > MaxValueSize {
		return fmt.Errorf("%w: %s: %d bytes, limit %d", ErrValueTooLarge, path, len(value), MaxValueSize)
	}
	return nil
}

// parentOf returns the parent path of a valid, non-root path.
func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i == 0 {
		return "/"
	}
	return path[:i]
}

// underPrefix reports whether path is prefix or inside it.
func underPrefix(path, prefix string) bool {
	if prefix == "/" || path == prefix {
		return true
	}
	return strings.HasPrefix(path, prefix) && len(path) > len(prefix) && path[len(prefix)] == '/'
}

// opError wraps a sentinel with the operation and path.
func opError(op, path string, err error) error {
	return fmt.Errorf("metadata %s %s: %w", op, path, err)
}
