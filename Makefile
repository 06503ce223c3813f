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

.PHONY: all build run demo bench test lint fmt-check vet staticcheck gotest claims node-deps node-checks fuzz tools promtool clean help

all: build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build every command into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# ADMIN_TOKEN_ENV=NAME: the admin token is $$NAME's value (default: a random
# one, printed in the banner).
run: ## local simulated fleet + router on 127.0.0.1:8000 (Ctrl-C stops it)
	$(GO) run ./cmd/narwhal dev run $(if $(ADMIN_TOKEN_ENV),--admin-token-env $(ADMIN_TOKEN_ENV))

demo: ## static splits vs aggregated vs adaptive on a moving trace, in virtual time (seconds)
	$(GO) run ./cmd/narwhal demo

test: lint tools node-deps gotest claims node-checks ## everything CI runs

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
# install goes through scripts/apt-install.sh: it says what it installs,
# keeps apt's output, starts no service and leaves none enabled.
promtool:
	@if command -v promtool >/dev/null && command -v prometheus >/dev/null; then :; else \
		echo "promtool and prometheus are missing: installing Debian's prometheus package (tests use both binaries; no service is left running)"; \
		scripts/apt-install.sh prometheus; fi

tools: $(STATICCHECK) promtool

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

# The demo's headline claim (adaptive ≥ best static split) runs the whole
# sweep, too slow under the race detector; it runs here without it.
claims: ## the simulator's adaptive-vs-static claim on the demo trace
	$(GO) test -count=1 -run '^TestDemoAdaptiveSustainsTheBestStaticRate$$' ./internal/sim/

gotest: ## go tests with the race detector (fuzz seed corpora included)
	$(GO) test -race -count=1 -timeout 12m ./...

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
	$(GO) run ./bench/router-overhead

fuzz: ## run the fuzz targets for FUZZTIME each
	$(GO) test ./internal/fleet -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME)

clean:
	rm -rf bin .tools
