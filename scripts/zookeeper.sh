#!/usr/bin/env bash
# Throwaway ZooKeeper servers for tests and for trying Magnetar on a cluster
# store: one server or an N-node ensemble on free loopback ports, each node
# with its own data directory under DIR.
#
#   scripts/zookeeper.sh install                      install Debian's zookeeper if missing
#   scripts/zookeeper.sh start DIR [NODES]            start NODES (default 1) servers; prints the
#                                                     metadata connection string (zk:host:port,...)
#   scripts/zookeeper.sh stop DIR                     stop every node under DIR
#   scripts/zookeeper.sh stop-node DIR I              stop node I (1-based), keep its data
#   scripts/zookeeper.sh start-node DIR I             start node I again
#   scripts/zookeeper.sh connection DIR               print the connection string again
#
# With ZK_PARENT_PID set, start also leaves a watchdog that stops the nodes
# when that process exits.
#
# Servers are configured the way Magnetar expects in production too:
# jute.maxbuffer above the 1 MiB value limit of the metadata store, 4-letter
# words enabled for health checks, the admin HTTP server off. tickTime is
# 500 ms so tests can force session expiry quickly; the session timeout
# range is still 1 s to 60 s. maxClientCnxns=0: every client of a test
# comes from 127.0.0.1, and ZooKeeper's default of 60 connections per
# address refused the 61st, which the client saw as "connect: broken
# pipe" until its deadline (TestLedgerSurvivesBookieKill9 opened 79
# sessions in a loaded make test run; a production ensemble sees each
# host's own few).
set -euo pipefail

ZK_JAR=/usr/share/java/zookeeper.jar
LOG_JAR=/usr/share/java/slf4j-simple.jar
JUTE_MAXBUFFER=$((4 * 1024 * 1024))
# The port registry and lock shared with the other test-server script.
. "$(dirname "${BASH_SOURCE[0]}")/testports.sh"

die() { echo "zookeeper.sh: $*" >&2; exit 1; }

install_zookeeper() {
  if [[ -f $ZK_JAR ]] && command -v java >/dev/null; then return 0; fi
  local sudo=""
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || die "ZooKeeper is not installed and installing it needs root: apt-get install zookeeper"
    sudo=sudo
  fi
  echo "zookeeper.sh: installing Debian's zookeeper package" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper >&2
  [[ -f $ZK_JAR ]] || die "apt-get installed zookeeper but $ZK_JAR is missing"
}

# Probes are bounded: a port owned by something that is not a ZooKeeper
# client port may accept a connection and never answer.
four_letter() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && echo $2 >&3 && cat <&3" 2>/dev/null; }

write_configs() {
  local dir=$1 nodes=$2 i
  : >"$dir/ports"
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$dir/node$i/data"
    echo "$i" >"$dir/node$i/data/myid"
    echo "$(free_port "$dir") $(free_port "$dir") $(free_port "$dir")" >"$dir/node$i/ports"
  done
  for i in $(seq 1 "$nodes"); do
    local client
    read -r client _ _ <"$dir/node$i/ports"
    cat >"$dir/node$i/zoo.cfg" <<CFG
tickTime=500
initLimit=20
syncLimit=10
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=$dir/node$i/data
clientPort=$client
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
CFG
    if ((nodes > 1)); then
      local j quorum election
      for j in $(seq 1 "$nodes"); do
        read -r _ quorum election <"$dir/node$j/ports"
        echo "server.$j=127.0.0.1:$quorum:$election" >>"$dir/node$i/zoo.cfg"
      done
    fi
  done
  echo "$nodes" >"$dir/nodes"
}

start_node() {
  local dir=$1 i=$2
  [[ -f $dir/node$i/zoo.cfg ]] || die "no node $i under $dir (run start first)"
  if [[ -f $dir/node$i/pid ]] && kill -0 "$(cat "$dir/node$i/pid")" 2>/dev/null; then return 0; fi
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Djute.maxbuffer=$JUTE_MAXBUFFER -Dzookeeper.4lw.commands.whitelist='*' \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp "$ZK_JAR:$LOG_JAR" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/node$i/zoo.cfg" \
    >>"$dir/node$i/server.log" 2>&1 </dev/null 9>&- &
  echo $! >"$dir/node$i/pid"
}

stop_node() {
  local dir=$1 i=$2 pid
  [[ -f $dir/node$i/pid ]] || return 0
  pid=$(cat "$dir/node$i/pid")
  kill -9 "$pid" 2>/dev/null || true
  # Bounded, and a zombie (nobody reaped it) counts as stopped.
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || break
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
    sleep 0.05
  done
  rm -f "$dir/node$i/pid"
}

# start_watchdog stops the nodes when process ZK_PARENT_PID (a test binary)
# exits, even if it crashed before cleaning up.
start_watchdog() {
  local dir=$1 parent=${ZK_PARENT_PID:-}
  [[ -n $parent ]] || return 0
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
    watchdog "$parent" "$0" "$dir" </dev/null >/dev/null 2>&1 9>&- &
}

# wait_serving waits until every running node answers "isro" with "rw"
# (for an ensemble: a quorum serves requests). A node whose JVM exited (a
# port taken after all, a bad config) fails the start with its log.
wait_serving() {
  local dir=$1 nodes i client
  nodes=$(cat "$dir/nodes")
  for _ in $(seq 1 300); do
    local ok=0
    for i in $(seq 1 "$nodes"); do
      [[ -f $dir/node$i/pid ]] || { ok=$((ok + 1)); continue; }
      if ! kill -0 "$(cat "$dir/node$i/pid")" 2>/dev/null; then
        tail -20 "$dir/node$i/server.log" >&2
        die "ZooKeeper node $i under $dir exited during start; log above"
      fi
      read -r client _ _ <"$dir/node$i/ports"
      if four_letter "$client" isro | grep -q rw; then
        ok=$((ok + 1))
      fi
    done
    ((ok == nodes)) && return 0
    sleep 0.1
  done
  die "ZooKeeper under $dir did not start serving in 30 s; see $dir/node*/server.log"
}

connection() {
  local dir=$1 nodes i client hosts=""
  [[ -f $dir/nodes ]] || die "no ZooKeeper under $dir"
  nodes=$(cat "$dir/nodes")
  for i in $(seq 1 "$nodes"); do
    read -r client _ _ <"$dir/node$i/ports"
    hosts+="${hosts:+,}127.0.0.1:$client"
  done
  echo "zk:$hosts"
}

cmd=${1:-}
case $cmd in
  install) install_zookeeper ;;
  start)
    dir=${2:?usage: start DIR [NODES]}; nodes=${3:-1}
    [[ $nodes =~ ^[1-9][0-9]*$ ]] || die "NODES must be a positive number, got $nodes"
    install_zookeeper
    mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
    [[ -f $dir/nodes ]] && die "$dir already holds a ZooKeeper; stop it or use another directory"
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
  start-node)
    start_node "${2:?usage: start-node DIR I}" "${3:?usage: start-node DIR I}"
    ;;
  connection) connection "${2:?usage: connection DIR}" ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
