# avfs build, test and benchmark entry points. `make test` is what CI runs.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# urfave_cli_no_docs leaves out the CLI library's man/markdown generator
# (blackfriday), which avfs does not use and whose init costs every start.
TAGS    := urfave_cli_no_docs
PKGS    := ./...

# man regenerates the manual page from the commands (urfave/cli's generator,
# left out of the shipped binary, which prints this file: `avfs man`).
man:
	$(GO) run ./cmd/avfs man > cmd/avfs/avfs.1.tmp && mv cmd/avfs/avfs.1.tmp cmd/avfs/avfs.1

.PHONY: man all build test test-go test-python test-rego test-corpus lint bench deps clean

all: build

build: bin/avfs bin/avfs-replicate

SOURCES := $(shell find . \( -name '*.go' -o -name '*.c' \) -not -path './bin/*' 2>/dev/null) cmd/avfs/avfs.1 go.mod go.sum $(shell find policies -type f 2>/dev/null)

bin/avfs: $(SOURCES)
	$(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o bin/avfs ./cmd/avfs

# bin/avfs-replicate is avfs with vault replication linked in (Litestream,
# the AWS SDK, a second SQLite): avfs hands `vault replicate` and `vault
# restore` to it, so that avfs itself does not pay for them at every start
# (cmd/avfs/replicate_cli.go).
bin/avfs-replicate: $(SOURCES)
	$(GO) build -trimpath -tags '$(TAGS) avfs_replicator' -ldflags '$(LDFLAGS)' -o bin/avfs-replicate ./cmd/avfs

# deps installs the system packages the tests and benchmarks use (FUSE tools,
# sqlite3, git, libtool for the real-tools tests, setpriv for the runs
# without CAP_SYS_ADMIN, and bubblewrap, which `make bench` measures the
# sandbox against), and nginx, the bundle server of the manage tests.
# It does nothing when they are present; CI calls it through .ci/run.
deps:
	@missing=""; \
	command -v fusermount3 >/dev/null || missing="$$missing fuse3"; \
	command -v sqlite3 >/dev/null || missing="$$missing sqlite3"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v libtool >/dev/null || missing="$$missing libtool-bin"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	$(MAKE) bin/tools/versitygw

# bin/tools/versitygw is the S3-compatible server the replication tests and
# benchmark run on loopback (cmd/avfs/replicate_test.go), pinned in its own
# module (tests/tools/go.mod) so that its dependencies stay out of avfs's.
bin/tools/versitygw: tests/tools/go.mod tests/tools/go.sum
	cd tests/tools && $(GO) build -o $(CURDIR)/bin/tools/versitygw github.com/versity/versitygw/cmd/versitygw

test: lint test-rego test-corpus test-go test-python

# test-corpus decides the cases of tests/corpus with the default policy
# (engine's TestCorpus) and prints the score of each category; it fails
# when a case outside tests/corpus/pending.jsonl is decided otherwise.
test-corpus:
	@out="$$($(GO) test ./engine -run '^TestCorpus$$' -count=1 -v 2>&1)"; rc=$$?; \
	printf '%s\n' "$$out" | sed -n 's/^ *corpus_test.go:[0-9]*: \(corpus.*\)$$/\1/p' | grep -v '^corpus pending [^:]*\.jsonl' ; \
	if [ $$rc -ne 0 ]; then printf '%s\n' "$$out" | grep -v '^=== '; exit $$rc; fi

test-go: build
	AVFS_BIN=$(CURDIR)/bin/avfs $(GO) test -race -count=1 -timeout 40m $(PKGS)

# test-python runs the Python client's tests (clients/python) against the
# binary; under CI=true they fail rather than skip without it.
test-python: build
	AVFS_BIN=$(CURDIR)/bin/avfs python3 -m unittest discover -s clients/python/tests -v

# test-rego checks, formats and tests the Rego of the default bundle
# (policies/) with the tests in tests/rego, and fails unless every line of
# every policies/*.rego file is covered (coverage of test files is ignored).
test-rego:
	@set -e; \
	if [ -z "$$(ls policies/*.rego 2>/dev/null)" ]; then echo "test-rego: no policies"; exit 0; fi; \
	$(GO) tool opa check --strict policies tests/rego; \
	unformatted="$$($(GO) tool opa fmt --list policies tests/rego)"; \
	if [ -n "$$unformatted" ]; then echo "opa fmt would change: $$unformatted"; exit 1; fi; \
	if ! $(GO) tool opa test policies tests/rego --coverage --format=json > .rego-coverage.json; then \
		$(GO) tool opa test policies tests/rego -v | grep -v '^data\..*: PASS' ; exit 1; \
	fi; \
	if ! $(GO) tool opa eval --fail-defined --format=raw --input .rego-coverage.json \
		'uncovered := {f: r.not_covered | some f, r in input.files; startswith(f, "policies/"); r.coverage < 100}; count(uncovered) > 0; json.marshal(uncovered)'; then \
		echo "test-rego: policies/ is not fully covered (uncovered ranges above)"; exit 1; \
	fi; \
	$(GO) tool opa test policies tests/rego; \
	$(GO) tool opa eval --format=raw --input .rego-coverage.json \
		'sprintf("coverage of policies/: %v%% of %v files", [min({r.coverage | some f, r in input.files; startswith(f, "policies/")}), count({f | some f, _ in input.files; startswith(f, "policies/")})])'

# lint: gofmt, go vet, staticcheck (the version pinned in go.mod's tool
# block), and a go.mod that go mod tidy would not change.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags avfs_replicator ./cmd/avfs
	$(GO) tool staticcheck $(PKGS)
	$(GO) tool staticcheck -tags avfs_replicator ./cmd/avfs
	$(GO) mod tidy -diff

bench: build
	AVFS_BIN=$(CURDIR)/bin/avfs $(GO) run ./tests/bench -out docs/benchmarks.md

clean:
	rm -rf bin .rego-coverage.json
