#!/usr/bin/env bash
# Headless Chromium for the web console's browser tests
# (cmd/magnetar/console_browser_test.go), from Debian's chromium package.
#
#   scripts/chromium.sh install    install Debian's chromium if /usr/bin/chromium is missing
set -euo pipefail

CHROMIUM=/usr/bin/chromium

die() { echo "chromium.sh: $*" >&2; exit 1; }

install_chromium() {
  if [[ -x $CHROMIUM ]]; then return 0; fi
  local sudo=""
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || die "Chromium is not installed and installing it needs root: apt-get install chromium"
    sudo=sudo
  fi
  echo "chromium.sh: installing Debian's chromium package" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
  [[ -x $CHROMIUM ]] || die "apt-get installed chromium but $CHROMIUM is missing"
}

case "${1:-}" in
  install) install_chromium ;;
  *) die "usage: $0 install" ;;
esac
