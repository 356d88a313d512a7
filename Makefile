GO        ?= go
GOFLAGS   ?=
BIN       := slot_exporter
# As scripts/release.sh gives them: the version without a tag's leading v,
# the branch checked out, the build date from the commit time.
VERSION   ?= $(patsubst v%,%,$(shell git describe --tags --always --dirty 2>/dev/null || echo dev))
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILDDATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d-%H:%M:%S 2>/dev/null)
LDFLAGS   := -s -w \
	-X github.com/prometheus/common/version.Version=$(VERSION) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=$(BRANCH) \
	-X github.com/prometheus/common/version.BuildDate=$(BUILDDATE)

.PHONY: all build test test-build deps deps-bench demo lint lint-links promtool-check bench fuzz soak clean

# The test and lint recipes pipe go test into tools/testreport: pipefail
# keeps go test's failure the recipe's.
SHELL := bash

# The Go modules of the tree: the product first, then the modules that keep
# test-only dependencies out of its go.mod (Prometheus for the rule checks,
# chromedp for the browser tests, the Kubernetes API for the manifests).
MODULES := . alerts e2e internal/web/browser deploy/kubernetes

all: lint build test

# -trimpath: no path of the build machine in the binaries, as in a release.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) .
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o slotsim ./cmd/slotsim

deps:
	@scripts/install-deps.sh
	@scripts/install-node-deps.sh

# Every test: Go tests of every module with the race detector against real
# redis-server, Prometheus, Alertmanager and Chromium processes the tests
# start themselves. promtool's rule checks and unit tests run among the
# alerts module's tests (`make promtool-check` runs them alone).
# tools/testreport prints what go test would, then the slowest 10 tests and
# the counts.
#
# Where the time goes: the tests mostly wait (for sweeps, for workers
# killed mid-job, for Prometheus's rule evaluations, for the demo's
# minutes): a quiet two-core machine used 280 s of CPU in 381 s of `make
# test`, 37% of its cores, with the product's module under go test's
# default of two packages at a time and the other modules after it. So:
# - the product's slowest packages are named first, so that go test starts
#   them first, and it tests four packages at a time (TEST_P): the demo's
#   two minutes alone are longer than the rest of its packages together;
# - the other modules run at the same time, in two lanes of their own:
#   e2e (Prometheus and Alertmanager, mostly waiting for rule evaluations)
#   and the rest. Each lane writes a file of its own, so that go test's
#   JSON lines never interleave, and the files go to testreport once the
#   product's module is done.
# The tests wait for events, not durations, so more at once costs each
# test its own time, not its verdict; the two that this layout showed
# still leaning on the machine's speed (a cut-off counted, and a moment
# the exactness tests did not know) were fixed at their cause.
SLOW_FIRST := ./internal/demo ./internal/sweep ./examples/frameworks ./examples/libraries .
LANE_A     := e2e
LANE_B     := $(filter-out . $(LANE_A),$(MODULES))
TEST_P     ?= 4
GOTEST     := $(GO) test -race -count=1 -timeout 14m -json
test: deps
	set -o pipefail; { \
		rc=0; tmp=$$(mktemp -d); i=0; \
		for lane in "$(LANE_A)" "$(LANE_B)"; do \
			i=$$((i+1)); \
			( for m in $$lane; do (cd $$m && $(GOTEST) ./... 2>&1) || echo $$m >> $$tmp/failed; done \
			) > $$tmp/lane$$i.json & \
		done; \
		$(GOTEST) -p $(TEST_P) $(SLOW_FIRST) ./... 2>&1 || rc=1; \
		wait; \
		cat $$tmp/lane*.json; [ ! -s $$tmp/failed ] || rc=1; rm -rf $$tmp; exit $$rc; \
	} | $(GO) run ./tools/testreport

# Compiles and links every module's tests as make test does, without
# running them (-exec true runs true in their place): .ci/run does this
# while the servers install, so that make test finds them compiled.
test-build:
	@for m in $(MODULES); do \
		out=$$(cd $$m && $(GO) test -race -count=1 -run '^$$' -exec true ./... 2>&1) || { echo "$$out"; exit 1; }; \
	done

promtool-check:
	promtool check rules alerts/slot_exporter.rules.yml
	promtool test rules alerts/tests/*/*.yml

demo:
	$(GO) run -buildvcs=true . --demo

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(GO) mod tidy -diff) || exit 1; done
	$(MAKE) --no-print-directory lint-links
	bash scripts/pint.sh

# No binary of the product module (the exporter, slotsim, the tools) links a
# package of ours that imports testing: test helpers stay out of what ships.
# The only package that does is expfmt's ABNF parser, which keeps its fuzz
# targets in non-test files; a new one fails here.
LINK_OK := github.com/pandatix/go-abnf
lint-links:
	@for p in $$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./...); do \
		bad=$$($(GO) list -deps -f '{{range .Imports}}{{if eq . "testing"}}{{$$.ImportPath}}{{"\n"}}{{end}}{{end}}' $$p | grep -vx '$(LINK_OK)'); \
		if [ -n "$$bad" ]; then echo "$$p links package testing through:" $$bad; exit 1; fi; \
	done

deps-bench: deps
	@scripts/install-deps.sh --bench

bench: deps-bench
	$(GO) run ./tools/bench -out BENCH.md

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./config
	$(GO) test -run '^$$' -fuzz FuzzJSONScanMatchesWhole -fuzztime 60s ./internal/kind

soak: deps
	$(GO) run ./tools/soak -out SOAK.md

clean:
	rm -f $(BIN) slotsim

# Versioned archives for linux and darwin, amd64 and arm64, each with the
# binary, LICENSE and the example config, plus sha256sums.txt, in dist/.
.PHONY: release
release:
	GO=$(GO) scripts/release.sh
