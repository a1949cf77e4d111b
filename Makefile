# gatebridge — see README.md. `make build` then `make test`.
GO      ?= go
BIN     ?= bin/gatebridge
PREFIX  ?= /usr/local
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Short fuzz runs inside `make test`; `make fuzz` runs longer.
FUZZTIME ?= 5s
FUZZLONG ?= 2m
FUZZ_TARGETS := ./wrappers:FuzzScript ./gates:FuzzParseArgs ./gates:FuzzCommandPolicy ./bridge:FuzzReadCall ./bridge/mailbox:FuzzDecodeArgv

.PHONY: all build install test unit test-clients fuzz-short fuzz lint test-image bench example clean

all: build

# Static (no cgo): the same binary runs as `gatebridge agent` inside any
# Linux image (persistent docker sandboxes mount it read-only).
build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gatebridge

install:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(DESTDIR)$(PREFIX)/bin/gatebridge ./cmd/gatebridge

# A real example: build, then let a sandboxed bash read, search and submit.
# SANDBOX=auto (the default) uses Docker or bubblewrap; on a machine with
# neither, the example says why, and runs with --sandbox local
# (UNSANDBOXED: the example's own command is trusted). Any other failure
# of the probe is shown as is. `gatebridge run` itself never falls back
# like this. Choose explicitly with `make example SANDBOX=bwrap|docker|local`.
SANDBOX ?= auto
example: build
	@sb=$(SANDBOX); \
	if [ "$$sb" = auto ]; then \
		err=$$($(BIN) run --sandbox auto -- true 2>&1 >/dev/null); \
		case "$$err" in *"no sandbox is usable"*) \
			echo "$$err" | sed 's/^/make example: /' >&2; \
			echo "make example: running this trusted example with --sandbox local (UNSANDBOXED); make example SANDBOX=... to choose" >&2; \
			sb=local;; \
		esac; \
	fi; \
	echo "make example: $(BIN) run --sandbox $$sb -- bash -c ..." >&2; \
	$(BIN) run --sandbox $$sb -- bash -c 'read_file README.md | head -3; search "func main" | wc -l; submit "done: $$(list_dir | wc -l) entries"'

# Every test: lint, unit and integration tests (race detector on), and
# short fuzz runs. Docker tests need the engine and the test image (built
# here when the engine answers); CI sets GATEBRIDGE_REQUIRE_BACKENDS so a
# skipped backend test fails there.
test: lint test-deploy test-image-if-engine unit test-clients fuzz-short

unit: build
	$(GO) test -race -count=1 -timeout 20m ./...

# The Kubernetes manifests (deploy/k8s, a Go module of its own): decoded
# strictly into the Kubernetes API types, their security properties
# checked. Not run on a cluster.
.PHONY: test-deploy
test-deploy:
	cd deploy/k8s && $(GO) vet ./... && $(GO) test -count=1 ./...

# The Python client (clients/python, standard library only) against the
# built binary, with the system python3; then its example agent loop once;
# and the scripts' own tests (internal/bench/benchcmp.py).
test-clients: build
	GATEBRIDGE_BIN=$(abspath $(BIN)) python3 -m unittest discover -s clients/python -v
	GATEBRIDGE_BIN=$(abspath $(BIN)) python3 examples/agent_loop.py
	python3 -m unittest discover -s internal/bench -p '*_test.py'

# Go before 1.27 can fail a fuzz run with a bare "context deadline
# exceeded" as -fuzztime ends on a loaded machine (golang/go#75804): no
# input failed and none is written. Such a run is repeated once; a run
# that wrote a failing input, or failed any other way, fails at once.
fuzz-short:
	@set -e; log=$$(mktemp); trap 'rm -f $$log' EXIT; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		if grep -q "func $$fn(" $$pkg/*_test.go 2>/dev/null; then \
			echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
			if ! $(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg > $$log 2>&1; then \
				cat $$log; \
				if grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
					echo "fuzz $$pkg $$fn: the fuzz engine's deadline flake (golang/go#75804, no failing input): once more"; \
					$(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg; \
				else exit 1; fi; \
			else cat $$log; fi; \
		fi; \
	done

fuzz:
	$(MAKE) fuzz-short FUZZTIME=$(FUZZLONG)

# The library and CLI must also build (and vet) for macOS, where many
# runtime authors develop, and for arm64 Linux.
CROSS := darwin/arm64 linux/arm64

lint:
	$(GO) vet ./...
	@set -e; for t in $(CROSS); do echo "vet $$t"; GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet ./...; done
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Builds gatebridge-test:latest from the host's busybox-static and
# bash-static with ImageImport: no registry needed.
test-image:
	$(GO) run ./sandbox/docker/testimage

test-image-if-engine:
	@if docker info >/dev/null 2>&1 || [ -S /var/run/docker.sock ]; then \
		$(MAKE) test-image; \
	else echo "no docker engine: skipping the test image (docker tests will skip)"; fi

bench: build
	$(BIN) bench
	$(GO) test -run '^$$' -bench 'ProcessStart|GateCall' -benchtime 300x ./bridge/rpc
	GATEBRIDGE_BIN=$(abspath $(BIN)) python3 clients/python/bench.py 20
	GATEBRIDGE_SOAK=1 $(GO) test -count=1 -timeout 30m -run '^TestServeSoak$$' -v ./integration

# Regenerate docs/protocol.schema.json, the JSON Schema of the `serve
# --stdio` protocol, from the Go types (bridge/rpc/schema.go); `make test`
# fails while the checked-in file is out of date.
.PHONY: schema
schema:
	$(GO) test ./bridge/rpc -run '^TestSchemaUpToDate$$' -count=1 -update

clean:
	rm -rf bin
