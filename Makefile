# SkillPilot. `make demo` shows the idea; `make test` is what CI runs.
GO      ?= go
BIN     := bin
TIMEOUT ?= 20m
# Test binaries run at once: at least 4, whatever the CPU count. Most
# tests wait on a real tool, a PTY or a timer: with go test's default (one
# per CPU) a 2-CPU machine kept 1.1 of its cores busy and a warm-cache race
# run took 555 s; with 4 it kept 1.6 busy and took 386-434 s. From a cold
# cache (CI) the gain is smaller, make test 769 -> 736 s, as the compiles
# then compete with the running tests (docs/benchmarks-log.md, "Issue 44,
# fourth pass").
PKGPAR ?= $(shell n=$$(nproc 2>/dev/null || echo 4); [ "$$n" -gt 4 ] && echo $$n || echo 4)
# A binary built with -race sleeps 1 s before it exits (the race runtime's
# atexit_sleep_ms), and the tests start race-built masters and runners by
# the thousand: the CLI scripts and the CLI master's conformance scenarios
# spent most of their time in that sleep. Races found before the exit are
# reported all the same.
export GORACE ?= atexit_sleep_ms=0
# Everything built without the race detector is built with CGO_ENABLED=0,
# the flavour make build ships (the module has no cgo): vet, test-short,
# the benchmarks, the binaries the tests start (internal/testenv) and the
# NFS suite share one compilation of the standard library and the module
# instead of compiling it once per flavour on a fresh machine.
NOCGO   := CGO_ENABLED=0

.PHONY: all build demo deps docs test test-short vet fmt-check tidy-check fuzz bench bench-smoke test-nfs test-slurm test-sge clean install dist

all: build

# Static binaries (no cgo): nothing to load at exec, which is most of a
# short `master` call's start-up (docs/benchmarks-log.md, "The master's side").
# The version the binaries print (--version): git describe of this tree,
# the same name make dist gives its tarball.
VERSION ?= $(shell ./scripts/version.sh)
LDFLAGS := -X github.com/skillpilot/skillpilot/internal/version.Version=$(VERSION)
# The master is built lean (-tags lean): report, standin and diff run the
# master-history binary beside it, so that every other command starts
# without initialising what they need (issue 44; BENCHMARKS.md).
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/runner ./cmd/master-history ./cmd/master-mcp
	CGO_ENABLED=0 $(GO) build -tags lean -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/master

demo: build
	BIN=$(abspath $(BIN)) ./scripts/demo.sh

# What the tests need (tclsh, expect, python3): installed when missing if
# that needs no password, else the exact command to run (scripts/deps.sh).
deps:
	@./scripts/deps.sh

# The generated documents: the reference pages and man pages of runner and
# master (docs/reference/, docs/man/) from the commands' own tables
# (internal/refdoc), and docs/mcp.md's tool reference from the MCP tools'
# Go types. The same tests without SP_UPDATE_DOCS fail when a checked-in
# file differs from what the code produces.
docs:
	SP_UPDATE_DOCS=1 $(NOCGO) $(GO) test -count=1 -run '^TestDocs' ./internal/refdoc ./mcpserver

# go vet, then every test with the race detector (real tclsh on real PTYs).
test: deps vet
	GOTRACEBACK=all $(GO) test -race -p $(PKGPAR) -timeout $(TIMEOUT) ./...

test-short: vet
	$(NOCGO) $(GO) test -short -p $(PKGPAR) -timeout $(TIMEOUT) ./...

# The lint gate: goimports' formatting, go vet, staticcheck and deadcode
# under each build tag, pinned in go.mod's tool block (scripts/vet.sh).
vet:
	GO=$(GO) ./scripts/vet.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

FUZZTIME ?= 30s
fuzz:
	$(NOCGO) $(GO) test -run '^$$' -fuzz '^FuzzParseCommand$$' -fuzztime $(FUZZTIME) ./protocol
	$(NOCGO) $(GO) test -run '^$$' -fuzz '^FuzzParseCommandName$$' -fuzztime $(FUZZTIME) ./protocol
	$(NOCGO) $(GO) test -run '^$$' -fuzz '^FuzzParseControlRequest$$' -fuzztime $(FUZZTIME) ./protocol
	$(NOCGO) $(GO) test -run '^$$' -fuzz '^FuzzParseCancel$$' -fuzztime $(FUZZTIME) ./protocol
	$(NOCGO) $(GO) test -run '^$$' -fuzz '^FuzzFramer$$' -fuzztime $(FUZZTIME) ./runner
	$(NOCGO) $(GO) test -run '^$$' -fuzz '^FuzzPromptFilter$$' -fuzztime $(FUZZTIME) ./runner
	$(NOCGO) $(GO) test -run '^$$' -fuzz '^FuzzParseEvents$$' -fuzztime $(FUZZTIME) ./review

# The full benchmark suite; figures go to BENCHMARKS.md (current) and
# docs/benchmarks-log.md (the dated log) by hand.
BENCHTIME ?= 1x
bench:
	$(NOCGO) $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m ./test/bench/ | tee .bench.out

# CI runs every benchmark once so they cannot rot.
bench-smoke:
	SP_BENCH_SMOKE=1 $(NOCGO) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./test/bench/

test-nfs:
	./test/nfs/run-nfs-tests.sh

# Launch, stop escalation and pools against a real single-node Slurm
# (root; installs slurm-wlm and munge when missing). See docs/farms.md and CONTRIBUTING.md.
test-slurm:
	./scripts/test-slurm.sh

# The same against a real single-node Grid Engine (root; installs gridengine when missing).
test-sge:
	./scripts/test-sge.sh

# make install PREFIX=/opt/skillpilot [DESTDIR=...]: the binaries into
# $(PREFIX)/bin, the Python and Tcl masters into $(PREFIX)/share/skillpilot,
# the documents into $(PREFIX)/share/doc/skillpilot (docs/ as its docs/, so
# README's links work there), the man pages into $(PREFIX)/share/man/man1.
PREFIX  ?= /usr/local
DESTDIR ?=
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/skillpilot $(DESTDIR)$(PREFIX)/share/doc/skillpilot
	install -m 0755 $(BIN)/runner $(BIN)/master $(BIN)/master-history $(BIN)/master-mcp $(DESTDIR)$(PREFIX)/bin/
	./scripts/dist.sh --copy-masters $(DESTDIR)$(PREFIX)/share/skillpilot
	install -m 0644 README.md PROTOCOL.md BENCHMARKS.md CHANGELOG.md ARCHITECTURE.md CONTRIBUTING.md $(DESTDIR)$(PREFIX)/share/doc/skillpilot/
	cd docs && find . -type f | while read -r f; do install -D -m 0644 "$$f" "$(abspath $(DESTDIR)$(PREFIX))/share/doc/skillpilot/docs/$$f"; done
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 docs/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/

# make dist: dist/skillpilot-<version>-linux-<arch>.tar.gz for an air-gapped
# farm: static binaries, the Python and Tcl masters, the documents.
dist:
	./scripts/dist.sh

clean:
	rm -rf $(BIN) .bench.out dist
