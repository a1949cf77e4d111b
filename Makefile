# gatebridge — see README.md. `make build` then `make test`.
GO      ?= go
BIN     ?= bin/gatebridge
PREFIX  ?= /usr/local
# The version is `git describe` when a v* tag exists, else what the Go
# build info says (a module version for `go install …@v1.2.3`, else dev);
# the commit is the full hash, "-dirty" with uncommitted changes
# (`gatebridge version` prints both, and the Go that built it).
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null)
COMMIT  ?= $(shell git describe --always --dirty --abbrev=40 --match 'no tag: the full hash' 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Short fuzz runs inside `make test`; `make fuzz` runs longer.
FUZZTIME ?= 5s
FUZZLONG ?= 2m
FUZZ_TARGETS := ./wrappers:FuzzScript ./gates:FuzzParseArgs ./gates:FuzzCommandPolicy ./bridge:FuzzReadCall ./bridge/mailbox:FuzzDecodeArgv ./gates/httpgate:FuzzParseURL ./gates/secrets:FuzzWriter

.PHONY: all build install deps test test-summary unit test-clients fuzz-short fuzz lint test-image bench example clean

# What `make test` prints at its end: each step writes its part here
# (make test empties it first).
REPORT := bin/test-report

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
example: deps build
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

# The Debian/Ubuntu packages the tests use, listed once (.ci/run runs
# make deps too): gcc and libc6-dev for the race detector (cgo);
# bubblewrap for the bwrap backend; busybox-static and bash-static for the
# docker test image; dash mksh yash ksh zsh posh for the wrapper shell
# matrix; git and python3 for the attack tests and the Python client;
# python3-venv for its install test; openssl for its TLS tests; nodejs
# and node-typescript (tsc) for the TypeScript client; docker-registry,
# run on loopback by the image pull tests. As root,
# make deps installs what is missing (apt-get); otherwise it says what is
# missing, and the tests that need it skip and say why in make test's
# summary. Not Docker: the docker tests need an engine (and build their
# image with make test-image). Not acl: TestGrantACLFormat skips without
# getfacl (it has not been run where getfacl is).
APT_DEPS := bubblewrap busybox-static bash-static dash mksh yash ksh zsh posh gcc libc6-dev git python3 python3-venv openssl nodejs node-typescript docker-registry

deps:
	@mkdir -p $(REPORT); \
	if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then \
		msg="deps: no dpkg/apt-get: not checked (the tests use: $(APT_DEPS)); the tests that need a missing one skip"; \
	else \
		need=; for p in $(APT_DEPS); do dpkg -s $$p >/dev/null 2>&1 || need="$$need $$p"; done; \
		if [ -z "$$need" ]; then msg="deps: every package the tests use is installed"; \
		elif [ "$$(id -u)" = 0 ]; then \
			echo "make deps: apt-get install$$need"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get update -qq && apt-get install -y -qq $$need >/dev/null || exit 1; \
			msg="deps: installed$$need"; \
		else msg="deps: missing$$need (not root: not installed; run make deps as root, or the tests that need them skip)"; fi; \
	fi; \
	echo "$$msg" | tee $(REPORT)/00-deps.txt

# Every test: lint, unit and integration tests (race detector on when
# cgo is), the Python client's suites on every backend that can run here,
# and short fuzz runs; then a summary of what ran and what was skipped
# and why. Each step runs even when one before it failed (the summary
# names the failed ones; the exit code is 1). Docker tests need the engine
# and the test image (built here when the engine answers); CI sets
# GATEBRIDGE_REQUIRE_BACKENDS so a skipped backend test fails there. The
# sandbox conformance suite and the hostile-mailbox tests also run under
# gVisor (when the engine has the OCI runtime runsc) and against Podman
# (GATEBRIDGE_PODMAN_HOST); the other integration tests do not run again.
# make unit PKGS=./bridge/... tests fewer packages.
PKGS ?= ./...
TEST_STEPS := deps lint test-deploy test-image-if-engine unit test-clients fuzz-short
test:
	@rm -rf $(REPORT); mkdir -p $(REPORT); failed=; \
	for t in $(TEST_STEPS); do \
		$(MAKE) --no-print-directory $$t || failed="$$failed $$t"; \
	done; \
	[ -z "$$failed" ] || echo "FAILED:$$failed" > $(REPORT)/99-failed.txt; \
	$(MAKE) --no-print-directory test-summary; \
	[ -z "$$failed" ]

# The parts the steps of make test wrote, and the backends this machine has.
test-summary:
	@echo; echo "== make test: summary ($(REPORT)/) =="; \
	cat $(REPORT)/[0-8]*.txt 2>/dev/null; \
	if [ -x $(BIN) ]; then echo "backends here (gatebridge doctor):"; \
		GATEBRIDGE_CONFIG= XDG_CONFIG_HOME=/nonexistent $(BIN) doctor 2>&1 | grep -E '^[a-z]+ +(backend |docker (engine|image):)' | sed 's/^/  /'; fi; \
	cat $(REPORT)/99-failed.txt 2>/dev/null || echo "every step passed"

unit: build
	@mkdir -p $(REPORT); rm -f $(REPORT)/41-race.txt; \
	if [ "$$($(GO) env CGO_ENABLED)" = 1 ]; then race=-race; else race=; \
		echo "race detector: off (cgo is off: no C compiler; make deps installs gcc)" | tee $(REPORT)/41-race.txt; fi; \
	echo "$(GO) test $$race -count=1 -timeout 20m $(PKGS)"; \
	$(GO) run ./internal/testreport go $(REPORT)/40-go.txt -- $(GO) test $$race -count=1 -timeout 20m -json $(PKGS)

# The Kubernetes manifests (deploy/k8s, a Go module of its own): decoded
# strictly into the Kubernetes API types, their security properties
# checked. Not run on a cluster.
.PHONY: test-deploy
test-deploy:
	cd deploy/k8s && $(GO) vet ./... && $(GO) test -count=1 ./...
	@mkdir -p $(REPORT); echo "deploy/k8s: manifests vetted and tested" > $(REPORT)/20-deploy.txt

# Both clients against the built binary; each runs even when the other
# failed (make test's summary has a part for each).
test-clients: build
	@ok=0; \
	$(MAKE) --no-print-directory test-client-python || ok=1; \
	$(MAKE) --no-print-directory test-client-typescript || ok=1; \
	exit $$ok

# The Python client (clients/python, standard library only) against the
# built binary, with the system python3, on every backend that can run
# here (bwrap and docker tests skip, saying why, where they cannot;
# GATEBRIDGE_TEST_BWRAP=0 or GATEBRIDGE_TEST_DOCKER=0 leaves one out),
# and its offline pip install (test_install.py); then its example agent
# loop once; and the scripts' own tests (internal/bench/benchcmp.py).
.PHONY: test-client-python test-client-typescript
test-client-python: build
	@mkdir -p $(REPORT); \
	if ! command -v python3 >/dev/null 2>&1; then \
		echo "python client: skipped: no python3 (make deps installs it)" | tee $(REPORT)/50-python.txt; exit 0; fi; \
	set -e; \
	echo "python3 -m unittest discover -s clients/python -v"; \
	GATEBRIDGE_BIN=$(abspath $(BIN)) GATEBRIDGE_TEST_BWRAP=$${GATEBRIDGE_TEST_BWRAP-1} GATEBRIDGE_TEST_DOCKER=$${GATEBRIDGE_TEST_DOCKER-1} \
		$(GO) run ./internal/testreport unittest $(REPORT)/50-python.txt -- python3 -m unittest discover -s clients/python -v; \
	GATEBRIDGE_BIN=$(abspath $(BIN)) python3 examples/agent_loop.py; \
	echo "  examples/agent_loop.py: ok" >> $(REPORT)/50-python.txt; \
	$(GO) run ./internal/testreport unittest $(REPORT)/51-bench-scripts.txt -- python3 -m unittest discover -s internal/bench -p '*_test.py' -v

# The TypeScript/JavaScript client (clients/typescript, no dependencies,
# Node >= 20) the same way: `node --test` on every backend that can run
# here, the types checked by tsc (node-typescript; the test that runs it
# skips without it), then examples/agent_loop.mjs. Without node (or with
# one older than 20) it is skipped with the reason, except under CI
# (GATEBRIDGE_REQUIRE_BACKENDS set), where that fails.
test-client-typescript: build
	@mkdir -p $(REPORT); \
	why=; if ! command -v node >/dev/null 2>&1; then why="no node (make deps installs nodejs; Node >= 20 is needed)"; \
	elif ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then \
		why="node $$(node --version) is older than 20"; fi; \
	if [ -n "$$why" ]; then \
		echo "typescript client: skipped: $$why" | tee $(REPORT)/52-typescript.txt; \
		if [ -n "$$GATEBRIDGE_REQUIRE_BACKENDS" ]; then echo "typescript client: required under CI (GATEBRIDGE_REQUIRE_BACKENDS is set)" >&2; exit 1; fi; \
		exit 0; fi; \
	set -e; \
	echo "cd clients/typescript && node --test"; \
	cd clients/typescript && GATEBRIDGE_BIN=$(abspath $(BIN)) GATEBRIDGE_TEST_BWRAP=$${GATEBRIDGE_TEST_BWRAP-1} GATEBRIDGE_TEST_DOCKER=$${GATEBRIDGE_TEST_DOCKER-1} \
		GATEBRIDGE_REQUIRE_TSC=$${GATEBRIDGE_REQUIRE_TSC-$$([ -n "$$GATEBRIDGE_REQUIRE_BACKENDS" ] && echo 1)} \
		$(GO) run ../../internal/testreport node $(abspath $(REPORT))/52-typescript.txt -- node --test --test-reporter=tap; \
	cd ../.. && GATEBRIDGE_BIN=$(abspath $(BIN)) node examples/agent_loop.mjs; \
	echo "  examples/agent_loop.mjs: ok" >> $(REPORT)/52-typescript.txt

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
				ok=; for try in 2 3; do \
					if grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
						echo "fuzz $$pkg $$fn: the fuzz engine's deadline flake (golang/go#75804, no failing input): try $$try of 3"; \
						if $(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg > $$log 2>&1; then ok=1; cat $$log; break; fi; \
						cat $$log; \
					else exit 1; fi; \
				done; [ -n "$$ok" ] || exit 1; \
			else cat $$log; fi; \
		fi; \
	done; \
	mkdir -p $(REPORT); echo "fuzz: $(words $(FUZZ_TARGETS)) targets, $(FUZZTIME) each: no failing input" > $(REPORT)/60-fuzz.txt

fuzz:
	$(MAKE) fuzz-short FUZZTIME=$(FUZZLONG)

# The library and CLI must also build (and vet) for macOS, where many
# runtime authors develop, and for arm64 Linux.
CROSS := darwin/arm64 linux/arm64

lint:
	$(GO) vet ./...
	@set -e; for t in $(CROSS); do echo "vet $$t"; GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet ./...; done
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@mkdir -p $(REPORT); echo "lint: go vet (linux, $(CROSS)) and gofmt clean" > $(REPORT)/10-lint.txt

# Builds gatebridge-test:latest from the host's busybox-static and
# bash-static with ImageImport: no registry needed.
test-image:
	$(GO) run ./sandbox/docker/testimage

test-image-if-engine:
	@mkdir -p $(REPORT); \
	if ! docker info >/dev/null 2>&1 && ! [ -S /var/run/docker.sock ]; then \
		msg="docker test image: not built: no docker engine answers (the docker tests skip)"; \
	elif ! [ -x /bin/busybox ] || ! [ -x /bin/bash-static ]; then \
		msg="docker test image: not built: no /bin/busybox or /bin/bash-static (busybox-static, bash-static: make deps) (the docker tests skip)"; \
	else $(MAKE) --no-print-directory test-image || exit 1; msg="docker test image: built"; fi; \
	echo "$$msg" | tee $(REPORT)/30-image.txt
	@if [ -n "$$GATEBRIDGE_PODMAN_HOST" ]; then \
		echo "test image into podman at $$GATEBRIDGE_PODMAN_HOST"; \
		DOCKER_HOST=$$GATEBRIDGE_PODMAN_HOST $(GO) run ./sandbox/docker/testimage; \
	fi

bench: build
	$(BIN) bench
	GB=$(abspath $(BIN)) internal/bench/bench-runtimes.sh
	$(GO) test -run '^$$' -bench 'ProcessStart|GateCall' -benchtime 300x ./bridge/rpc
	GATEBRIDGE_BIN=$(abspath $(BIN)) python3 clients/python/bench.py 20
	GATEBRIDGE_BIN=$(abspath $(BIN)) python3 clients/python/bench_pool.py 20
	GATEBRIDGE_SOAK=1 $(GO) test -count=1 -timeout 30m -run '^TestServeSoak$$' -v ./integration

# Regenerate docs/protocol.schema.json, the JSON Schema of the `serve
# --stdio` protocol, from the Go types (bridge/rpc/schema.go); `make test`
# fails while the checked-in file is out of date.
.PHONY: schema
schema:
	$(GO) test ./bridge/rpc -run '^TestSchemaUpToDate$$' -count=1 -update

clean:
	rm -rf bin
