#!/usr/bin/env bash
# cpu-load.sh SECONDS [BUSY] [IDLE]: load beside a test run, to shake out
# tests that depend on an idle machine (docs/testing.md). One process
# spins for BUSY seconds (default 2), rests IDLE (default 2), and so on
# for SECONDS in all; it stops by itself.
set -euo pipefail
total=${1:?usage: cpu-load.sh SECONDS [BUSY] [IDLE]}
busy=${2:-2}
idle=${3:-2}
end=$((SECONDS + total))
while ((SECONDS < end)); do
  timeout "$busy" bash -c 'while :; do :; done' || true
  sleep "$idle"
done
