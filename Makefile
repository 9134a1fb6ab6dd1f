# dorisarm: build Apache Doris for ARM servers.
# `make demo` and `make test` do all set-up on a fresh machine (scripts/install-deps.sh).

GO      ?= go
BIN     := bin/dorisarm
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all deps build generate test test-short test-race test-ci-module vet lint fmt demo clean fuzz bench bench-scan bench-build bench-image bench-real bench-real-heavy bench-cache e2e e2e-runtime scan-corpus test-real-be be-slice

all: build

deps:
	bash scripts/install-deps.sh

# A static binary (no cgo): it starts ~1 ms sooner than the dynamic one net
# and os/user make (no ld.so, no libc, no cgo threads; issue 14). The pure-Go
# resolver and /etc/passwd look-ups are all dorisarm needs of them.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/dorisarm

# Rewrites derived files: internal/datafile/snapshots.bin, the parsed YAML of
# matrix.yaml, recipes, internal/isa's and internal/flagrec's data (TestSnapshotsFresh
# checks it). internal/flagrec/cpus.yaml itself comes from the installed
# compilers: go run ./internal/flagrec/gencpus (TestCPUTableFresh checks it).
generate:
	$(GO) generate ./internal/datafile

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }

# staticcheck and gocyclo -over 40 (pinned, installed by deps into
# .cache/bin) must print nothing; TestFunctionLength bounds lengths.
lint: deps
	.cache/bin/staticcheck ./...
	@out=$$(.cache/bin/gocyclo -over 40 -ignore '_test\.go$$|/testdata/|^\.cache/' .); test -z "$$out" || { echo "$$out"; echo "split these functions: gocyclo -over 40"; exit 1; }

# The C++ runtime (eight minutes cold) is built once into this cache by the
# first test that needs it, and copied into each test's own cache from there
# (cmd/dorisarm/seed_test.go); make test and make e2e share it.
RUNTIME_CACHE ?= $(CURDIR)/.cache/test-runtimes
export DORISARM_RUNTIME_CACHE = $(RUNTIME_CACHE)

# The test suite: real cross compilers, clang-16 and qemu-user (installed by deps).
test: deps vet lint
	$(GO) test -count=1 -timeout 45m ./...

# The fast tier: in-process tests with seams (no compilers, registries in
# memory), about a minute. make test runs these and the slow ones.
test-short: vet
	$(GO) test -count=1 -short ./...

# The fast tier of the packages that run work at once, under the race
# detector: the runner starts steps, pulls and cells at once (a map the
# toolchain step wrote while fetch steps read it ended builds), the
# registry cache and client push and pull in parallel. cmd/dorisarm's
# tests run the dorisarm binary, which the detector does not see. A few
# minutes; .ci/run runs it.
RACE_PKGS ?= ./internal/build/... ./internal/cacheoci/... ./internal/registry/... ./internal/image/... ./internal/promote/... ./internal/sign/...
test-race: vet
	$(GO) test -count=1 -race -short $(RACE_PKGS)

# The Dagger module (ci/) against the real SDK at dagger.json's engineVersion,
# from the Go module proxy (no engine needed): ci/go.mod resolved the way
# Dagger's Go code generator resolves it, then ci/main.go built and vetted.
# Skips, saying so, when the proxy is unreachable. About 20 s warm.
test-ci-module:
	DORISARM_CI_MODULE=1 $(GO) test -count=1 -v -run 'TestDaggerModule' ./cmd/dorisarm

# The main job on the bundled sample (examples/minidoris, a small tree with
# Doris's build interface), start to end: build every target (cross
# compilers, patches, PGO+ThinLTO, smoke runs under qemu, the scan gate),
# rebuild (nothing to do), scan, publish to a docker-registry the demo runs
# on loopback, sign and attest with a throw-away key, verify, promote from
# staging to release, and write the release report. See scripts/demo.sh.
DEMO_OUT   ?= out/demo
DEMO_CACHE ?= .cache/demo
demo: deps build
	DEMO_OUT=$(DEMO_OUT) DEMO_CACHE=$(DEMO_CACHE) bash scripts/demo.sh

# Benchmarks (numbers, not pass/fail): the classifier and the scanner.
bench: deps
	$(GO) test -run XXX -bench . -benchtime 5x ./internal/isa ./internal/scan ./internal/flagrec ./internal/plan ./internal/simulate

# dorisarm scan (process start included, --target kunpeng920, from an empty
# directory) against llvm-objdump-16 -d on real arm64 libraries (librocksdb,
# libLLVM-16, libz3, libcrypto; downloads to .cache/bench), and dorisarm
# version start-up, in one table.
bench-scan: deps
	bash scripts/bench-scan.sh

# dorisarm scan's false alarms and misses against llvm-objdump-16 on real
# Debian 12 arm64 packages (scripts/corpus-packages.txt, downloaded to
# .cache/corpus), for generic-armv8; and libcrypto's SVE count both ways.
scan-corpus: deps
	bash scripts/falsealarm.sh

# Cold build, no-op rebuild and one-patch rebuild of the sample for every arm64 target.
bench-build: deps
	bash scripts/bench-build.sh

# Real Apache Doris third-party packages (snappy, lz4, bzip2, bitshuffle from
# ../shared/corpus) built with Doris's own scripts for each target: cold and
# no-op times.
bench-real: deps
	bash scripts/bench-real.sh

# The packages a BE links (OpenSSL, jemalloc, gflags, glog, protobuf,
# leveldb, brpc, CRoaring) from the corpus mirror plus its substitutes, for
# kunpeng920, graviton3 and x86_64 (native): cold and no-op times and the
# cross/native ratio (~40 min on 2 cores).
bench-real-heavy: deps
	HEAVY=1 bash scripts/bench-real.sh

# Part of the real Doris BE, built through dorisarm (configure + a few units,
# twice: ~6 min on 2 cores). Needs a Doris 2.1 tree with its BE source and an
# aarch64 third-party install, which are not in the repository:
#   make test-real-be DORISARM_DORIS_BE_SRC=~/src/doris DORISARM_THIRDPARTY_BASE=~/tp/installed JAVA_HOME=/usr/lib/jvm/...
test-real-be: deps
	DORISARM_DORIS_BE_SRC=$(DORISARM_DORIS_BE_SRC) DORISARM_THIRDPARTY_BASE=$(DORISARM_THIRDPARTY_BASE) \
		$(GO) test -count=1 -timeout 40m -run 'TestRealBE' -v ./cmd/dorisarm/

# A slice of the real Doris BE (2.1 or 3.0) for ARM targets, from a base
# scripts/be-slice-base.sh assembles (not the release path), read back at the
# target's flags (docs/maintainers.md "A BE slice"):
#   make be-slice DORIS_SRC=~/src/doris [TARGET=kunpeng920,graviton3] [BE_SLICE_WORK=be-slice-work] [MIRROR=...]
DORIS_SRC ?=
TARGET ?= kunpeng920,graviton3
BE_SLICE_WORK ?= be-slice-work
be-slice:
	@test -n "$(DORIS_SRC)" || { echo "make be-slice: set DORIS_SRC to a Doris tree with its BE source and submodules" >&2; exit 2; }
	bash scripts/be-slice.sh --doris $(DORIS_SRC) --target $(TARGET) --work $(BE_SLICE_WORK) $(if $(MIRROR),--mirror $(MIRROR)) $(if $(DORISARM_CACHE),--cache $(DORISARM_CACHE))

# The registry-backed step cache: cold build with --cache-to vs a build on
# an empty cache directory with --cache-from, per target.
bench-cache: deps
	bash scripts/bench-cache.sh

# Build and publish the sample release to a real docker-registry: first
# publish, unchanged re-publish and a one-target change, in seconds and bytes.
bench-image: deps
	bash scripts/bench-image.sh

# The slow end-to-end suite (the registry cache and link-chain tests,
# TestRegistryCache and TestHostileArchives among them, run in make test): dorisarm's signatures checked by the real cosign
# CLIs (v2.6.2 and v3.1.3, built once into .cache/bin) against a local
# docker-registry and a fake Sigstore, and the other way round.
KILL_MOMENTS ?= 30
e2e: deps
	bash scripts/e2e-cosign.sh
	@echo "== both signature formats with cosign v2.6.2 (legacy, --new-bundle-format) and v3.1.3, key-based and keyless, the transparency log checked"
	bash scripts/e2e-bundles.sh
	@echo "== a hostile tree's package script and BE build try every escape from their sandbox, as root and as nobody"
	DORISARM_E2E=1 $(GO) test -count=1 -timeout 30m -v -run '^TestHostileTree$$' ./cmd/dorisarm
	@echo "== builds killed with SIGKILL at $(KILL_MOMENTS) random moments: the cache, the processes, the next build"
	DORISARM_E2E=1 DORISARM_KILL_MOMENTS=$(KILL_MOMENTS) $(GO) test -count=1 -timeout 60m -v -run '^TestKilledBuilds$$' ./cmd/dorisarm
	@echo "== a real package (snappy of the 2.1.7 tree) built with two caches at two paths: the same bytes"
	DORISARM_E2E=1 $(GO) test -count=1 -timeout 30m -v -run '^TestRealPackageReproducible$$' ./cmd/dorisarm

# The C++ runtime from scratch (about 9 minutes on 2 cores, more than CI's
# budget allows beside the rest): GCC 12's libstdc++ built from its pinned
# source for aarch64 and x86_64 at glibc 2.17, each once, and a C++20 probe
# built against it for four targets, checked with readelf and run under qemu.
e2e-runtime: deps
	DORISARM_RUNTIME_CACHE= DORISARM_E2E=1 $(GO) test -count=1 -timeout 60m -v -run '^TestCXXRuntime$$' ./cmd/dorisarm

# Each fuzz target for a bounded time (FUZZTIME, default 20s).
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./internal/datafile
	$(GO) test -run XXX -fuzz FuzzParseDiff -fuzztime $(FUZZTIME) ./internal/patch
	$(GO) test -run XXX -fuzz FuzzClassify -fuzztime $(FUZZTIME) ./internal/isa
	$(GO) test -run XXX -fuzz FuzzAnalyzeELF -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzReadAr -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzWalkMemory -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzOCINode -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzGuards -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzBitcodeTriple -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzValidate -fuzztime $(FUZZTIME) ./internal/pgo

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin out .cache/demo
