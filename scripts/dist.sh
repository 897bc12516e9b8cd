#!/usr/bin/env bash
# scripts/dist.sh: build dist/skillpilot-<version>-linux-<arch>.tar.gz, what
# an air-gapped farm needs: static binaries (CGO_ENABLED=0, no libc
# dependency), the Python and Tcl masters, the documents.
#
#   scripts/dist.sh                      the tarball (make dist), in $DIST_DIR
#                                        (default dist/)
#   scripts/dist.sh --copy-masters DIR   only copy the masters into DIR/python
#                                        and DIR/tcl (make install)
set -euo pipefail
cd "$(dirname "$0")/.."

copy_masters() { # DIR: the masters' files tracked by git (or all but caches)
  local dst
  mkdir -p "$1" && dst=$(cd "$1" && pwd)
  for lang in python tcl; do
    mkdir -p "$dst/$lang"
    (cd "clients/$lang" && find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*_test.*' ! -path './tests/*' -print0 |
      xargs -0 -I{} install -D -m 0644 {} "$dst/$lang/{}")
  done
}

if [ "${1:-}" = --copy-masters ]; then
  copy_masters "$2"
  exit 0
fi

version=$(scripts/version.sh)
arch=$(go env GOARCH)
name=skillpilot-$version-linux-$arch
dist=${DIST_DIR:-dist}
mkdir -p "$dist" && dist=$(cd "$dist" && pwd)
out=$dist/$name
rm -rf "$out" && mkdir -p "$out/bin" "$out/doc"
ldflags="-s -w -X github.com/skillpilot/skillpilot/internal/version.Version=$version"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/bin/" ./cmd/runner ./cmd/master-history ./cmd/master-mcp
# The lean master: report, standin and diff run master-history (Makefile, build).
CGO_ENABLED=0 go build -trimpath -tags lean -ldflags "$ldflags" -o "$out/bin/" ./cmd/master
copy_masters "$out"
cp README.md PROTOCOL.md BENCHMARKS.md CHANGELOG.md ARCHITECTURE.md CONTRIBUTING.md "$out/doc/"
cp -r docs "$out/doc/docs"                  # beside README.md, so that its links work
mkdir -p "$out/man/man1" && cp docs/man/*.1 "$out/man/man1/"
cat >"$out/INSTALL" <<TXT
SkillPilot $version (linux/$arch)

bin/runner, bin/master, bin/master-history, bin/master-mcp
                        static binaries: copy them anywhere on PATH, master-history and master-mcp beside master (no libc needed)
python/                 the Python master (standard library only): see doc/README.md
tcl/                    the Tcl master (Tcl 8.6, no packages): see doc/README.md
doc/                    README.md (start here), docs/ (the guides and the reference), PROTOCOL.md (the file protocol),
                        ARCHITECTURE.md, CONTRIBUTING.md, BENCHMARKS.md, CHANGELOG.md
man/man1/               runner.1, master.1: MANPATH=$PWD/man man master
TXT
tar -C "$dist" -czf "$dist/$name.tar.gz" "$name"
rm -rf "$out"
echo "$dist/$name.tar.gz"
