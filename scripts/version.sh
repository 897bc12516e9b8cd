#!/bin/sh
# scripts/version.sh: the version a build of this tree carries (--version,
# make dist's tarball name): git describe, or "dev" outside a git checkout.
cd "$(dirname "$0")/.." && git describe --tags --always --dirty 2>/dev/null || echo dev
