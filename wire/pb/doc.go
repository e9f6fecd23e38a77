// Package pb holds the Go types generated from wire/proto/pulsar_api.proto,
// Magnetar's definition of the Pulsar binary protocol. The generated file is
// committed so that a build needs no protoc; regenerate it with
// `make generate` (or `go generate ./wire/pb`) after editing the .proto.
//
// compat_test.go proves the definitions identical, field by field, to the
// ones the official Go client compiles in.
package pb

//go:generate make -C ../.. generate
