GO        ?= go
GOFLAGS   ?=
BIN       := slot_exporter
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w \
	-X github.com/prometheus/common/version.Version=$(VERSION) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=main

.PHONY: all build test deps demo lint promtool-check bench fuzz soak clean

all: lint build test

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) .
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o slotsim ./cmd/slotsim

deps:
	@scripts/install-deps.sh
	@scripts/install-node-deps.sh

# Every test: Go tests with the race detector against real redis-server,
# Prometheus, Alertmanager and Chromium processes the tests start
# themselves, plus the promtool rule checks and unit tests.
test: deps promtool-check
	$(GO) test -race -count=1 -timeout 14m ./...
	cd deploy/kubernetes && $(GO) test -count=1 ./...

promtool-check:
	promtool check rules alerts/slot_exporter.rules.yml
	promtool test rules alerts/tests/*/*.yml

demo:
	$(GO) run -buildvcs=true . --demo

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) mod tidy -diff
	bash scripts/pint.sh

bench: deps
	$(GO) run ./tools/bench -out BENCH.md

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./config

soak: deps
	$(GO) run ./tools/soak -out SOAK.md

clean:
	rm -f $(BIN) slotsim

# Versioned archives for linux and darwin, amd64 and arm64, each with the
# binary, LICENSE and the example config, plus sha256sums.txt, in dist/.
.PHONY: release
release:
	GO=$(GO) scripts/release.sh
