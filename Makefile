# tandem — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown) -X main.buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)
FUZZTIME ?= 20000x

# Fuzz targets run briefly by `make test` (package:target).
FUZZ_TARGETS := \
	./tsdb/encoding:FuzzTSDecoder ./tsdb/encoding:FuzzXORDecoder ./tsdb/encoding:FuzzRoundTrip ./tsdb/encoding:FuzzDecimal ./tsdb/encoding:FuzzDecimalRoundTrip ./tsdb/encoding:FuzzDecimalPatched \
	./tsdb/encoding:FuzzHistogramDecoder ./tsdb/encoding:FuzzHistogramRoundTrip \
	./tsdb/block:FuzzOpenIndex ./tsdb/block:FuzzChunk ./tsdb/block:FuzzExemplars ./tsdb/block:FuzzStarts \
	./tsdb/record:FuzzDecode ./tsdb/wal:FuzzReplay ./tsdb/starts:FuzzDecode \
	./remote:FuzzDecodeV1 ./remote:FuzzDecodeV2

.PHONY: all build run test vet unit e2e fuzz soak bench bench-histograms bench-histogram-peers docs clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/tandem ./cmd/tandem

## run: build tandem and start it with ./data as its data directory.
run: build
	./bin/tandem --storage.path=./data

## test: vet, unit/integration/e2e tests (race detector on), then each fuzz target for FUZZTIME
## iterations (a count, not a duration: time-based runs fail spuriously on a loaded machine).
test: vet unit fuzz

vet:
	$(GO) vet -stdmethods=false ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || (echo "gofmt needed:"; gofmt -l .; exit 1)

# unit runs, among cmd/tandem's tests, TestCrashCampaign with its default
# -crash.trials=3 (kill -9 during writes and maintenance; ~20-40 s); `make soak` runs 100.
# The real-Prometheus end-to-end tests (TestPrometheusEndToEnd*) run on their own in
# `make e2e` (timing against an external process is reliable only without other
# packages' tests competing for the 2 cores); .ci/run runs both.
unit:
	$(GO) test -race -timeout 20m -skip '^TestPrometheusEndToEnd' ./...

## e2e: the end-to-end tests with real external programs: Prometheus 3 (remote write 1.0/2.0,
## remote read, docker/prometheus.yml; over TLS with basic auth), node_exporter, Alertmanager, and the Grafana dashboard.
## Prometheus: $$TANDEM_PROMETHEUS or /root/.cache/tandem-bin/prometheus.
e2e:
	$(GO) test -race -count=1 -timeout 10m -run 'TestPrometheusEndToEnd|TestRulesEndToEnd|TestDashboard|TestDocker' -v ./cmd/tandem/

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## soak: the crash campaign with SOAK_TRIALS trials (default 100, ~10 min): tandem killed with -9 at
## random moments of flushes, checkpoints, compactions, retention, tombstone cleaning and snapshots,
## restarted and checked (no quarantine, every acknowledged sample exactly once). Prints trials
## passed/trials and the seed (SOAK_SEED=<seed> repeats its kill delays and admin operations); the full output is in bin/soak.log.
SOAK_TRIALS ?= 100
SOAK_SEED ?= 0
soak:
	@mkdir -p bin
	@$(GO) test -count=1 -timeout 90m -run '^TestCrashCampaign$$' -v ./cmd/tandem/ \
		-crash.trials=$(SOAK_TRIALS) -crash.seed=$(SOAK_SEED) > bin/soak.log 2>&1; rc=$$?; \
		grep -E 'crash campaign|kills landed|^    --- FAIL' bin/soak.log; exit $$rc

## bench: Go micro-benchmarks next to Prometheus's own packages in the same run, then the
## side-by-side harness (cmd/tandem-bench: tandem, VictoriaMetrics, Prometheus on the same
## pre-encoded workload; BENCH_SIZE=quick|large), then its native-histogram workload (tandem and
## Prometheus: bench-histogram-peers). Results: docs/benchmarks.md.
## The native-histogram benchmarks against Prometheus's TSDB take ~75 s even at 1x:
## they run in `make bench-histograms`, not in bench-micro.
BENCH_SIZE ?= quick
BIN_DIR ?= $(HOME)/.cache/tandem-bin
PROMETHEUS_VERSION ?= v0.316.0
VICTORIAMETRICS_VERSION ?= v1.151.0
bench: bench-micro bench-peers
	$(GO) run ./cmd/tandem-bench -size $(BENCH_SIZE) -bin-dir $(BIN_DIR) -json bench-$(BENCH_SIZE).json
	$(MAKE) bench-histogram-peers

HIST_BENCH := ^Benchmark(HistogramBytes|HistogramIngest|HistogramQuantileQuery)$$

bench-micro:
	$(GO) test -run '^$$' -bench . -skip '$(HIST_BENCH)' -benchmem -benchtime=5x ./tsdb/ ./tsdb/head/ ./tsdb/block/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=3x ./remote/
	$(GO) test -run '^$$' -bench . -benchmem ./tsdb/encoding/ ./tsdb/record/
	$(GO) test -run '^$$' -bench BenchmarkQueries -benchmem -benchtime=10x ./promql/pushdown/

## bench-histograms: native histograms (20 targets, 6 h) in tandem and in Prometheus's TSDB:
## block bytes, ingest, histogram_quantile range queries (answers compared).
bench-histograms:
	$(GO) test -run '^$$' -bench '$(HIST_BENCH)' -benchtime 1x -benchmem ./tsdb/

## bench-histogram-peers: the side-by-side harness on its native-histogram workload
## (tandem and Prometheus over remote-write 2.0; BENCH_SIZE=quick is 20 targets × 6 h, ~3 min;
## VictoriaMetrics does not store native histograms and is left out; needs $(BIN_DIR)/prometheus
## from make bench-peers). Run by make bench after the float workload; not part of make test.
bench-histogram-peers:
	$(GO) run ./cmd/tandem-bench -workload histograms -size $(BENCH_SIZE) -bin-dir $(BIN_DIR) -json bench-histograms-$(BENCH_SIZE).json

## bench-peers: build the pinned peers once into $(BIN_DIR) (Prometheus takes several minutes).
bench-peers:
	@mkdir -p $(BIN_DIR)
	@test -x $(BIN_DIR)/victoria-metrics || { echo "building VictoriaMetrics $(VICTORIAMETRICS_VERSION)"; \
		GOBIN=$(BIN_DIR) CGO_ENABLED=0 GOFLAGS=-buildvcs=false $(GO) install github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@$(VICTORIAMETRICS_VERSION); }
	@test -x $(BIN_DIR)/prometheus || { echo "building Prometheus $(PROMETHEUS_VERSION)"; \
		GOBIN=$(BIN_DIR) GOFLAGS=-buildvcs=false $(GO) install github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_VERSION); }

## docs: regenerate docs/configuration.md from the flag definitions (cmd/tandem's
## TestConfigDocsUpToDate fails while it is stale).
docs:
	$(GO) run ./cmd/tandem docs config > docs/configuration.md.tmp
	mv docs/configuration.md.tmp docs/configuration.md

clean:
	rm -rf bin
