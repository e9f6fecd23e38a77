# Magnetar build. `make standalone` runs the whole system; `make test` runs the tests.
GO        ?= go
BIN       := bin/magnetar
VERSION   := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
GOBIN     := $(shell $(GO) env GOPATH)/bin
STATICCHECK_VERSION := v0.8.2
PROTOC_GEN_GO_VERSION := v1.36.12
FUZZTIME  ?= 20s
PERF_DIR  ?= $(CURDIR)/.perf

.PHONY: console console-check console-screenshots chromium prometheus all build test test-short test-long deploy-guide-test testrace chaos chaos-merge chaos-smoke bench fuzz fuzz-server lint standalone perf-disk perf-journal perf-bookie perf-ledger perf-managedledger bench-report bench-report-quick zookeeper etcd nats pulsar-perf compat dist generate clean

all: build

## build: one static binary, bin/magnetar
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/magnetar

## test: vet, then every test with the race detector and the invariants
## build tag (internal/invariants: checks that panic on a broken invariant;
## what CI runs), then the broker's protocol tests once more over managed
## ledgers on an in-process bookie (its output in .test/broker-bookie.log,
## printed when it fails), then chaos-smoke; the ZooKeeper and etcd tests
## start their own servers, installing ZooKeeper and etcd if missing.
## TEST_P packages run at once, the slowest first (TEST_FIRST; go test runs
## them in the order named), with the bookie pass beside them (TEST_BESIDE;
## empty runs it after): the slow packages mostly wait on servers and
## clients, so four at once take about 6.5 minutes on 2 cores where two at
## once, one pass after the other, took 9.5 (docs/testing.md). The
## per-package times of the last run: .test/times.txt
TEST_P ?= 4
TEST_BESIDE ?= 1
TEST_FIRST := ./cmd/magnetar/ ./broker/ ./metadata/
BOOKIE_PASS := MAGNETAR_BROKER_STORAGE=bookie $(GO) test -race -count=1 -timeout 10m ./broker/ > .test/broker-bookie.log 2>&1
test: zookeeper etcd nats pulsar-perf chromium prometheus console-check build
	$(GO) vet ./...
	@mkdir -p .test; set -e; \
	  if [ -n "$(TEST_BESIDE)" ]; then $(BOOKIE_PASS) & bk=$$!; fi; \
	  st=0; MAGNETAR_REQUIRE_BROWSER=1 MAGNETAR_REQUIRE_PROMETHEUS=1 MAGNETAR_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 20m -p $(TEST_P) -tags invariants $(TEST_FIRST) ./... > .test/all.log 2>&1 || st=$$?; \
	  grep -v '^?' .test/all.log; \
	  if [ -n "$(TEST_BESIDE)" ]; then wait $$bk && bst=0 || bst=$$?; else $(BOOKIE_PASS) && bst=0 || bst=$$?; fi; \
	  if [ $$bst = 0 ]; then tail -1 .test/broker-bookie.log | sed 's/^/bookie storage: /'; else cat .test/broker-bookie.log; st=1; fi; \
	  { grep -hE '^(ok|FAIL)[[:space:]]+github' .test/all.log; sed 's|/broker|/broker[bookie-storage]|' .test/broker-bookie.log | grep -hE '^(ok|FAIL)[[:space:]]+github'; } | \
	    awk '{print $$NF, $$1, $$2}' | sort -rn > .test/times.txt || true; \
	  exit $$st
	$(MAKE) chaos-smoke

## test-short: the fast inner loop: go test -short skips what needs
## ZooKeeper, nats-server, pulsar-perf-go, real child processes or a tmpfs
## mount, and runs the seeded crash and fault suites with fewer seeds; no
## race detector, nothing installed. make test stays the strict run
test-short:
	$(GO) test -short -count=1 ./...

## testrace: the tests three times in shuffled order, to shake out flakes
testrace: zookeeper nats pulsar-perf
	$(GO) test -race -count=3 -shuffle=on -timeout 40m ./...

## test-long: the seeded crash and fault suites with many more seeds
## (journal and entry-log crashes, ledger fault scenarios, re-replication,
## the managed-ledger model test, the stretched cluster's region loss with
## 16 topics, a 30 s stream after it and a 5 ms inter-region round trip);
## about 3 minutes on 2 cores with these counts: raise them for soaks
test-long: zookeeper
	MAGNETAR_CRASH_SEEDS=3000 $(GO) test -count=1 -timeout 60m -run 'TestCrash' ./journal/ ./entrylog/
	$(GO) test -count=1 -timeout 60m -run 'TestRandomizedFaults|TestReplicationRandomized' ./ledger/ -ledger.seeds=3000 -ledger.replseeds=100
	$(GO) test -count=1 -timeout 60m -run 'TestBKModel' ./managedledger/ -ml.seeds=300
	$(GO) test -count=1 -timeout 20m -run '^TestStretchedClusterSurvivesRegionLoss$$' ./cmd/magnetar/ -stretched.long
	$(MAKE) fuzz-server HOSTILE_INPUTS=20000 HOSTILE_SEEDS=3
	$(MAKE) deploy-guide-test

## deploy-guide-test: docs/deploy.md run literally, block by block, on four
## "hosts" made of network and mount namespaces (198.18.0.0/24, directories
## standing in for disks; needs root): ZooKeeper ensemble, bookies, brokers,
## proxy, a first test, adding and decommissioning a bookie, a rolling
## upgrade and a metadata backup (cmd/magnetar/deployguide_test.go);
## about 3 minutes on 2 cores
deploy-guide-test: zookeeper
	$(GO) test -count=1 -timeout 60m -run '^TestDeployGuide$$' -v ./cmd/magnetar/ -deployguide

## chaos: the fault suite (tools/chaos): a cluster of processes (3 ZooKeeper
## nodes, 4 bookies, 3 brokers, the proxy), each in its own network namespace
## on a test bridge (198.18.0.0/24; needs root), runs a recorded workload
## through every named scenario (kill -9, SIGSTOP, partitions, disk faults,
## unloads, splits, rolling restarts, random mixes, and a second cluster
## replicated to cut off or killed) for CHAOS_SEEDS seeds
## from CHAOS_FIRST_SEED, seed by seed, starting no run after CHAOS_BUDGET;
## the checker proves nothing acknowledged was lost, reordered or (with
## deduplication) duplicated; writes CHAOS_REPORT (docs/chaos/REPORT.md).
## Logs of failing runs are kept (the report names the directory).
## One run: make chaos CHAOS_SCENARIOS=kill-broker CHAOS_FIRST_SEED=7 CHAOS_SEEDS=1
## Every run's results are saved as they come to CHAOS_PART (JSON); 20 seeds of
## every scenario take close to three hours, so run them in parts (seeds 1-10,
## then CHAOS_FIRST_SEED=11) and merge the parts into one report with
## make chaos-merge CHAOS_PARTS=a.json,b.json
CHAOS_SCENARIOS  ?= all
CHAOS_SEEDS      ?= 20
CHAOS_FIRST_SEED ?= 1
CHAOS_BUDGET     ?= 0
CHAOS_REPORT     ?= $(CURDIR)/docs/chaos/REPORT.md
CHAOS_PART       ?= $(CURDIR)/docs/chaos/parts/$(CHAOS_SCENARIOS)-seeds-$(CHAOS_FIRST_SEED)+$(CHAOS_SEEDS).json
chaos: build zookeeper
	$(GO) test -count=1 -timeout 4h -run '^TestChaos$$' -v ./tools/chaos/ -chaos -chaos.bin=$(CURDIR)/$(BIN) \
		-chaos.scenarios='$(CHAOS_SCENARIOS)' -chaos.seeds=$(CHAOS_SEEDS) -chaos.first-seed=$(CHAOS_FIRST_SEED) \
		-chaos.budget=$(CHAOS_BUDGET) -chaos.report=$(CHAOS_REPORT) -chaos.part='$(CHAOS_PART)'

## chaos-merge: one report (CHAOS_REPORT) from parts saved by make chaos,
## checking every bound of issue 40; runs nothing
CHAOS_PARTS ?= $(subst $(eval) ,$(comma),$(wildcard $(CURDIR)/docs/chaos/parts/*.json))
comma := ,
chaos-merge:
	$(GO) test -count=1 -run '^TestChaos$$' -v ./tools/chaos/ -chaos -chaos.merge='$(CHAOS_PARTS)' -chaos.bounds \
		-chaos.report=$(CHAOS_REPORT) -chaos.command='make chaos'

## chaos-smoke: four scenarios of the fault suite (kill-broker, kill-remote,
## partition-broker-zk, kill-bookie), one seed each, in about two minutes;
## the report goes to .chaos/REPORT-smoke.md. make test runs it
chaos-smoke: build zookeeper
	$(GO) test -count=1 -timeout 10m -run '^TestChaos$$' -v ./tools/chaos/ -chaos -chaos.bin=$(CURDIR)/$(BIN) \
		-chaos.scenarios=smoke -chaos.seeds=1 -chaos.bounds -chaos.report=$(CURDIR)/.chaos/REPORT-smoke.md -chaos.command='make chaos-smoke'

## bench: Go benchmarks of every package
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./...

## fuzz: each fuzz target for FUZZTIME (default 20s), then fuzz-server
fuzz: fuzz-server
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## fuzz-server: hostile input against a running broker (tools/hostile):
## HOSTILE_SEEDS seeds of HOSTILE_INPUTS inputs each, ACKs of up to 100,000
## ids, an official Go client producing and consuming alongside; make test
## runs a short one (1,000 inputs, race detector on)
HOSTILE_INPUTS ?= 5000
HOSTILE_SEEDS  ?= 1
fuzz-server:
	MAGNETAR_HOSTILE_INPUTS=$(HOSTILE_INPUTS) MAGNETAR_HOSTILE_SEEDS=$(HOSTILE_SEEDS) MAGNETAR_HOSTILE_MAX_IDS=100000 \
		$(GO) test -count=1 -timeout 120m -run TestHostileInputAgainstBroker -v ./tools/hostile/

## lint: gofmt, go vet, staticcheck (installed from the module proxy if missing),
## and the layering rule (docs/layers_test.go: no import from a lower floor
## of ARCHITECTURE.md's Layers diagram to a higher one, internal/ included)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/staticcheck ./...
	$(GO) test -count=1 -run '^TestLayersNeverPointUp$$' ./docs/

## chromium: install Debian's chromium (the console's browser tests) if
## it is missing
chromium:
	bash scripts/chromium.sh install

## console: build the web console (broker/console/web, Preact + Vite,
## docs/console.md) into broker/console/dist, which the binary embeds;
## dist is committed, so a Go build needs no Node.js
CONSOLE_WEB := broker/console/web
console:
	cd $(CONSOLE_WEB) && npm ci --no-audit --no-fund && npm run build

## console-check: the committed dist is what the committed source and
## lockfile build (byte for byte), and the console's own unit tests pass
console-check:
	cd $(CONSOLE_WEB) && npm ci --no-audit --no-fund >/dev/null && npm test && npm run check

## console-screenshots: run the console's browser tests and keep their
## screenshots in docs/console/ (docs/console.md shows them)
console-screenshots: chromium zookeeper
	MAGNETAR_REQUIRE_BROWSER=1 MAGNETAR_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run 'TestConsole' ./cmd/magnetar/

## prometheus: install Debian's prometheus package (prometheus, promtool)
## if it is missing: tools/promcheck runs conf/prometheus/alerts.yml and
## the conf/grafana dashboards' queries in it against real processes
prometheus:
	bash scripts/prometheus.sh install

## zookeeper: install Debian's zookeeper package if it is missing
zookeeper:
	bash scripts/zookeeper.sh install

## etcd: install Debian's etcd-server package if etcd is missing
etcd:
	bash scripts/etcd.sh install

## nats: Debian's nats-server and a 2.10+ one in bin/ (sync_interval:
## always) for the NATS JetStream benchmark and its tests, and natscli's nats
## in bin/ (its `nats bench`, which bench-report runs beside natsperf)
nats:
	bash scripts/install-nats.sh >/dev/null

## pulsar-perf: the Go client's own perf tool, bin/pulsar-perf-go, which a
## compatibility test runs against a standalone
pulsar-perf:
	GO=$(GO) bash scripts/install-pulsar-perf.sh >/dev/null

## compat: the official Go client's own suites (pulsar-client-go at go.mod's
## version, built from the module cache) against bin/magnetar standalone
## with the client's own standalone.conf, one process per test (3 minutes
## each); docker tests are not run. SUITES=pulsar (the client's
## integration tests, about 40 minutes here: docs/compat/pulsar-client-go.md)
## and pulsaradmin (its admin library's 76 tests: docs/compat/pulsaradmin.md),
## both by default; RUN=regexp runs a subset and reports only to
## .compat/<suite>.md (logs: .compat/logs/<suite>)
SUITES ?= pulsar,pulsaradmin
compat: build
	$(GO) run ./tools/compat --magnetar $(BIN) --out $(CURDIR)/.compat --suites '$(SUITES)' --run '$(RUN)'

## generate: regenerate wire/pb from wire/proto. protoc itself comes from
## Debian's protobuf-compiler package (apt-get install protobuf-compiler,
## 3.21.12); protoc-gen-go is installed at the pinned version if missing.
generate:
	@$(GOBIN)/protoc-gen-go --version 2>/dev/null | grep -qx 'protoc-gen-go $(PROTOC_GEN_GO_VERSION)' || \
	  GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	protoc -I . --plugin=protoc-gen-go=$(GOBIN)/protoc-gen-go \
	  --go_out=. --go_opt=module=github.com/magnetar-io/magnetar wire/proto/pulsar_api.proto

## dist: the release tarball in dist/: the static binary, conf/ (broker,
## bookkeeper, proxy, standalone and client configuration files, systemd
## units) and the docs, version-stamped (docs/deploy.md installs it)
dist: build
	bash scripts/dist.sh $(BIN) $(VERSION) $(CURDIR)/dist

## standalone: build and run broker + bookie + embedded metadata in one process
standalone: build
	$(BIN) standalone

## perf-disk: measure this machine's disk through both io backends
perf-disk: build
	mkdir -p $(PERF_DIR)
	$(BIN) perf disk --dir $(PERF_DIR)

## perf-journal: the journal's group commit under closed-loop writers, with
## the disk's own limits measured beside it, through both io backends
perf-journal: build
	mkdir -p $(PERF_DIR)
	$(BIN) perf journal --dir $(PERF_DIR)

## perf-bookie: a bookie over loopback: adds and cache-hit reads with 1..64
## clients, a cold catch-up read after a restart, the disk's limits beside
perf-bookie: build
	mkdir -p $(PERF_DIR)
	$(BIN) perf bookie --dir $(PERF_DIR)

## perf-ledger: the ledger client over 3 in-process bookies on loopback:
## appends by quorum, entry size and writer count, read back and checked
perf-ledger: build
	mkdir -p $(PERF_DIR)
	$(BIN) perf ledger --dir $(PERF_DIR)

## perf-managedledger: managed ledgers on an in-process bookie under ./.perf
## (append + tailing reads, cache hit ratio, cold catch-up vs the disk)
perf-managedledger: build
	mkdir -p $(PERF_DIR)
	$(BIN) perf managedledger --dir $(PERF_DIR)

## bench-report: the benchmark suite, side by side with the machine's limits
## and NATS JetStream, in one run: writes benchmarks/report/REPORT.md, its
## charts and results.json (about 10 minutes on 2 cores; data under ./.perf;
## BENCH_FLAGS passes flags, e.g. BENCH_FLAGS='--duration 60s', or
## BENCH_FLAGS='--only tls,proxy,metadata,geo' for some sections)
bench-report: build zookeeper etcd nats
	$(GO) build -o bin/natsperf ./benchmarks/natsperf
	$(GO) run ./benchmarks/benchreport --magnetar $(BIN) --natsperf bin/natsperf --nats-server bin/nats-server \
		--natscli bin/nats --work $(PERF_DIR)/bench $(BENCH_FLAGS)

## bench-report-quick: the same scenarios with 3 s windows, into .perf/report-quick
bench-report-quick:
	$(MAKE) bench-report BENCH_FLAGS="--quick --out $(PERF_DIR)/report-quick $(BENCH_FLAGS)"

clean:
	rm -rf bin .perf dist
