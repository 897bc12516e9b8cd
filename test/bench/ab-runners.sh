#!/bin/bash
# test/bench/ab-runners.sh ROUNDS NAME=RUNNER_BIN...: the runner binaries A/B, alternating
# rounds, each side alone (5 s idle before each), RoundTripAlone and ThroughputAlone
# (BENCHMARKS.md). Build each side with CGO_ENABLED=0 go build -o BIN ./cmd/runner.
cd "$(dirname "$0")/../.." && mkdir -p /tmp/abbin
go test -c -o /tmp/abbin/bench.test ./test/bench/ || exit 1
rounds=$1; shift
for r in $(seq "$rounds"); do
  for side in "$@"; do
    name=${side%%=*} bin=${side#*=}
    sleep 5
    echo "== round $r $name"
    (cd test/bench && SP_BENCH_RUNNER_BIN=$bin /tmp/abbin/bench.test -test.run '^$' -test.bench 'RoundTripAlone|ThroughputAlone' -test.benchtime 1x 2>&1 | grep -E "^Benchmark")
  done
done
