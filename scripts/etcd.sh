#!/usr/bin/env bash
# Throwaway etcd servers for tests and for trying Magnetar on an etcd
# metadata store: one server or an N-node cluster on free loopback ports,
# each node with its own data directory under DIR.
#
#   scripts/etcd.sh install                      install Debian's etcd-server if missing
#   scripts/etcd.sh start DIR [NODES]            start NODES (default 1) servers; prints the
#                                                metadata connection string (etcd:http://...)
#   scripts/etcd.sh stop DIR                     stop every node under DIR
#   scripts/etcd.sh stop-node DIR I              stop node I (1-based) at once, keep its data
#   scripts/etcd.sh start-node DIR I             start node I again
#   scripts/etcd.sh connection DIR               print the connection string again
#
# With ETCD_PARENT_PID set, start also leaves a watchdog that stops the nodes
# when that process exits. With ETCD_TLS_DIR set (holding ca.pem,
# server.pem, server-key.pem), start serves clients over TLS and requires
# client certificates signed by ca.pem.
#
# Servers are configured the way Magnetar expects in production too:
# --max-request-bytes above the 1 MiB value limit of the metadata store plus
# its transaction, no automatic compaction (watches resume from any
# revision kept).
set -euo pipefail

MAX_REQUEST_BYTES=$((4 * 1024 * 1024))
# The port registry and lock shared with the other test-server script.
. "$(dirname "${BASH_SOURCE[0]}")/testports.sh"

die() { echo "etcd.sh: $*" >&2; exit 1; }

install_etcd() {
  if command -v etcd >/dev/null; then return 0; fi
  local sudo=""
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || die "etcd is not installed and installing it needs root: apt-get install etcd-server"
    sudo=sudo
  fi
  echo "etcd.sh: installing Debian's etcd-server package" >&2
  $sudo apt-get update -qq >&2
  # The package enables a systemd unit on port 2379; tests never use it.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server >&2
  command -v etcd >/dev/null || die "apt-get installed etcd-server but etcd is not on PATH"
}

scheme() { if [[ -f $1/tls ]]; then echo https; else echo http; fi; }

write_configs() {
  local dir=$1 nodes=$2 i cluster="" peer
  : >"$dir/ports"
  if [[ -n ${ETCD_TLS_DIR:-} ]]; then
    cp "$ETCD_TLS_DIR/ca.pem" "$ETCD_TLS_DIR/server.pem" "$ETCD_TLS_DIR/server-key.pem" "$dir/"
    touch "$dir/tls"
  fi
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$dir/node$i"
    echo "$(free_port "$dir") $(free_port "$dir")" >"$dir/node$i/ports"
    read -r _ peer <"$dir/node$i/ports"
    cluster+="${cluster:+,}node$i=http://127.0.0.1:$peer"
  done
  echo "$cluster" >"$dir/cluster"
  echo "magnetar-$$-$RANDOM" >"$dir/token"
  echo "$nodes" >"$dir/nodes"
}

start_node() {
  local dir=$1 i=$2 client peer state=new s
  [[ -f $dir/node$i/ports ]] || die "no node $i under $dir (run start first)"
  if [[ -f $dir/node$i/pid ]] && kill -0 "$(cat "$dir/node$i/pid")" 2>/dev/null; then return 0; fi
  read -r client peer <"$dir/node$i/ports"
  [[ -d $dir/node$i/data/member ]] && state=existing
  s=$(scheme "$dir")
  local tls=()
  if [[ $s == https ]]; then
    tls=(--cert-file "$dir/server.pem" --key-file "$dir/server-key.pem"
      --client-cert-auth --trusted-ca-file "$dir/ca.pem")
  fi
  ETCD_UNSUPPORTED_ARCH= etcd --name "node$i" --data-dir "$dir/node$i/data" \
    --listen-client-urls "$s://127.0.0.1:$client" --advertise-client-urls "$s://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$(cat "$dir/cluster")" --initial-cluster-state "$state" \
    --initial-cluster-token "$(cat "$dir/token")" \
    --max-request-bytes $MAX_REQUEST_BYTES --heartbeat-interval 100 --election-timeout 1000 \
    --logger zap --log-outputs stderr "${tls[@]}" \
    >>"$dir/node$i/server.log" 2>&1 </dev/null 9>&- &
  echo $! >"$dir/node$i/pid"
}

stop_node() {
  local dir=$1 i=$2 pid
  [[ -f $dir/node$i/pid ]] || return 0
  pid=$(cat "$dir/node$i/pid")
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || break
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
    sleep 0.05
  done
  rm -f "$dir/node$i/pid"
}

start_watchdog() {
  local dir=$1 parent=${ETCD_PARENT_PID:-}
  [[ -n $parent ]] || return 0
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
    watchdog "$parent" "$0" "$dir" </dev/null >/dev/null 2>&1 9>&- &
}

# healthy asks node's /health (plain HTTP only; a TLS node is checked by
# its log line instead, as bash cannot speak TLS).
healthy() {
  local dir=$1 i=$2 client
  read -r client _ <"$dir/node$i/ports"
  if [[ -f $dir/tls ]]; then
    grep -q 'serving client traffic securely' "$dir/node$i/server.log" 2>/dev/null && \
      grep -q 'became leader\|elected leader' "$dir/node$i/server.log" 2>/dev/null
    return
  fi
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$client && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && cat <&3" 2>/dev/null |
    grep -q '"health":"true"'
}

wait_serving() {
  local dir=$1 nodes i
  nodes=$(cat "$dir/nodes")
  for _ in $(seq 1 300); do
    local ok=0
    for i in $(seq 1 "$nodes"); do
      [[ -f $dir/node$i/pid ]] || { ok=$((ok + 1)); continue; }
      if ! kill -0 "$(cat "$dir/node$i/pid")" 2>/dev/null; then
        tail -20 "$dir/node$i/server.log" >&2
        die "etcd node $i under $dir exited during start; log above"
      fi
      healthy "$dir" "$i" && ok=$((ok + 1))
    done
    ((ok == nodes)) && return 0
    sleep 0.1
  done
  die "etcd under $dir did not start serving in 30 s; see $dir/node*/server.log"
}

connection() {
  local dir=$1 nodes i client hosts="" s
  [[ -f $dir/nodes ]] || die "no etcd under $dir"
  nodes=$(cat "$dir/nodes")
  s=$(scheme "$dir")
  for i in $(seq 1 "$nodes"); do
    read -r client _ <"$dir/node$i/ports"
    hosts+="${hosts:+,}$s://127.0.0.1:$client"
  done
  echo "etcd:$hosts"
}

cmd=${1:-}
case $cmd in
  install) install_etcd ;;
  start)
    dir=${2:?usage: start DIR [NODES]}; nodes=${3:-1}
    [[ $nodes =~ ^[1-9][0-9]*$ ]] || die "NODES must be a positive number, got $nodes"
    install_etcd
    mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
    [[ -f $dir/nodes ]] && die "$dir already holds an etcd; stop it or use another directory"
    exec 9>"$LOCK"
    flock 9
    write_configs "$dir" "$nodes"
    for i in $(seq 1 "$nodes"); do start_node "$dir" "$i"; done
    start_watchdog "$dir"
    wait_serving "$dir"
    flock -u 9
    connection "$dir"
    ;;
  stop)
    dir=${2:?usage: stop DIR}
    [[ -f $dir/nodes ]] || exit 0
    for i in $(seq 1 "$(cat "$dir/nodes")"); do stop_node "$dir" "$i"; done
    release_ports "$(cd "$dir" && pwd)"
    ;;
  stop-node) stop_node "${2:?usage: stop-node DIR I}" "${3:?usage: stop-node DIR I}" ;;
  start-node) start_node "${2:?usage: start-node DIR I}" "${3:?usage: start-node DIR I}" ;;
  connection) connection "${2:?usage: connection DIR}" ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
