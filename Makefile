# AceMQ for Go: the developer's and CI's commands.
#
#   make test          installs/starts RabbitMQ, PostgreSQL and MariaDB if needed,
#                      runs every test on RabbitMQ 3.10 and, beside it,
#                      the second pass (`make test-rabbitmq4`), the cluster
#                      drills and the install check (`make installcheck`)
#   make test-rabbitmq4  the second pass: the broker-facing packages, the
#                      demo and the cluster drill on RabbitMQ $(RABBITMQ4)
#                      (4.3: Debian forky's, in a chroot, every deprecated
#                      feature denied)
#   make test RABBITMQ4=4.0  the same with RabbitMQ 4.0 (Debian 13's) as the
#                      second pass's broker (and the partition drill's)
#   make test-short    tests without services (service tests skip)
#   make lint          gofmt, go vet, staticcheck (every module)
#   make tidy          go mod tidy in every module (scripts/modules.sh)
#   make installcheck  install every module from a made-up release through a
#                      file:// module proxy, as a user would (make test runs it)
#   make newcomer      copy every whole program of the README and docs/ into a
#                      fresh module, build it against such a release and run it
#                      (make test runs its short version, the README's program)
#   make pictures      draw docs/pictures/*.svg again from their .pic sources
#   make release VERSION=vX.Y.Z  tag every module at one version (scripts/release.sh)
#   make bench         benchmarks
#   make fuzz          every fuzz target in the module for FUZZTIME each (default
#                      60s); `make test` runs their seed corpora
#   make services-up   start the private RabbitMQ nodes (3.10 and $(RABBITMQ4)),
#                      PostgreSQL cluster and MariaDB server; install
#                      chromium for the console's browser tests
#   make services-down stop them
#   make drill-cluster the cluster drill: a 3-node RabbitMQ cluster of its own
#                      (in $(CLUSTER_STATE_DIR)), a node lost mid-flight
#   make drill-partition  the partition drill on both broker versions: three
#                      nodes in network namespaces, the network cut under
#                      load, nothing confirmed lost (drill-partition-short:
#                      every fault once)
#   make drill-NAME    one reliability drill, full length (crash, restart,
#                      alarm, soak, hostile, stall) against DRILL_URL (default the
#                      private node); `make drills` runs them all
#   make outbox-crash  the outbox crash test at length (relay processes
#                      SIGKILLed and SIGSTOPped, $(OUTBOX_CRASH_ROUNDS) rounds per database)
#   make bench-outbox  the outbox relay benchmark (bench/outbox)
#   make schedule-restart  the scheduler through a broker restart with the
#                      issue's 0.5 s-70 s batch; make schedule-lateness
#                      measures docs/performance.md's lateness table again
#
# Services keep their state in $(ACEMQ_STATE_DIR) (default .tmp/); they stay
# up between runs (start is idempotent) until `make services-down`.
#
# RABBITMQ4 picks the RabbitMQ 4 of the second pass: 4.3 (default; Debian
# forky's, scripts/rabbitmq43.sh, its chroot in .tmp/forky or
# $ACEMQ_FORKY_ROOT) or 4.0 (Debian 13's, scripts/rabbitmq4.sh, its chroot in
# .tmp/debian13 or $ACEMQ_DEBIAN13_ROOT).
RABBITMQ4 ?= 4.3
RABBITMQ4_SCRIPT := $(if $(filter 4.0 4,$(RABBITMQ4)),rabbitmq4,$(if $(filter 4.3,$(RABBITMQ4)),rabbitmq43,$(error RABBITMQ4 is '$(RABBITMQ4)'; it wants 4.3 or 4.0)))

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

GO ?= go
ACEMQ_STATE_DIR ?= $(CURDIR)/.tmp
export ACEMQ_STATE_DIR
TEST_TIMEOUT ?= 30m

# A race-built program that exits 0 first sleeps a second (the race
# detector's atexit_sleep_ms, default 1000), in which goroutines still
# running after main returned may yet hit a race. Everything `make test`
# runs is race-built: each test binary, and the programs tests start (the
# acemq command alone over 200 times in cmd/acemq's tests, every example),
# so that second was most of some packages' time (cmd/acemq: 324 s with it,
# 38 s without, 2026-12-04). A race seen before the exit is reported as
# ever and still makes the program exit 66; a GORACE of your own is kept
# (its options come later, so they win).
export GORACE := $(strip atexit_sleep_ms=0 $(GORACE))
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TESTFILTER := $(ACEMQ_STATE_DIR)/bin/testfilter

# The repository is several Go modules joined by go.work (the root is the
# library; a part with a heavy dependency is a module of its own, so it never
# reaches the module graph of a user who does not import it). `./...` stops
# at a nested go.mod, so every target that means "the whole repository" names
# each module's tree: PKGS is ./... ./actuator/... ./cmd/acemq/... and so on.
# bench/ is in the workspace but, as before the split, only its own targets
# run it (bench-outbox; cd bench && go run .).
MODULES := $(shell scripts/modules.sh list)
PKGS := $(foreach m,$(filter-out bench,$(MODULES)),$(if $(filter .,$(m)),./...,./$(m)/...))

# The SQL drivers reach the tests through an overlay (scripts/sqldrivers.sh):
# no published module lists a driver for its tests, so none reaches the
# module graph of a user who did not choose it (docs/installing.md).
SQLDRIVERS = -overlay "$$(scripts/sqldrivers.sh)"

# The env files written by the service scripts (KEY=value lines).
SERVICE_ENV := set -a; . "$(ACEMQ_STATE_DIR)/rabbitmq/env"; . "$(ACEMQ_STATE_DIR)/postgres/env"; . "$(ACEMQ_STATE_DIR)/mariadb/env"; . "$(ACEMQ_STATE_DIR)/chromium/env"; set +a

.PHONY: drill-partition drill-partition-short installcheck newcomer pictures release test test-rabbitmq4 warm pass-rabbitmq3 pass-rabbitmq4 pass-partition pass-clusters test-short lint tidy bench services-up services-down drill-cluster fuzz outbox-crash bench-outbox schedule-restart schedule-lateness drills $(addprefix drill-,$(DRILLS))

services-up:
	@scripts/rabbitmq.sh start
	@scripts/$(RABBITMQ4_SCRIPT).sh start
	@scripts/postgres.sh start
	@scripts/mariadb.sh start
	@scripts/chromium.sh start

services-down:
	@scripts/rabbitmq.sh stop
	@scripts/rabbitmq4.sh stop
	@scripts/rabbitmq43.sh stop
	@scripts/postgres.sh stop
	@scripts/mariadb.sh stop

# `go test -json` goes through internal/tools/testfilter, which prints what
# plain `go test` prints (failing tests' output, per-package ok/FAIL lines)
# and fails when any test was skipped with a message naming an ACEMQ_TEST_
# variable, i.e. a service test that did not run. testenv already fails such
# tests under ACEMQ_REQUIRE_SERVICES=1; the filter catches tests that skip on
# their own. pipefail makes go test's own failure fail the target too.
#
# `make test` in three steps:
# 1. the services install and start while `warm` compiles every test binary
#    into the build cache: installing is network
#    and disk, compiling is CPU, and `go test -p 1` below would otherwise
#    compile one package at a time;
# 2. the demo on memory://;
# 3. three lanes side by side (pass-rabbitmq3: everything on 3.10;
#    pass-rabbitmq4: the cluster drill, then the broker-facing packages on
#    $(RABBITMQ4); pass-clusters: the partition drill's short run on both
#    versions, then the cluster drill on 3.10, then the install check and
#    the newcomer test's short version). Each
#    prints its output whole when it ends (make's --output-sync) and names
#    the RabbitMQ version it ran (the env file's ACEMQ_TEST_RABBITMQ_VERSION).
#    The 4.x pass uses
#    the second PostgreSQL database (LISTEN/NOTIFY is per database);
#    MariaDB tests make a database of their own each.
# -p 1 inside a pass: the engine's RabbitMQ tests force-close every
# connection, restart the node and raise memory alarms, which would break
# another package's broker tests on the same node at the same time.
#
# Everything in `make test` is built with -race (GOFLAGS), the acemq command
# the scripts run included, so each package compiles once; only the
# allocation promises run without it.
test:
	@GOFLAGS=-race $(MAKE) --no-print-directory -j2 --output-sync=target services-up warm
	@$(GO) build -race -o "$(TESTFILTER)" ./internal/tools/testfilter
	@$(GO) build -race -o "$(DRILL_BIN)" ./cmd/acemq
	@# The demo is also a smoke test: it exits non-zero unless every number
	@# is what the flow implies (on each broker in its pass).
	@echo "demo on memory://"; "$(DRILL_BIN)" demo | tail -1
	@GOFLAGS=-race $(MAKE) --no-print-directory -j3 --output-sync=target pass-rabbitmq3 pass-rabbitmq4 pass-clusters

# warm: compile what `make test` runs, into the build cache (test binaries
# are cached too). The acemq command first, holding the lock
# scripts/rabbitmq.sh takes to run `go run ./cmd/acemq certs` (two go
# commands compiling the same packages at once would each do all the work).
# Failures here are ignored: the passes report them.
warm:
	@mkdir -p "$(CURDIR)/.tmp"
	@flock -w 900 "$(CURDIR)/.tmp/cli.lock" $(GO) build -race -o "$(DRILL_BIN)" ./cmd/acemq || true
	@$(GO) build -race -o "$(TESTFILTER)" ./internal/tools/testfilter || true
	@$(GO) test $(SQLDRIVERS) -race -count=1 -run '^$$' -exec /bin/true $(PKGS) >/dev/null 2>&1 || true
	@$(GO) test -tags drill -race -count=1 -run '^$$' -exec /bin/true . ./cmd/acemq ./cmd/acemq/internal/drill >/dev/null 2>&1 || true
	@GOFLAGS= $(GO) test -count=1 -run '^$$' -exec /bin/true . >/dev/null 2>&1 || true
	@echo "build cache warm"

# The first pass, on RabbitMQ 3.10 (the host's Debian 12 package), with
# -race: the demo with PostgreSQL, every package, the allocation promises
# (its cluster drill runs in pass-clusters).
pass-rabbitmq3:
	@$(SERVICE_ENV); echo "demo on RabbitMQ $$ACEMQ_TEST_RABBITMQ_VERSION ($$ACEMQ_TEST_AMQP_URL) with PostgreSQL"; "$(DRILL_BIN)" demo --url "$$ACEMQ_TEST_AMQP_URL" --db "$$ACEMQ_TEST_POSTGRES_URL" | tail -1
	@$(SERVICE_ENV); export ACEMQ_REQUIRE_SERVICES=1; \
	$(GO) test $(SQLDRIVERS) -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) -json $(PKGS) | "$(TESTFILTER)" -label "RabbitMQ $$ACEMQ_TEST_RABBITMQ_VERSION"
	@# The allocation promises (issue 16) hold without -race only: the race
	@# detector makes sync.Pool drop items at random.
	GOFLAGS= $(GO) test -count=1 -run '^TestAllocs' .

# The third lane of `make test`, beside the two passes: the partition
# drill's short run on both versions (its publishers paced, so that it
# shares the machine), then the cluster drill on 3.10 (three nodes of their
# own, the connected node stopped mid-flight, nothing confirmed may go
# missing; the 4.x pass runs it on its version), then the install check and
# the newcomer test's short version (no broker).
pass-clusters:
	@$(MAKE) --no-print-directory pass-partition PART_ENV="$(PARTITION_TEST_ENV)" PART_TIMEOUT=6m
	@$(MAKE) --no-print-directory drill-cluster
	@$(MAKE) --no-print-directory installcheck
	@scripts/newcomer.sh --short

# Installing as a user would (scripts/installcheck.sh, no broker; about a
# minute): a made-up release cut by scripts/release.sh in a temporary clone,
# served by a file:// module proxy built from its tags; `go get` of every
# module, README.md's install lines, a program importing each module, the
# installed command's demo on memory://. `make test` runs it in its third
# lane.
installcheck:
	@scripts/installcheck.sh

# The newcomer test (scripts/newcomer.sh, no broker, no network beyond the
# module proxy): every whole program the README and docs/ show, copied from
# its page into a fresh module outside the tree, built against a made-up
# release of the working tree and run on memory://. 35-50 s of CPU, 2-5
# minutes on a busy two-core machine (2026-12-04), so `make test` runs
# its short version in its third lane, after the install check: the README's
# program only (`scripts/newcomer.sh --short`); every page's program is also
# compared with its file by internal/docscheck and built and run by the
# examples module's tests. Run `make newcomer` after changing a page's program.
newcomer:
	@scripts/newcomer.sh

# The manual's pictures: docs/pictures/NAME.svg from NAME.pic
# (internal/tools/pictures; its test fails while one is stale).
pictures:
	@$(GO) run ./internal/tools/pictures

# A release of every module at once, with one version
# (docs/installing.md#how-a-release-is-cut): go.mod files, CHANGELOG.md and
# the install lines rewritten, one commit, one tag per module. Nothing is
# pushed.
release:
	@test -n "$(VERSION)" || { echo "make release: set VERSION, e.g. make release VERSION=v0.10.0" >&2; exit 1; }
	@scripts/release.sh "$(VERSION)"

# The second pass, on RabbitMQ $(RABBITMQ4) (scripts/rabbitmq43.sh: Debian
# forky's rabbitmq-server in a chroot; RABBITMQ4=4.0, scripts/rabbitmq4.sh:
# Debian 13's; every deprecated feature denied), with -race: the demo, the
# cluster drill on three nodes of that version, and every package whose tests reach a broker
# (its _test.go files name the test node through testenv or brokertest),
# TLS, mutual TLS and the stream port included. docs/support.md lists what
# differs between the versions. `make test-rabbitmq4` runs it alone.
RABBITMQ4_ENV := set -a; . "$(ACEMQ_STATE_DIR)/$(RABBITMQ4_SCRIPT)/env"; . "$(ACEMQ_STATE_DIR)/postgres/env"; . "$(ACEMQ_STATE_DIR)/mariadb/env"; . "$(ACEMQ_STATE_DIR)/chromium/env"; ACEMQ_TEST_POSTGRES_URL="$$ACEMQ_TEST_POSTGRES_URL_2"; set +a
BROKER_PKGS = $$(git grep -l -E 'testenv\.(AMQPURL|AMQPSURL|RabbitCtl|ManagementURL)|brokertest\.' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|; s|^\./\.$$|.|')

test-rabbitmq4: services-up
	@$(GO) build -race -o "$(TESTFILTER)" ./internal/tools/testfilter
	@$(GO) build -race -o "$(DRILL_BIN)" ./cmd/acemq
	@$(MAKE) --no-print-directory pass-rabbitmq4

pass-rabbitmq4:
	@$(RABBITMQ4_ENV); echo "demo on RabbitMQ $$ACEMQ_TEST_RABBITMQ_VERSION ($$ACEMQ_TEST_AMQP_URL) with PostgreSQL"; "$(DRILL_BIN)" demo --url "$$ACEMQ_TEST_AMQP_URL" --db "$$ACEMQ_TEST_POSTGRES_URL" | tail -1
	@$(MAKE) --no-print-directory drill-cluster CLUSTER_RABBITMQ=$(RABBITMQ4_SCRIPT)
	@$(RABBITMQ4_ENV); export ACEMQ_REQUIRE_SERVICES=1; \
	$(GO) test $(SQLDRIVERS) -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) -json $(BROKER_PKGS) | "$(TESTFILTER)" -label "RabbitMQ $$ACEMQ_TEST_RABBITMQ_VERSION"

test-short:
	$(GO) test $(SQLDRIVERS) $(PKGS)

lint:
	@# Directories Go ignores (.tmp holds the RabbitMQ 4 chroot) are skipped.
	@unformatted="$$(find . -name '.?*' -prune -o -name '*.go' -print | xargs gofmt -l)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting (run gofmt -w on them):"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags drill .
	@# The root module on its own, without the workspace: what a user who
	@# requires only github.com/acemq-go/acemq builds.
	GOWORK=off $(GO) vet ./...
	$(GO) run $(STATICCHECK) $(PKGS)

tidy:
	scripts/modules.sh tidy

bench:
	$(GO) test $(SQLDRIVERS) -run '^$$' -bench . -benchmem $(PKGS)

# Every fuzz target for FUZZTIME each (default 60s, the issue's figure;
# scripts/fuzz.sh alone defaults to 30s); `make test` runs the seed corpora
# only. FUZZ_PKGS narrows it: make fuzz FUZZ_PKGS=./codec/...
FUZZTIME ?= 60s
export FUZZTIME
FUZZ_PKGS ?= $(PKGS)
fuzz:
	scripts/fuzz.sh $(FUZZ_PKGS)

# The cluster drill (behaviour §1.3, §4.1, §9): three RabbitMQ nodes on
# loopback, joined, in a state directory of their own so they never clash
# with the single node `make test` uses; the drill stops the node its Conn is
# connected to while publishing and consuming, then (cmd/acemq's
# drill_cluster_test.go) the node holding a .dlq, in each layout, and asks a
# surviving node's acemq dlq list, console and acemq dlq replay for it. The cluster is stopped
# afterwards whether the drill passed or not.
CLUSTER_STATE_DIR ?= $(CURDIR)/.tmp-cluster
DRILL_TIMEOUT ?= 10m
# rabbitmq43 runs the drill on RabbitMQ 4.3 nodes (scripts/rabbitmq43.sh),
# rabbitmq4 on RabbitMQ 4.0 nodes (scripts/rabbitmq4.sh).
CLUSTER_RABBITMQ ?= rabbitmq
DRILL_RACE ?= -race

drill-cluster:
	@export ACEMQ_STATE_DIR="$(CLUSTER_STATE_DIR)"; \
	trap 'scripts/$(CLUSTER_RABBITMQ).sh stop' EXIT; \
	scripts/$(CLUSTER_RABBITMQ).sh start --nodes 3; \
	set -a; . "$(CLUSTER_STATE_DIR)/$(CLUSTER_RABBITMQ)/env"; set +a; \
	echo "cluster drill on RabbitMQ $$ACEMQ_TEST_RABBITMQ_VERSION"; \
	$(GO) test -tags drill $(DRILL_RACE) -count=1 -timeout $(DRILL_TIMEOUT) -run '^TestCluster' -v . | grep -E '^(=== RUN|--- |    drill_cluster_test.go|ok|FAIL|PASS)' || exit 1; \
	$(GO) test -tags drill -count=1 -timeout $(DRILL_TIMEOUT) -run '^TestCluster' -v ./cmd/acemq/ | grep -E '^(=== RUN|--- |    drill_cluster_test.go|ok|FAIL|PASS)' || exit 1

# The partition drill (cmd/acemq/internal/drill/partition.go): three RabbitMQ nodes in
# network namespaces of their own joined by a bridge (scripts/netcluster.sh,
# root only), the network between them cut at random moments (isolate the
# client's node or the quorum leader, cut a node from everything, a bridge,
# flapping, a lossy link) while two clients publish and consume; nothing
# confirmed on a quorum queue may be lost. One verdict line per broker
# version. PARTITION_SEED replays a run's choices; drill-partition is the
# full run (every fault PARTITION_ROUNDS times, longer holds and a minute of
# flapping), drill-partition-short every fault once.
PARTITION_VERSIONS ?= 3 $(RABBITMQ4)
PARTITION_ROUNDS ?= 3
PARTITION_SEED ?=

# `make test` runs pass-partition (in its third lane): every fault
# once, cuts of 1.5-3 s (shorter than net_ticktime, 10 s: the client across
# short cuts, about a minute a version), 8 s of flapping, each publisher
# pausing 10 ms before each send. Real partitions (a cut past net_ticktime)
# are the full run's (drill-partition): after one, the broker itself can
# lose confirmed classic and stream messages, hang a paused node's restart
# (3.10) or refuse the operator's start_app (4.0.5), each in
# docs/operations.md, none of them the client's doing.
PART_TIMEOUT ?= 60m
PARTITION_TEST_ENV := ACEMQ_PART_HOLD=3s ACEMQ_PART_FLAP=8s ACEMQ_PART_PAUSE=10ms

drill-partition: PART_ENV := ACEMQ_PART_ROUNDS=$(PARTITION_ROUNDS) ACEMQ_PART_HOLD=20s ACEMQ_PART_FLAP=60s ACEMQ_PART_WAIT=15s
drill-partition-short: PART_ENV :=
drill-partition drill-partition-short: services-up
	@$(MAKE) --no-print-directory pass-partition PART_ENV="$(PART_ENV)"

pass-partition:
	@for v in $(PARTITION_VERSIONS); do \
		( trap 'scripts/netcluster.sh down' EXIT; \
		scripts/netcluster.sh up --version $$v >/dev/null; \
		set -a; . "$(ACEMQ_STATE_DIR)/netcluster/env"; set +a; \
		export $(PART_ENV) ACEMQ_PART_SEED="$(PARTITION_SEED)"; \
		$(GO) test -tags drill -count=1 -timeout $(PART_TIMEOUT) -run '^TestPartition$$' -v ./cmd/acemq/internal/drill/ | grep -E '^(drill partition|partition:|--- |ok|FAIL)' ) || exit 1; \
	done

# The reliability drills (cmd/acemq/internal/drill, `acemq drill NAME`), full length,
# against DRILL_URL (default: the private node `make services-up` starts)
# with DRILL_CTL running rabbitmqctl against it. Each prints one verdict line
# and fails the target when the drill failed. `make test` runs a short
# version of each as the cmd/acemq/internal/drill tests.
DRILLS := crash restart alarm soak hostile stall
DRILL_URL ?=
DRILL_CTL ?=
DRILL_DB ?=
DRILL_ARGS ?=
DRILL_BIN := $(ACEMQ_STATE_DIR)/bin/acemq

$(addprefix drill-,$(DRILLS)): drill-%: services-up
	@$(GO) build -o "$(DRILL_BIN)" ./cmd/acemq
	@$(SERVICE_ENV); url="$(DRILL_URL)"; ctl="$(DRILL_CTL)"; db="$(DRILL_DB)"; set --; \
	case $* in restart|alarm|stall) set -- --ctl "$${ctl:-$$ACEMQ_TEST_RABBITMQCTL}";; \
	soak) set -- --ctl "$${ctl:-$$ACEMQ_TEST_RABBITMQCTL}"; [ -n "$$url" ] || set -- "$$@" --management "$$ACEMQ_TEST_MANAGEMENT_URL";; crash) set -- --db "$${db:-$$ACEMQ_TEST_POSTGRES_URL}";; esac; \
	"$(DRILL_BIN)" drill $* --url "$${url:-$$ACEMQ_TEST_AMQP_URL}" "$$@" $(DRILL_ARGS)

# Every drill, meant to fit in 15 minutes on two cores. The single-node
# drills run in turn (restart and alarm stop and alarm the private node the
# others use; a failure stops the run); then the soak (240 reconnects at its
# own pace, --every 1.5s: about 6 minutes, mostly waiting out recoveries)
# runs beside the cluster drill, whose three nodes are its own; each one's
# output is printed whole when it ends.
drills: drill-crash drill-hostile drill-alarm drill-restart drill-stall
	@$(MAKE) --no-print-directory -j2 --output-sync=target drill-soak drill-cluster

# The outbox crash test (outbox/crash_test.go) at length: make test runs it
# with one SIGKILL and one SIGSTOP round per database; this runs
# $(OUTBOX_CRASH_ROUNDS) rounds (kill and stop in turn) on PostgreSQL and
# MariaDB and prints the time from each to the takeover.
OUTBOX_CRASH_ROUNDS ?= 20

outbox-crash: services-up
	@$(SERVICE_ENV); export ACEMQ_REQUIRE_SERVICES=1 ACEMQ_OUTBOX_CRASH_ROUNDS=$(OUTBOX_CRASH_ROUNDS); \
	$(GO) test $(SQLDRIVERS) -count=1 -timeout 30m -run '^TestCrashedRelays' -v ./outbox | grep -E '^(=== RUN|--- |    crash_test.go|ok|FAIL|PASS)' || exit 1

# The scheduler through a broker restart with the issue's batch (delays
# 0.5 s to 70 s, the node restarted 10 s in; about two minutes): make test
# runs a short batch (0.5 s to 15 s). And the lateness table in docs/performance.md
# (1 s to 2 min delays, 5 messages each) measured again on the private node.
schedule-restart: services-up
	@$(SERVICE_ENV); export ACEMQ_REQUIRE_SERVICES=1; \
	$(GO) test -count=1 -timeout 10m -run '^TestTheSchedulerDeliversAMixedBatchThroughABrokerRestart$$' -v ./schedule -args -schedule.full | grep -E '^(=== RUN|--- |    restart_test.go|ok|FAIL|PASS)' || exit 1

schedule-lateness: services-up
	@$(SERVICE_ENV); $(GO) run ./schedule/internal/lateness -url "$$ACEMQ_TEST_AMQP_URL"

# The outbox relay benchmark: records/s from a filled outbox on PostgreSQL
# and SQLite beside the broker's raw pipelined rate, and the lag
# distribution at 1,000 records/s for a minute.
bench-outbox: services-up
	@$(SERVICE_ENV); cd bench && $(GO) run ./outbox -url "$$ACEMQ_TEST_AMQP_URL" -pg "$$ACEMQ_TEST_POSTGRES_URL"
