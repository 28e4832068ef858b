# avfs build, test and benchmark entry points. `make test` is what CI runs.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
PKGS    := ./...

.PHONY: all build test test-go test-rego lint bench deps clean

all: build

build: bin/avfs

bin/avfs: $(shell find . -name '*.go' -not -path './bin/*' 2>/dev/null) go.mod go.sum $(shell find policies -type f 2>/dev/null)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/avfs ./cmd/avfs

# deps installs the system packages the tests use (FUSE tools, sqlite3, git).
# It does nothing when they are present; CI calls it through .ci/run.
deps:
	@missing=""; \
	command -v fusermount3 >/dev/null || missing="$$missing fuse3"; \
	command -v sqlite3 >/dev/null || missing="$$missing sqlite3"; \
	command -v git >/dev/null || missing="$$missing git"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

test: lint test-rego test-go

test-go: build
	AVFS_BIN=$(CURDIR)/bin/avfs $(GO) test -race -count=1 -timeout 40m $(PKGS)

test-rego:
	@if [ -n "$$(ls policies/*.rego 2>/dev/null)" ]; then \
		$(GO) tool opa check --strict policies tests/rego && \
		test -z "$$($(GO) tool opa fmt --list policies tests/rego)" || { echo "opa fmt would change: $$($(GO) tool opa fmt --list policies tests/rego)"; exit 1; }; \
		$(GO) tool opa test policies tests/rego -v --coverage --threshold 100 --format=json > .rego-coverage.json || { $(GO) tool opa test policies tests/rego -v; exit 1; }; \
		$(GO) tool opa test policies tests/rego; \
	fi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

bench: build
	AVFS_BIN=$(CURDIR)/bin/avfs $(GO) run ./tests/bench -out docs/benchmarks.md

clean:
	rm -rf bin .rego-coverage.json
