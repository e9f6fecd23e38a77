#!/usr/bin/env bash
# Builds the release tarball: the static binary, conf/ (Pulsar- and
# BookKeeper-format configuration files, the systemd units, the Grafana
# dashboards and the Prometheus rules) and the docs, under magnetar-VERSION/. Usage: dist.sh BINARY VERSION OUTDIR
set -euo pipefail
bin=${1:?binary}; version=${2:?version}; out=${3:?output directory}
root=$(cd "$(dirname "$0")/.." && pwd)
name="magnetar-${version}-linux-$(go env GOARCH 2>/dev/null || uname -m)"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dir="$stage/magnetar-${version}"
mkdir -p "$dir/bin" "$dir/conf/systemd" "$dir/conf/grafana" "$dir/conf/prometheus" "$dir/docs"
install -m 0755 "$bin" "$dir/bin/magnetar"
install -m 0644 "$root"/conf/*.conf "$dir/conf/"
install -m 0644 "$root"/conf/systemd/*.service "$dir/conf/systemd/"
install -m 0644 "$root"/conf/grafana/*.json "$dir/conf/grafana/"
install -m 0644 "$root"/conf/prometheus/*.yml "$dir/conf/prometheus/"
install -m 0644 "$root/README.md" "$root/TUNING.md" "$dir/"
find "$root/docs" \( -name '*.md' -o -name '*.png' \) | while read -r f; do
  rel=${f#"$root/docs/"}
  mkdir -p "$dir/docs/$(dirname "$rel")"
  install -m 0644 "$f" "$dir/docs/$rel"
done
echo "$version" > "$dir/VERSION"
mkdir -p "$out"
tar -C "$stage" --owner=0 --group=0 -czf "$out/$name.tar.gz" "magnetar-${version}"
echo "$out/$name.tar.gz"
