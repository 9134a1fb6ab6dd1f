# dorisarm: build Apache Doris for ARM servers.
# `make demo` and `make test` do all set-up on a fresh machine (scripts/install-deps.sh).

GO      ?= go
BIN     := bin/dorisarm
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all deps build test vet fmt demo clean fuzz bench bench-scan bench-build bench-image e2e

all: build

deps:
	bash scripts/install-deps.sh

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/dorisarm

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }

# The test suite: real cross compilers, clang-16 and qemu-user (installed by deps).
test: deps vet
	$(GO) test -count=1 ./...

# The main job on the bundled sample (examples/minidoris, a small tree with
# Doris's build interface): validate the matrix, print the plan of every cell,
# build every target (cross compilers, patches, PGO+ThinLTO, smoke runs and
# the scan gate under qemu), rebuild (nothing to do), scan one build, write
# the release images to an OCI layout and inspect the multi-arch index, and
# show the scan catching a graviton3 build (SVE) offered to Kunpeng 920.
DEMO_OUT   ?= out/demo
DEMO_CACHE ?= .cache/demo
demo: deps build
	$(BIN) matrix
	$(BIN) plan --target all
	$(BIN) build --target all --out $(DEMO_OUT) --cache $(DEMO_CACHE)
	$(BIN) build --target all --out $(DEMO_OUT) --cache $(DEMO_CACHE)
	$(BIN) scan --target kunpeng920 --allow recipes/minidoris-scan-allow.yaml --format markdown $(DEMO_OUT)/2.1.8/kunpeng920 > $(DEMO_OUT)/scan-kunpeng920.md
	@echo "scan report: $(DEMO_OUT)/scan-kunpeng920.md"
	$(BIN) image build --build $(DEMO_OUT) --out oci:$(DEMO_OUT)/images --base scratch
	$(BIN) image inspect oci:$(DEMO_OUT)/images:doris-be:2.1.8
	@echo "== the graviton3 build (SVE) scanned for kunpeng920 must fail:"
	@$(BIN) scan --target kunpeng920 --allow recipes/minidoris-scan-allow.yaml $(DEMO_OUT)/2.1.8/graviton3 > $(DEMO_OUT)/scan-graviton3-as-kunpeng920.txt; \
	  rc=$$?; grep -E '^(be/|  ERROR|[0-9]+ files)' $(DEMO_OUT)/scan-graviton3-as-kunpeng920.txt; \
	  if [ $$rc -ne 1 ]; then echo "expected exit 1 (violations), got $$rc"; exit 1; fi; echo "exit 1, as it should"

# Benchmarks (numbers, not pass/fail): the classifier and the scanner.
bench: deps
	$(GO) test -run XXX -bench . -benchtime 5x ./internal/isa ./internal/scan

# dorisarm scan against llvm-objdump on real arm64 libraries (downloads to .cache/bench).
bench-scan: deps
	bash scripts/bench-scan.sh

# Cold build, no-op rebuild and one-patch rebuild of the sample for every arm64 target.
bench-build: deps
	bash scripts/bench-build.sh

# Build and publish the sample release to a real docker-registry: first
# publish, unchanged re-publish and a one-target change, in seconds and bytes.
bench-image: deps
	bash scripts/bench-image.sh

# The slow end-to-end suite: dorisarm's signatures checked by the real cosign
# CLI (built once into .cache/bin) against a local docker-registry.
e2e: deps
	bash scripts/e2e-cosign.sh

# Each fuzz target for a bounded time (FUZZTIME, default 20s).
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./internal/datafile
	$(GO) test -run XXX -fuzz FuzzParseDiff -fuzztime $(FUZZTIME) ./internal/patch
	$(GO) test -run XXX -fuzz FuzzClassify -fuzztime $(FUZZTIME) ./internal/isa
	$(GO) test -run XXX -fuzz FuzzAnalyzeELF -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzReadAr -fuzztime $(FUZZTIME) ./internal/scan
	$(GO) test -run XXX -fuzz FuzzWalkMemory -fuzztime $(FUZZTIME) ./internal/scan

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin out .cache/demo
