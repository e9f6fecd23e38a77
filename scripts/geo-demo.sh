#!/usr/bin/env bash
# Three local clusters replicating to each other, to try geo-replication and
# replicated subscriptions (docs/geo-replication.md) on one machine.
#
#   scripts/geo-demo.sh [start]          start clusters east, west and central, set up a
#                                        replicated namespace, run a short demo, print what
#                                        to try next, then wait: Ctrl-C stops and cleans up
#   scripts/geo-demo.sh start --detach   the same, but leave the clusters running
#   scripts/geo-demo.sh stop             stop them and remove their data
#   scripts/geo-demo.sh status           the clusters' URLs and whether they run
#
# Each cluster is a durable standalone (broker and in-process bookie) with its
# own metadata store, on free loopback ports (nothing listens beyond
# 127.0.0.1). Standalones cannot share a configuration store, so every cluster
# is registered in every store, and the tenant and namespace are created in
# each, as docs/geo-replication.md says for clusters without a shared one.
# Data, logs and ports live under $GEO_DEMO_DIR (default
# ${TMPDIR:-/tmp}/magnetar-geo-demo). The binary is $MAGNETAR (default
# bin/magnetar, built with make build when missing).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${GEO_DEMO_DIR:-${TMPDIR:-/tmp}/magnetar-geo-demo}"
MAGNETAR="${MAGNETAR:-$ROOT/bin/magnetar}"
CLUSTERS=(east west central)
TENANT=demo
NAMESPACE=demo/orders
TOPIC=persistent://demo/orders/o

die() { echo "geo-demo.sh: $*" >&2; exit 1; }
# The port registry shared with the test-server scripts (free_port,
# release_ports, LOCK).
. "$ROOT/scripts/testports.sh"

pid_of() { cat "$DIR/$1/pid" 2>/dev/null || true; }
alive() { local p; p=$(pid_of "$1"); [[ -n $p ]] && kill -0 "$p" 2>/dev/null; }
broker_port() { sed -n 1p "$DIR/$1/ports"; }
web_port() { sed -n 2p "$DIR/$1/ports"; }
admin() { local c=$1; shift; "$MAGNETAR" admin --admin-url "http://127.0.0.1:$(web_port "$c")" "$@"; }

start_cluster() {
  local c=$1 bp wp
  mkdir -p "$DIR/$c"
  : >"$DIR/$c/ports"
  bp=$(free_port "$DIR/$c")
  wp=$(free_port "$DIR/$c")
  # setsid: Ctrl-C reaches this script only, which stops the clusters in order.
  setsid "$MAGNETAR" standalone --config "$ROOT/conf/standalone.conf" --data-dir "$DIR/$c/data" \
    --bind-address 127.0.0.1 --advertised-address 127.0.0.1 --broker-port "$bp" --web-port "$wp" \
    --cluster "$c" >"$DIR/$c/log" 2>&1 </dev/null &
  echo $! >"$DIR/$c/pid"
}

wait_ready() {
  local c=$1
  for _ in $(seq 1 600); do
    grep -q "magnetar standalone ready" "$DIR/$c/log" 2>/dev/null && return 0
    alive "$c" || { tail -20 "$DIR/$c/log" >&2; die "cluster $c exited (log: $DIR/$c/log)"; }
    sleep 0.1
  done
  die "cluster $c not ready after 60 s (log: $DIR/$c/log)"
}

# setup registers every cluster in every cluster's store and creates the
# replicated tenant and namespace in each.
setup() {
  local list here c
  list=$(IFS=,; echo "${CLUSTERS[*]}")
  for here in "${CLUSTERS[@]}"; do
    for c in "${CLUSTERS[@]}"; do
      local urls=(--url "http://127.0.0.1:$(web_port "$c")" --broker-url "pulsar://127.0.0.1:$(broker_port "$c")")
      admin "$here" clusters create "$c" "${urls[@]}" >/dev/null 2>&1 ||
        admin "$here" clusters update "$c" "${urls[@]}" >/dev/null
    done
    admin "$here" tenants create "$TENANT" --allowed-clusters "$list" >/dev/null
    admin "$here" namespaces create "$NAMESPACE" --clusters "$list" >/dev/null
  done
}

# demo produces 1000 messages in east while a consumer in west reads them.
demo() {
  local east="pulsar://127.0.0.1:$(broker_port east)" west="pulsar://127.0.0.1:$(broker_port west)"
  echo "== a consumer in west, a producer in east (1000 messages at 200/s)"
  "$MAGNETAR" perf consume --service-url "$west" --topic "$TOPIC" --subscription demo --warmup 0s \
    --num-messages 1000 --progress 0 >"$DIR/consume.out" 2>"$DIR/consume.err" &
  local cons=$!
  sleep 2
  "$MAGNETAR" perf produce --service-url "$east" --topic "$TOPIC" --rate 200 --warmup 0s \
    --num-messages 1000 --progress 0 >"$DIR/produce.out" 2>"$DIR/produce.err" ||
    { cat "$DIR/produce.err" >&2; die "producer in east failed"; }
  local waited=0
  while kill -0 "$cons" 2>/dev/null && ((waited < 300)); do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$cons" 2>/dev/null; then
    kill "$cons" 2>/dev/null || true
    die "the consumer in west did not get 1000 messages in 30 s (see $DIR/consume.err and the clusters' logs)"
  fi
  wait "$cons" || { cat "$DIR/consume.err" >&2; die "consumer in west failed"; }
  echo "-- producer in east:"; sed 's/^/   /' "$DIR/produce.out"
  echo "-- consumer in west:"; sed 's/^/   /' "$DIR/consume.out"
  echo "-- replication seen from east (topics stats, replication section):"
  admin east --output json topics stats "$TOPIC" | sed -n '/"replication"/,$p' | sed 's/^/   /' | head -40
}

next_steps() {
  local c
  echo
  echo "== the clusters"
  for c in "${CLUSTERS[@]}"; do
    printf '   %-8s pulsar://127.0.0.1:%s   http://127.0.0.1:%s   (log %s)\n' "$c" "$(broker_port "$c")" "$(web_port "$c")" "$DIR/$c/log"
  done
  cat <<EOF

== try next
   produce in central, consume in east:
     $MAGNETAR perf consume --service-url pulsar://127.0.0.1:$(broker_port east) --topic $TOPIC --subscription mine &
     $MAGNETAR perf produce --service-url pulsar://127.0.0.1:$(broker_port central) --topic $TOPIC --rate 100 --num-messages 500
   replication stats and backlog of a cluster:
     $MAGNETAR admin --admin-url http://127.0.0.1:$(web_port east) topics stats $TOPIC
   an outage: stop west (kill $(pid_of west)), produce in east, watch replicationBacklog grow in east's
   stats; west cannot restart on its ports by this script: 'geo-demo.sh stop' and start again.
   replicated subscriptions: consume part of the topic in east with the Go client's
   ConsumerOptions{SubscriptionName: "group", ReplicateSubscriptionState: true}, then open the same
   subscription in west: it resumes close to where east stopped (docs/geo-replication.md).
   stop everything: scripts/geo-demo.sh stop
EOF
}

stop() {
  local c p
  for c in "${CLUSTERS[@]}"; do
    p=$(pid_of "$c")
    [[ -n $p ]] && kill "$p" 2>/dev/null || true
  done
  for c in "${CLUSTERS[@]}"; do
    p=$(pid_of "$c")
    [[ -z $p ]] && continue
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null || true
    release_ports "$DIR/$c"
  done
  rm -rf "$DIR"
  echo "geo-demo: stopped; $DIR removed"
}

status() {
  local c
  [[ -d $DIR ]] || { echo "geo-demo: not running"; return 0; }
  for c in "${CLUSTERS[@]}"; do
    local state=stopped
    alive "$c" && state=running
    printf '%-8s %-8s pulsar://127.0.0.1:%s http://127.0.0.1:%s\n' "$c" "$state" "$(broker_port "$c")" "$(web_port "$c")"
  done
}

start() {
  local detach=false c
  [[ ${1:-} == --detach ]] && detach=true
  for c in "${CLUSTERS[@]}"; do alive "$c" && die "already running (scripts/geo-demo.sh stop first)"; done
  rm -rf "$DIR"
  mkdir -p "$DIR"
  if [[ ! -x $MAGNETAR ]]; then
    echo "geo-demo: building $MAGNETAR"
    make -C "$ROOT" build >/dev/null
  fi
  trap 'echo; stop; exit 130' INT TERM
  exec 9>"$LOCK"
  flock 9 # held until the clusters listen on their ports
  for c in "${CLUSTERS[@]}"; do start_cluster "$c"; done
  for c in "${CLUSTERS[@]}"; do wait_ready "$c"; done
  flock -u 9
  echo "geo-demo: clusters ${CLUSTERS[*]} up under $DIR"
  setup
  echo "geo-demo: namespace $NAMESPACE replicates to ${CLUSTERS[*]}"
  demo
  next_steps
  if $detach; then
    trap - INT TERM
    return 0
  fi
  echo
  echo "geo-demo: running; Ctrl-C (or scripts/geo-demo.sh stop) stops the clusters and removes their data"
  while alive east || alive west || alive central; do sleep 1; done
}

case "${1:-start}" in
  start) shift || true; start "$@" ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: geo-demo.sh [start [--detach] | stop | status]" ;;
esac
