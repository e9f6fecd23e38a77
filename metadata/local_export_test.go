package metadata

import "github.com/cockroachdb/pebble/v2/vfs"

// Test hooks for the local backend, for package metadata_test.

// LocalOptionsWithFS returns opts with Pebble running on fsys (an errorfs,
// to inject disk faults under Pebble itself).
func LocalOptionsWithFS(opts LocalOptions, fsys vfs.FS) LocalOptions {
	opts.fs = fsys
	return opts
}

// FailLocalWrites makes every later persist of s fail with err at the
// commit failpoint, as a dead disk would, without Pebble knowing.
func FailLocalWrites(s *LocalServer, err error) {
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	s.persist.beforeCommit = func() error { return err }
}
