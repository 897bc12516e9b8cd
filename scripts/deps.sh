#!/usr/bin/env bash
# scripts/deps.sh: make sure the tools the tests need are installed.
#
# `make test` and `.ci/run` both call it. The EDA shells (OpenSTA, Magic,
# netgen, Yosys, ngspice) are what test/realtools/ drives; xschem, gtkwave and
# wish are the GUI tools' Tcl shells the tests serve headless under an
# Xvfb they start (internal/zoo, toolcheck); expect runs a zoo shell. chromium runs the timeline
# report's browser tests; promtool (Debian: prometheus) checks --metrics-file. Missing tools are installed with
# apt-get when that is possible without asking (root, or passwordless sudo);
# otherwise it prints the exact command to run and fails, so that the test
# suite never passes by skipping what it could not run.
#
#   SP_DEPS_INSTALL=0 scripts/deps.sh   only check, never install
set -euo pipefail
cd "$(dirname "$0")/.."

# command  Debian package  (one per line; extend here, not elsewhere)
deps="
tclsh    tcl
expect   expect
python3  python3
chromium chromium
promtool prometheus
sta      opensta
magic    magic
netgen-lvs netgen-lvs
yosys    yosys
ngspice  ngspice
wish     tk
xschem   xschem
gtkwave  gtkwave
Xvfb     xvfb
"

# The Go toolchain go.mod asks for.
want_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go $want_go is required (go.mod): https://go.dev/dl/ (go$want_go.linux-amd64.tar.gz into /usr/local/go, then PATH=\$PATH:/usr/local/go/bin)" >&2
  exit 1
fi
have_go=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -1)" != "$want_go" ]; then
  echo "deps: Go $have_go is older than go.mod's $want_go; GOTOOLCHAIN=auto fetches it, or install go$want_go from https://go.dev/dl/" >&2
  exit 1
fi

missing=()
while read -r cmd pkg; do
  [ -n "$cmd" ] || continue
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done <<<"$deps"
[ ${#missing[@]} -eq 0 ] && exit 0

# Only what the tests run: no recommended extras (a Prometheus server brings
# node-exporter, avahi, a systemd upgrade: 167 packages instead of a few).
install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
if [ "${SP_DEPS_INSTALL:-1}" != 0 ] && command -v apt-get >/dev/null 2>&1; then
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); else sudo=(none); fi
  fi
  if [ "${sudo[0]:-}" != none ]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq || true
    "${sudo[@]}" "${install[@]}"
    exit 0
  fi
fi
echo "deps: the tests need ${missing[*]}, which are not installed. Run:" >&2
echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
exit 1
