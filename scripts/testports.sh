# Sourced by zookeeper.sh and etcd.sh: one registry of the loopback ports
# handed to the test servers they start, so that neither ever takes a port
# the other gave out. A port stays registered to its directory from start
# to stop, so a node a test has stopped for a while finds its ports free
# when it restarts. Ports come from below Linux's ephemeral range
# (32768-60999), so outgoing connections never take them; starts are
# serialised by LOCK, held until the nodes listen.

LOCK="${TMPDIR:-/tmp}/magnetar-test-ports.lock"
REGISTRY="${TMPDIR:-/tmp}/magnetar-test-ports"

port_in_use() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# free_port DIR prints a port nothing listens on and no running directory
# was given, and registers it to DIR (the caller holds LOCK).
free_port() {
  local dir=$1 p
  for _ in $(seq 1 500); do
    p=$((20000 + RANDOM % 12000))
    if ! grep -q "^$p " "$REGISTRY" 2>/dev/null && ! port_in_use "$p"; then
      echo "$p" >>"$dir/ports"
      echo "$p $dir" >>"$REGISTRY"
      echo "$p"
      return 0
    fi
  done
  die "no free loopback port found"
}

# release_ports DIR forgets DIR's ports (taking LOCK on fd 9).
release_ports() {
  local dir=$1
  exec 9>"$LOCK"
  flock 9
  if [[ -f $REGISTRY ]]; then
    grep -v " $dir\$" "$REGISTRY" >"$REGISTRY.tmp" || true
    mv "$REGISTRY.tmp" "$REGISTRY"
  fi
}
