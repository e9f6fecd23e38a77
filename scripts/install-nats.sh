#!/usr/bin/env bash
# Installs the NATS servers the JetStream benchmark driver (benchmarks/natsperf)
# runs against, and natscli, whose `nats bench` make bench-report runs beside
# natsperf. Idempotent and quiet: it prints the path of each binary it leaves
# in place, one a line, and installs nothing that is already there.
#
#   scripts/install-nats.sh          Debian's nats-server if missing, plus a
#                                    newer nats-server and natscli's nats
#                                    built into bin/
#
# Why two: Debian bookworm ships nats-server 2.9.10, which has no
# `jetstream { sync_interval: always }` (the option arrived in 2.10; 2.9.10
# rejects it as an unknown field). It is enough for natsperf --sync default.
# For --sync always the script builds NATS_SERVER_VERSION from the Go module
# proxy with `go install` into NATS_GOBIN (default: bin/ at the repository
# root, which git ignores); that build is outside our module and leaves go.mod
# alone. Pass it with `natsperf --server-bin bin/nats-server`.
#
# natscli is built the same way: it is NATS's own benchmark, so the report's
# NATS figure does not rest on our driver alone (benchmarks/benchreport,
# --natscli bin/nats).
#
#   NATS_SERVER_VERSION   version to build (default v2.15.2; empty skips the build)
#   NATSCLI_VERSION       natscli version to build (default v0.5.0; empty skips it)
#   NATS_GOBIN            where the built binaries go (default <repo>/bin)
set -euo pipefail

NATS_SERVER_VERSION="${NATS_SERVER_VERSION-v2.15.2}"
NATSCLI_VERSION="${NATSCLI_VERSION-v0.5.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NATS_GOBIN="${NATS_GOBIN:-$ROOT/bin}"

die() { echo "install-nats.sh: $*" >&2; exit 1; }

install_debian() {
  if ! command -v nats-server >/dev/null; then
    local sudo=""
    if [[ $(id -u) != 0 ]]; then
      command -v sudo >/dev/null || die "nats-server is not installed and installing it needs root: apt-get install nats-server"
      sudo=sudo
    fi
    # Try without an index refresh first: it is slow and usually not needed.
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nats-server >/dev/null 2>&1; then
      $sudo apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nats-server >/dev/null
    fi
  fi
  command -v nats-server || die "apt-get installed nats-server but it is not on PATH"
}

# build_newer builds NATS_SERVER_VERSION unless the binary there already
# reports that version.
build_newer() {
  [[ -n $NATS_SERVER_VERSION ]] || return 0
  local bin="$NATS_GOBIN/nats-server" want="v${NATS_SERVER_VERSION#v}"
  if [[ $("$bin" --version 2>/dev/null) != "nats-server: $want" ]]; then
    command -v go >/dev/null || die "building nats-server $want needs go on PATH"
    mkdir -p "$NATS_GOBIN"
    # `go install pkg@version` ignores the current module: our go.mod is untouched.
    (cd / && GOBIN="$NATS_GOBIN" go install "github.com/nats-io/nats-server/v2@$want") \
      || die "go install github.com/nats-io/nats-server/v2@$want failed"
  fi
  echo "$bin"
}

# build_natscli builds NATSCLI_VERSION's nats unless the binary there
# already reports that version (`nats --version` prints "v0.5.0").
build_natscli() {
  [[ -n $NATSCLI_VERSION ]] || return 0
  local bin="$NATS_GOBIN/nats" want="v${NATSCLI_VERSION#v}"
  if [[ $("$bin" --version 2>/dev/null) != "$want" ]]; then
    command -v go >/dev/null || die "building natscli $want needs go on PATH"
    mkdir -p "$NATS_GOBIN"
    (cd / && GOBIN="$NATS_GOBIN" go install "github.com/nats-io/natscli/nats@$want") \
      || die "go install github.com/nats-io/natscli/nats@$want failed"
  fi
  echo "$bin"
}

install_debian
build_newer
build_natscli
