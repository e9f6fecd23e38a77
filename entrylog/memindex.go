package entrylog

import (
	randv2 "math/rand/v2"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// memIndexKey is the engine.MemFS attachment key of the Pebble file system
// that holds the indexes of the entry logs on that MemFS.
type memIndexKey struct{}

// memIndex is a crashable Pebble mem FS attached to an engine.MemFS: it
// lives as long as the MemFS (a reopen finds the indexes it left) and a
// CrashClone of the MemFS crashes it too, at the same instant. Without it
// the index of a storage on the mem engine was a new empty file system on
// every Open: a restart kept the entry logs but lost the index, and once a
// flush had checkpointed the journal, every entry.
type memIndex struct{ fs *vfs.MemFS }

func (m memIndex) CrashCloneAttachment(opts engine.CrashOptions) engine.MemAttachment {
	cfg := vfs.CrashCloneCfg{}
	if opts.Rand != nil {
		// Tear unsynced index writes too, reproducibly from the same seed.
		cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 30, RNG: randv2.New(randv2.NewPCG(uint64(opts.Rand.Int63()), 7))}
	}
	return memIndex{m.fs.CrashClone(cfg)}
}

// memIndexFS returns the index file system attached to fs when fs is (a
// wrapper around) the mem backend, else nil.
func memIndexFS(fs engine.FS) vfs.FS {
	for {
		switch v := fs.(type) {
		case *engine.MemFS:
			a := v.Attach(memIndexKey{}, func() engine.MemAttachment { return memIndex{vfs.NewCrashableMem()} })
			return a.(memIndex).fs
		case interface{ Unwrap() engine.FS }:
			fs = v.Unwrap()
		default:
			return nil
		}
	}
}
