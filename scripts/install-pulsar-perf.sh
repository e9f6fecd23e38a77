#!/usr/bin/env bash
# Installs the Pulsar Go client's own perf tool (pulsar-perf-go, the main
# package github.com/apache/pulsar-client-go/perf) at the client version
# go.mod requires, as bin/pulsar-perf-go. cmd/magnetar's compatibility test
# runs it against a standalone, as users would. Idempotent and quiet: it
# prints the binary's path and rebuilds only when the version changed.
#
# The build is outside our module (`go install pkg@version` from the module
# proxy), so its dependencies (cobra and the like) stay out of go.mod.
#
#   PULSAR_PERF_GOBIN   where the binary goes (default <repo>/bin)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${PULSAR_PERF_GOBIN:-$ROOT/bin}"
GO="${GO:-go}"

die() { echo "install-pulsar-perf.sh: $*" >&2; exit 1; }

version="$(cd "$ROOT" && "$GO" list -m -f '{{.Version}}' github.com/apache/pulsar-client-go)" ||
  die "cannot read the pulsar-client-go version from go.mod"
bin="$OUT/pulsar-perf-go"
stamp="$OUT/.pulsar-perf-go.version"
if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$OUT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-mod=mod "$GO" install "github.com/apache/pulsar-client-go/perf@$version") ||
  die "go install github.com/apache/pulsar-client-go/perf@$version failed (is the module proxy reachable?)"
mv "$tmp/perf" "$bin"
echo "$version" > "$stamp"
echo "$bin"
