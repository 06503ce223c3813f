# narwhal — every target a fresh machine needs installs what it uses.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO          ?= go
TOOLS       := $(CURDIR)/.tools/bin
STATICCHECK := $(TOOLS)/staticcheck
STATICCHECK_VERSION := v0.8.2
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/narwhal-go/narwhal/internal/version.Version=$(VERSION)
FUZZTIME    ?= 60s

.PHONY: all build run observe demo bench flood evidence-pass test sdk-burst corpus-tables lint fmt-check vet staticcheck gotest claims node-deps node-checks fuzz tools promtool etcd chromium uvicorn pyzmq image clean help ha-outage

all: build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build every command into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# ADMIN_TOKEN_ENV=NAME: the admin token is $$NAME's value (default: a random
# one, printed in the banner).
run: ## local simulated fleet + router on 127.0.0.1:8000 (Ctrl-C stops it)
	$(GO) run ./cmd/narwhal dev run $(if $(ADMIN_TOKEN_ENV),--admin-token-env $(ADMIN_TOKEN_ENV))

# NARWHAL_ROUTER_URL (default make run's http://127.0.0.1:8000), NARWHAL_FLEET
# (default runs/dev/fleet.json) and NARWHAL_PROMETHEUS_LISTEN_ADDRESS (default
# 127.0.0.1:9090) say what to scrape and where Prometheus listens.
observe: promtool ## Prometheus with the shipped config and alert rules against the router (Ctrl-C stops it)
	$(GO) run ./cmd/narwhal dev observe

demo: ## static splits vs aggregated vs adaptive on a moving trace, in virtual time (seconds)
	$(GO) run ./cmd/narwhal demo $(DEMO_ARGS)

test: lint tools node-deps gotest sdk-burst claims node-checks ## everything CI runs

lint: fmt-check vet staticcheck ## gofmt, go vet, staticcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# promtool tests the alert rules and a real Prometheus scrapes the dev
# fleet in a test; both come from Debian's prometheus package. Every apt
# install goes through scripts/apt-install.sh: one line says what it
# installs (apt's output goes to a log it names, shown when apt fails); it
# starts no service and leaves none enabled.
promtool:
	@if command -v promtool >/dev/null && command -v prometheus >/dev/null; then :; else \
		scripts/apt-install.sh prometheus; fi

# The etcd lease tests start a real etcd on loopback (Debian's
# etcd-server package); apt-install.sh leaves its system service disabled
# and stopped, so no etcd outlives the tests.
etcd:
	@if command -v etcd >/dev/null; then :; else \
		echo "etcd is missing: installing Debian's etcd-server package (the lease tests start their own on loopback; no service is left running)"; \
		scripts/apt-install.sh etcd-server; fi


# The engine transport's test runs against uvicorn, the server vLLM runs,
# with both of its HTTP implementations (Debian's python3-uvicorn and
# python3-httptools; the test starts and stops its own).
uvicorn:
	@if /usr/bin/python3 -c 'import uvicorn, httptools' 2>/dev/null; then :; else \
		scripts/apt-install.sh python3-uvicorn python3-httptools; fi

# The KV events interop test runs a vLLM-shaped publisher on libzmq, the
# library vLLM publishes with (Debian's python3-zmq and python3-msgpack;
# the test starts and stops its own).
pyzmq:
	@if /usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null; then :; else \
		scripts/apt-install.sh python3-zmq python3-msgpack; fi

# The dashboard's browser test drives Debian's chromium headless.
chromium:
	@if command -v chromium >/dev/null; then :; else \
		scripts/apt-install.sh chromium; fi

tools: $(STATICCHECK) promtool etcd chromium uvicorn pyzmq

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

# The demo's headline claim (adaptive ≥ best static split) runs the whole
# sweep, too slow under the race detector; it runs here without it.
claims: ## the simulator's adaptive-vs-static claim on the demo trace
	$(GO) test -count=1 -run '^TestDemoAdaptiveSustainsTheBestStaticRate$$' ./internal/sim/

gotest: ## go tests with the race detector (fuzz seed corpora included)
	$(GO) test -race -count=1 -timeout 12m ./...

# The lease-outage must-hold (issue 29): each store (etcd, file lease)
# taken away for 30 s, five rounds per topology (lone router, failed-over
# pair); gotest runs one round. Prints each round's recovery time.
ha-outage: etcd ## lease store outages: routers serve again within two lease periods, 5 rounds each (about 3 minutes)
	NARWHAL_OUTAGE_ROUNDS=5 $(GO) test -race -count=1 -parallel 4 -timeout 15m -run '^TestLeaseOutageRecovery$$' -v ./internal/takeover/

# The JS SDK burst bounds (attempts per call, success share) hold for the
# router as built, not under the race detector's slowdown: gotest checks
# the burst's shape, this run its numbers.
sdk-burst: node-deps ## the OpenAI JS SDK burst against the dev fleet, without the race detector
	$(GO) test -count=1 -timeout 5m -run TestOpenAISDKBurstIsQueuedNotRefused -v ./internal/devfleet

# The real-log corpus tables in docs/memory-plan.md and docs/diagnose.md;
# make test runs the same tests and fails when a figure falls below its
# bound.
corpus-tables: ## regenerate the real-log corpus tables in docs/
	NARWHAL_WRITE_TABLES=1 $(GO) test -count=1 -run 'TestCorpusStartup$$|TestFailureCorpus$$' ./internal/evidence/memory/ ./internal/diagnose/

NODE_DIR := scripts/node

# Node packages for cross-language checks (independent implementations that
# our Go code must agree with). No lock file: it would name registry hosts;
# package.json pins exact versions instead.
$(NODE_DIR)/node_modules/.installed: $(NODE_DIR)/package.json
	cd $(NODE_DIR) && npm install --no-package-lock --no-audit --no-fund --loglevel=error
	touch $@

node-deps: $(NODE_DIR)/node_modules/.installed

node-checks: node-deps ## checks that run under Node
	@for s in scripts/*.mjs; do [ -e "$$s" ] || continue; echo "node $$s"; node "$$s"; done

bench: ## benchmarks: placement, simengine, and the router against direct engine calls
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./internal/sched/
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/simengine/
	$(GO) test -run '^$$' -bench ViewEvent -benchtime 1000000x ./internal/residency/
	$(GO) test -run '^$$' -bench FleetMemory -benchtime 1x ./internal/residency/
	$(GO) run ./bench/router-overhead -duration 3s
	$(GO) test -run '^$$' -bench . -benchtime 1x ./internal/loadgen/ ./internal/report/
	$(GO) test -run '^$$' -bench '^BenchmarkDashboardRefresh64$$' -benchtime 200x ./internal/router/

# Issue 29's floods against narwhal-serve as its own process (about 4
# minutes, most of it waiting to see the process come back); not in make
# test. FLOOD_ARGS passes flags, e.g. FLOOD_ARGS='-short -conns 600'.
flood: ## zero-byte and slow-body floods against the router binary: fds, goroutines, RSS back to baseline
	$(GO) run ./bench/flood $(FLOOD_ARGS)

# Issue 29's 1 GiB journal under the router's evidence pass (about 15 s
# and 1 GiB of temporary disk); not in make test, whose bench/evidence-pass
# test runs it at 16 MiB. EVPASS_ARGS passes flags, e.g. EVPASS_ARGS='-mib 256'.
evidence-pass: ## the evidence pass on a 1 GiB journal: peak RSS, and bytes and CPU per pass against the rows appended
	$(GO) run ./bench/evidence-pass $(EVPASS_ARGS)

fuzz: ## run the fuzz targets for FUZZTIME each
	$(GO) test ./internal/fleet -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME)

IMAGE  ?= narwhal:$(VERSION)
DOCKER ?= docker

# The router and the attestation sidecar in one distroless image (see
# Dockerfile). Needs docker or a compatible builder; no test needs it.
image: ## container image of narwhal-serve and narwhal-attest (needs docker)
	@if command -v $(DOCKER) >/dev/null; then $(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .; else \
		echo "make image needs docker (or DOCKER=podman, or another compatible builder); nothing built"; exit 1; fi

clean:
	rm -rf bin .tools
