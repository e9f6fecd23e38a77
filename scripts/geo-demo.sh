#!/usr/bin/env bash
# Three local clusters of one instance replicating to each other, to try
# geo-replication and replicated subscriptions (docs/geo-replication.md) on
# one machine, set up the way Pulsar's docs set up an instance.
#
#   scripts/geo-demo.sh [start]          start clusters east, west and central, set up a
#                                        replicated namespace, run a short demo, print what
#                                        to try next, then wait: Ctrl-C stops and cleans up
#   scripts/geo-demo.sh start --detach   the same, but leave the clusters running
#   scripts/geo-demo.sh stop             stop them and remove their data
#   scripts/geo-demo.sh status           the clusters' URLs and whether they run
#
# One ZooKeeper (scripts/zookeeper.sh) holds the instance's configuration
# store (chroot /config) and each cluster's own metadata store (chroot
# /<cluster>). Each cluster is joined to the instance by
# `magnetar initialize-cluster-metadata` alone and runs a bookie and a
# broker of its own; the tenant and namespace are created once, in the
# shared configuration store. Everything listens on free loopback ports.
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

# Each cluster runs two processes, named <cluster>/bookie and <cluster>/broker.
pid_of() { cat "$DIR/$1.pid" 2>/dev/null || true; }
alive() { local p; p=$(pid_of "$1"); [[ -n $p ]] && kill -0 "$p" 2>/dev/null; }
cluster_alive() { alive "$1/broker" || alive "$1/bookie"; }
broker_port() { sed -n 1p "$DIR/$1/ports"; }
web_port() { sed -n 2p "$DIR/$1/ports"; }
admin() { local c=$1; shift; "$MAGNETAR" admin --admin-url "http://127.0.0.1:$(web_port "$c")" "$@"; }
zk() { cat "$DIR/zk.connection"; }

start_zookeeper() {
  "$ROOT/scripts/zookeeper.sh" install >/dev/null
  "$ROOT/scripts/zookeeper.sh" start "$DIR/zk" >"$DIR/zk.connection"
}

# start_cluster joins cluster $1 to the instance and starts its bookie and
# broker.
start_cluster() {
  local c=$1 bp wp bkp bkh
  mkdir -p "$DIR/$c"
  : >"$DIR/$c/ports"
  bp=$(free_port "$DIR/$c")
  wp=$(free_port "$DIR/$c")
  bkp=$(free_port "$DIR/$c")
  bkh=$(free_port "$DIR/$c")
  "$MAGNETAR" initialize-cluster-metadata --cluster "$c" --metadata-store "$(zk)/$c" \
    --configuration-metadata-store "$(zk)/config" --web-service-url "http://127.0.0.1:$wp" \
    --broker-service-url "pulsar://127.0.0.1:$bp" >"$DIR/$c/init.log" 2>&1 ||
    { cat "$DIR/$c/init.log" >&2; die "initialize-cluster-metadata --cluster $c failed"; }
  printf 'metadataServiceUri=%s/%s\n' "$(zk)" "$c" >"$DIR/$c/bk_server.conf"
  # setsid: Ctrl-C reaches this script only, which stops the clusters in order.
  setsid "$MAGNETAR" bookie --config "$DIR/$c/bk_server.conf" --journal-dirs "$DIR/$c/journal" \
    --ledger-dirs "$DIR/$c/ledgers" --bind-address 127.0.0.1 --advertised-address 127.0.0.1 \
    --bookie-port "$bkp" --http-port "$bkh" >"$DIR/$c/bookie.log" 2>&1 </dev/null &
  echo $! >"$DIR/$c/bookie.pid"
  printf 'clusterName=%s\nbrokerDeduplicationEnabled=true\nmanagedLedgerDefaultEnsembleSize=1\nmanagedLedgerDefaultWriteQuorum=1\nmanagedLedgerDefaultAckQuorum=1\n' \
    "$c" >"$DIR/$c/broker.conf"
  setsid "$MAGNETAR" broker --config "$DIR/$c/broker.conf" --metadata-store "$(zk)/$c" \
    --configuration-metadata-store "$(zk)/config" --bind-address 127.0.0.1 --advertised-address 127.0.0.1 \
    --broker-port "$bp" --web-port "$wp" >"$DIR/$c/broker.log" 2>&1 </dev/null &
  echo $! >"$DIR/$c/broker.pid"
}

wait_ready() {
  local c=$1 p
  for p in bookie broker; do
    for _ in $(seq 1 600); do
      grep -q "magnetar $p.* ready" "$DIR/$c/$p.log" 2>/dev/null && break
      alive "$c/$p" || { tail -20 "$DIR/$c/$p.log" >&2; die "$p of cluster $c exited (log: $DIR/$c/$p.log)"; }
      sleep 0.1
    done
    grep -q "magnetar $p.* ready" "$DIR/$c/$p.log" || die "$p of cluster $c not ready after 60 s (log: $DIR/$c/$p.log)"
  done
}

# setup creates the replicated tenant and namespace once: the
# configuration store is the instance's, so every cluster sees them.
setup() {
  local list
  list=$(IFS=,; echo "${CLUSTERS[*]}")
  admin east tenants create "$TENANT" --allowed-clusters "$list" >/dev/null
  admin east namespaces create "$NAMESPACE" --clusters "$list" >/dev/null
  echo "geo-demo: clusters seen from central: $(admin central clusters list | tr '\n' ' ')"
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
    printf '   %-8s pulsar://127.0.0.1:%s   http://127.0.0.1:%s   (logs %s/{broker,bookie}.log)\n' "$c" "$(broker_port "$c")" "$(web_port "$c")" "$DIR/$c"
  done
  cat <<EOF

== try next
   produce in central, consume in east:
     $MAGNETAR perf consume --service-url pulsar://127.0.0.1:$(broker_port east) --topic $TOPIC --subscription mine &
     $MAGNETAR perf produce --service-url pulsar://127.0.0.1:$(broker_port central) --topic $TOPIC --rate 100 --num-messages 500
   replication stats and backlog of a cluster:
     $MAGNETAR admin --admin-url http://127.0.0.1:$(web_port east) topics stats $TOPIC
   an outage: stop west's broker (kill $(pid_of west/broker)), produce in east, watch replicationBacklog
   grow in east's stats; west cannot restart by this script: 'geo-demo.sh stop' and start again.
   replicated subscriptions: consume part of the topic in east with the Go client's
   ConsumerOptions{SubscriptionName: "group", ReplicateSubscriptionState: true}, then open the same
   subscription in west: it resumes close to where east stopped (docs/geo-replication.md).
   stop everything: scripts/geo-demo.sh stop
EOF
}

stop() {
  local c p
  for c in "${CLUSTERS[@]}"; do
    for p in broker bookie; do
      [[ -n $(pid_of "$c/$p") ]] && kill "$(pid_of "$c/$p")" 2>/dev/null || true
    done
  done
  for c in "${CLUSTERS[@]}"; do
    for p in broker bookie; do
      local pid
      pid=$(pid_of "$c/$p")
      [[ -z $pid ]] && continue
      for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    done
  done
  # Before release_ports, which takes the port lock until this script
  # exits: zookeeper.sh stop takes it too.
  [[ -d $DIR/zk ]] && "$ROOT/scripts/zookeeper.sh" stop "$DIR/zk" >/dev/null 2>&1 || true
  for c in "${CLUSTERS[@]}"; do
    [[ -d $DIR/$c ]] && release_ports "$DIR/$c"
  done
  rm -rf "$DIR"
  echo "geo-demo: stopped; $DIR removed"
}

status() {
  local c
  [[ -d $DIR ]] || { echo "geo-demo: not running"; return 0; }
  for c in "${CLUSTERS[@]}"; do
    local state=stopped
    cluster_alive "$c" && state=running
    printf '%-8s %-8s pulsar://127.0.0.1:%s http://127.0.0.1:%s\n' "$c" "$state" "$(broker_port "$c")" "$(web_port "$c")"
  done
}

start() {
  local detach=false c
  [[ ${1:-} == --detach ]] && detach=true
  for c in "${CLUSTERS[@]}"; do cluster_alive "$c" && die "already running (scripts/geo-demo.sh stop first)"; done
  rm -rf "$DIR"
  mkdir -p "$DIR"
  if [[ ! -x $MAGNETAR ]]; then
    echo "geo-demo: building $MAGNETAR"
    make -C "$ROOT" build >/dev/null
  fi
  trap 'echo; stop; exit 130' INT TERM
  start_zookeeper
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
  while cluster_alive east || cluster_alive west || cluster_alive central; do sleep 1; done
}

case "${1:-start}" in
  start) shift || true; start "$@" ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: geo-demo.sh [start [--detach] | stop | status]" ;;
esac
