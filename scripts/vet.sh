#!/usr/bin/env bash
# scripts/vet.sh: the lint gate (make vet; .ci/run runs it through make
# test). Each check runs under every build configuration the tree has (the
# default, the lean master's -tags lean, the failpoint build's
# -tags sp_failpoints), and any finding fails it:
#   - goimports -l: formatting and import blocks (gofmt and more);
#   - go vet;
#   - staticcheck's default checks, unused code (U1000) among them; one run
#     over the three configurations, so code used under one is not unused;
#   - deadcode -test: functions that no program, test or benchmark reaches.
#     Examples without an Output comment are compiled but never run, so
#     they are the one kind of unreachable function it lets through.
# The tools' versions are pinned in go.mod's tool block (go tool NAME).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
GO=${GO:-go}
tags=("" lean sp_failpoints)
fail=0
finding() { # name, its findings (one a line)
  if [ -n "$2" ]; then
    echo "vet: $1:" >&2
    echo "$2" >&2
    fail=1
  fi
}

# The tools' modules first, quietly: a first "go tool" run on a fresh
# module cache prints "go: downloading ..." lines, which would read as
# findings below.
$GO mod download
finding "goimports -l (run: go tool goimports -w FILE)" "$($GO tool goimports -l $(git ls-files '*.go'))"
for t in "${tags[@]}"; do
  $GO vet ${t:+-tags "$t"} ./... || fail=1
done
matrix=""
for t in "${tags[@]}"; do
  matrix+="${t:-default}: ${t:+-tags=$t}"$'\n'
done
out=$(printf '%s' "$matrix" | $GO tool staticcheck -matrix ./... 2>&1) || true
finding "staticcheck" "$out"
for t in "${tags[@]}"; do
  out=$($GO tool deadcode -test ${t:+-tags "$t"} ./... 2>&1 | grep -v ': unreachable func: Example' || true)
  finding "deadcode${t:+ -tags $t}" "$out"
done
exit $fail
