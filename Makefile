# SkillPilot. `make demo` shows the idea; `make test` is what CI runs.
GO      ?= go
BIN     := bin
TIMEOUT ?= 20m

.PHONY: all build demo test test-short vet fmt-check tidy-check fuzz bench bench-smoke test-nfs test-slurm test-sge clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/runner ./cmd/master

demo: build
	BIN=$(CURDIR)/$(BIN) ./scripts/demo.sh

# go vet, then every test with the race detector (real tclsh on real PTYs).
test: vet
	GOTRACEBACK=all $(GO) test -race -timeout $(TIMEOUT) ./...

test-short: vet
	$(GO) test -short -timeout $(TIMEOUT) ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseCommand$$' -fuzztime $(FUZZTIME) ./protocol
	$(GO) test -run '^$$' -fuzz '^FuzzParseCommandName$$' -fuzztime $(FUZZTIME) ./protocol
	$(GO) test -run '^$$' -fuzz '^FuzzFramer$$' -fuzztime $(FUZZTIME) ./runner
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvents$$' -fuzztime $(FUZZTIME) ./history

# The full benchmark suite; figures and ratios go to BENCHMARKS.md by hand.
BENCHTIME ?= 1x
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m ./bench/ | tee .bench.out

# CI runs every benchmark once so they cannot rot.
bench-smoke:
	SP_BENCH_SMOKE=1 $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./bench/

test-nfs:
	./nfs/run-nfs-tests.sh

# Launch, stop escalation and pools against a real single-node Slurm
# (root; installs slurm-wlm and munge when missing). See README, "Scale out".
test-slurm:
	./scripts/test-slurm.sh

# The same against a real single-node Grid Engine (root; installs gridengine when missing).
test-sge:
	./scripts/test-sge.sh

clean:
	rm -rf $(BIN) .bench.out
