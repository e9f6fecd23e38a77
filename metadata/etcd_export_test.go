package metadata

// Test hooks for the etcd backend, for package metadata_test.

// EtcdLease returns an etcd store's lease id.
func EtcdLease(s Store) int64 { return int64(s.(*etcdStore).lease) }
