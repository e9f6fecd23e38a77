#!/usr/bin/env bash
# Prometheus for Magnetar's alerting rules and dashboards: installs Debian's
# prometheus package (prometheus and promtool), checks conf/prometheus, and
# runs a throwaway server that scrapes a standalone with the rules loaded.
#
#   scripts/prometheus.sh install              install Debian's prometheus if prometheus or promtool is missing
#   scripts/prometheus.sh check                promtool check rules, test rules (alerts_test.yml) and
#                                              check config on conf/prometheus
#   scripts/prometheus.sh start DIR [TARGET]   start a Prometheus with its data under DIR, on a free
#                                              loopback port, scraping TARGET (a standalone's web port,
#                                              default 127.0.0.1:8080, as make standalone serves it)
#                                              every 5 s with conf/prometheus/alerts.yml; prints its URL
#   scripts/prometheus.sh stop DIR             stop it
#
# The package comes without its recommends (node exporter, alertmanager):
# the tests need the two binaries only. Where systemd runs, the package
# also enables its own service on port 9090; start never uses that port.
# tools/promcheck starts its own server against a whole cluster.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONF="$ROOT/conf/prometheus"
# The port registry and lock shared with the other test-server scripts.
. "$ROOT/scripts/testports.sh"

die() { echo "prometheus.sh: $*" >&2; exit 1; }

installed() { command -v prometheus >/dev/null && command -v promtool >/dev/null; }

install_prometheus() {
  if installed; then return 0; fi
  local sudo=""
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || die "Prometheus is not installed and installing it needs root: apt-get install prometheus"
    sudo=sudo
  fi
  echo "prometheus.sh: installing Debian's prometheus package" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >&2
  installed || die "apt-get installed prometheus but prometheus or promtool is not on PATH"
}

check() {
  install_prometheus
  cd "$CONF"
  promtool check rules alerts.yml
  promtool test rules alerts_test.yml
  promtool check config prometheus.yml
}

start() {
  local dir=$1 target=$2 port
  install_prometheus
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  if [[ -f $dir/pid ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    die "a Prometheus already runs under $dir; stop it or use another directory"
  fi
  exec 9>"$LOCK"
  flock 9
  : >"$dir/ports"
  port=$(free_port "$dir")
  # The job of conf/prometheus/prometheus.yml that standalone belongs to.
  cat >"$dir/prometheus.yml" <<CFG
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - $CONF/alerts.yml
scrape_configs:
  - job_name: magnetar-broker
    honor_labels: true
    static_configs:
      - targets: ["$target"]
        labels:
          cluster: standalone
CFG
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" >>"$dir/server.log" 2>&1 </dev/null 9>&- &
  echo $! >"$dir/pid"
  # Bounded: a server that exits (a bad flag, the port taken after all)
  # fails the start with its log.
  for _ in $(seq 1 300); do
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      tail -20 "$dir/server.log" >&2
      die "Prometheus under $dir exited during start; log above"
    fi
    if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET /-/ready HTTP/1.0\r\n\r\n' >&3 && cat <&3" 2>/dev/null |
      head -1 | grep -q ' 200 '; then
      flock -u 9
      echo "http://127.0.0.1:$port"
      return 0
    fi
    sleep 0.1
  done
  die "Prometheus under $dir not ready in 30 s; see $dir/server.log"
}

stop() {
  local dir=$1 pid
  [[ -f $dir/pid ]] || return 0
  pid=$(cat "$dir/pid")
  kill "$pid" 2>/dev/null || true
  # Bounded: it flushes its head block, then SIGKILL.
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/pid"
  release_ports "$(cd "$dir" && pwd)"
}

cmd=${1:-}
case $cmd in
  install) install_prometheus ;;
  check) check ;;
  start) start "${2:?usage: start DIR [TARGET]}" "${3:-127.0.0.1:8080}" ;;
  stop) stop "${2:?usage: stop DIR}" ;;
  *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
