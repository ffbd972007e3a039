# Thin wrappers over the go command; `go test ./...` alone runs every test.
GO ?= go

.PHONY: all generate check-generate build cross test race vet lint fuzz faults interop bench bench-toolsearch bench-shared bench-compare \
	dist dist-check goreleaser-check release publish-registry tree-check

all: check-generate lint test

# Regenerate gen/ from schema/ (the workflow for any schema change).
generate:
	$(GO) generate ./...

# Fail when the checked-in generated code differs from a fresh generation.
check-generate: generate
	@git diff --exit-code -- gen/ || { echo "gen/ is stale: run 'make generate' and commit the result" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- gen/)" || { git status --porcelain -- gen/ >&2; echo "gen/ has files that are not committed" >&2; exit 1; }

# As the release builds it (.goreleaser.yaml): without cgo, which a cgo build's memory figures
# would overstate.
build:
	CGO_ENABLED=0 $(GO) build -o bin/mcp-simple-aggregator ./cmd/mcp-simple-aggregator

# Speed and memory against a direct connection to the same child; updates the results section
# of BENCHMARKS.md. A few minutes.
bench: build
	$(GO) build -o bin/fixture-server ./internal/fixture/server
	$(GO) run ./internal/bench -aggregator bin/mcp-simple-aggregator -fixture bin/fixture-server -out BENCHMARKS.md

# The tool search's benchmark alone (also part of bench): retrieval against plain BM25 on the
# labelled sets of testdata/toolsearch, search latency on 10,000 tools, and the size of
# tools/list with and without --tool-search; writes the toolsearch section of BENCHMARKS.md.
bench-toolsearch: build
	$(GO) build -o bin/fixture-server ./internal/fixture/server
	$(GO) run ./internal/bench -only toolsearch -aggregator bin/mcp-simple-aggregator -fixture bin/fixture-server -out BENCHMARKS.md

# Shared servers (--share) alone (also part of bench): a shared session against an unshared one
# and the floor of two hops, the start-up of a second session and the memory of five.
bench-shared: build
	$(GO) build -o bin/fixture-server ./internal/fixture/server
	$(GO) run ./internal/bench -only shared -runs 9 -aggregator bin/mcp-simple-aggregator -fixture bin/fixture-server -out BENCHMARKS.md

# Before and after: the aggregator at BASE (a commit, or several separated by spaces) against
# this tree, side by side in one run with a direct connection and a byte relay (the floor of any
# hop): latency and throughput of each pairing of client and server era, the peak memory of an
# 8 MiB result, start-up and discovery; writes the compare section of BENCHMARKS.md. For
# changes to the core: make bench-compare BASE=<the last landed commit>.
BASE ?= HEAD~1
bench-compare: build
	$(GO) build -o bin/fixture-server ./internal/fixture/server
	$(GO) build -o bin/gosdk-fixture ./internal/fixture/gosdk
	@set -e; bins=""; for c in $(BASE); do \
		rm -rf bin/base-src; git worktree prune; git worktree add --detach bin/base-src $$c >/dev/null; \
		(cd bin/base-src && CGO_ENABLED=0 $(GO) build -o ../base-aggregator-$$c ./cmd/mcp-simple-aggregator); \
		git worktree remove --force bin/base-src; bins="$$bins,bin/base-aggregator-$$c"; \
	done; \
	labels=$$(echo $(BASE) | tr ' ' ','); \
	$(GO) run ./internal/bench -aggregator bin/mcp-simple-aggregator -baseline "$${bins#,}" -baseline-label "$$labels" \
		-fixture bin/fixture-server -gosdk-fixture bin/gosdk-fixture -out BENCHMARKS.md

# The program must build for every platform it supports.
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/mcp-simple-aggregator
	GOOS=darwin GOARCH=amd64 $(GO) build -o /dev/null ./cmd/mcp-simple-aggregator
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/mcp-simple-aggregator

test:
	$(GO) test ./...

# No built program and no file over 1 MiB outside testdata/ is tracked (CI runs it).
tree-check:
	bash .ci/tree-check

race:
	$(GO) test -race ./...

# The official TypeScript SDK clients (v1 and v2) against the MCP reference servers and the
# fixture server, directly and through the aggregator (packages pinned in
# test/interop/package-lock.json).
interop: build
	$(GO) build -o bin/fixture-server ./internal/fixture/server
	cd test/interop && npm ci --no-audit --no-fund && AGGREGATOR="$(CURDIR)/bin/mcp-simple-aggregator" FIXTURE="$(CURDIR)/bin/fixture-server" npm test

vet:
	$(GO) vet ./...

# gofmt, vet (also for the other operating systems the program supports), staticcheck, and
# deadcode (functions no program reaches; pinned in tools.go like the generator).
lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go') >&2; echo "gofmt needed on the files above" >&2; exit 1; }
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck ./...
	@out="$$($(GO) run golang.org/x/tools/cmd/deadcode ./...)"; test -z "$$out" || { echo "$$out" >&2; echo "deadcode: remove the functions above, or use them" >&2; exit 1; }

# The fault suite (Linux): child, client and kill faults with real processes, under the race
# detector (the aggregator under test is built with -race too).
faults:
	$(GO) test -race -count=1 -run '^TestFault' ./cmd/mcp-simple-aggregator

# A short run of every fuzz target (their seed corpora run with `go test`). Minimizing a new
# input can take the whole run otherwise. The budget is a count of executions, not a duration:
# with a duration, Go before 1.27 can fail a healthy target with a bare "context deadline
# exceeded" when the deadline races a busy worker (golang/go#75804; it failed our CI once).
# 300000 executions take about 5-15 s per target on the 2-core machines here.
FUZZEXECS ?= 300000
fuzz:
	$(GO) test ./internal/config -run '^$$' -fuzz '^FuzzExpand$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/config -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/stdio -run '^$$' -fuzz '^FuzzDecodeMessage$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/stdio -run '^$$' -fuzz '^FuzzBatch$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/stdio -run '^$$' -fuzz '^FuzzTooLargeID$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/rawjson -run '^$$' -fuzz '^FuzzObject$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/rawjson -run '^$$' -fuzz '^FuzzWithout$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/era -run '^$$' -fuzz '^FuzzEnvelope$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/era -run '^$$' -fuzz '^FuzzRequestState$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/era -run '^$$' -fuzz '^FuzzUntag$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/shared -run '^$$' -fuzz '^FuzzControlReader$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/trust -run '^$$' -fuzz '^FuzzMayHide$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s
	$(GO) test ./internal/audit -run '^$$' -fuzz '^FuzzCallLine$$' -fuzztime $(FUZZEXECS)x -fuzzminimizetime 2s

# Release packaging (see RELEASING.md). GoReleaser is pinned here, not in go.mod, and built into
# bin/tools the first time (about 9 minutes on the 2-core machines here); v2.15 is the newest
# line that builds with the project's Go. mcpb, the Claude Desktop bundle tool, is pinned in
# internal/dist/tools/package-lock.json.
GORELEASER_VERSION ?= v2.15.1
GORELEASER := bin/tools/goreleaser-$(GORELEASER_VERSION)/goreleaser
MCP_PUBLISHER_VERSION ?= v1.8.8
MCP_PUBLISHER := bin/tools/mcp-publisher-$(MCP_PUBLISHER_VERSION)/publisher
MCPB := internal/dist/tools/node_modules/.bin/mcpb
# GoReleaser takes the commit from git only when the clone has a remote; without one (a local
# clone) a snapshot would say "none" for it. The remote named here exists for these commands only.
GIT_REMOTE_ENV := $(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/mcp-simple-aggregator/mcp-simple-aggregator.git)

$(GORELEASER):
	GOBIN="$(CURDIR)/$(@D)" $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

$(MCP_PUBLISHER):
	GOBIN="$(CURDIR)/$(@D)" $(GO) install github.com/modelcontextprotocol/registry/cmd/publisher@$(MCP_PUBLISHER_VERSION)

$(MCPB): internal/dist/tools/package-lock.json
	cd internal/dist/tools && npm ci --no-audit --no-fund
	@touch $@

goreleaser-check: $(GORELEASER)
	$(GORELEASER) check

# A snapshot of every release artifact into dist/: the archives and checksums.txt, deb and rpm,
# the Homebrew cask, the npm tarballs (dist/npm/*.tgz), the .mcpb bundles and server.json.
dist: $(GORELEASER) $(MCPB)
	$(GORELEASER) check
	$(GIT_REMOTE_ENV) $(GORELEASER) release --snapshot --clean
	$(GO) run ./internal/dist -mcpb $(MCPB)

# The proof that every channel of dist/ works, offline: the checksums, server.json and the
# bundle manifests against their schemas, and the npm packages installed from their tarballs
# into an empty prefix with --offline --ignore-scripts, holding an MCP session through npx; and
# the MIT license declared and carried by every archive, package and bundle.
dist-check:
	cd dist && sha256sum -c checksums.txt
	MCP_DIST_DIR="$(CURDIR)/dist" $(GO) test -count=1 -run '^TestDist' ./internal/dist
	cd test/dist && npm ci --no-audit --no-fund && DIST="$(CURDIR)/dist" npm test

# Cut the release of the tag at HEAD (see RELEASING.md): GoReleaser builds and uploads the
# archives, packages and cask to a draft GitHub release, the bundles and server.json are made
# and added to it, the npm packages published, and the release published.
release: $(GORELEASER) $(MCPB)
	@tag=$$(git describe --exact-match --tags HEAD) || { echo "release: HEAD has no tag: git tag vX.Y.Z && git push origin vX.Y.Z" >&2; exit 1; }; \
	test -n "$$GITHUB_TOKEN" || { echo "release: set GITHUB_TOKEN (repo scope; HOMEBREW_TAP_GITHUB_TOKEN too if it cannot push to the tap)" >&2; exit 1; }; \
	command -v gh >/dev/null || { echo "release: the GitHub CLI gh is needed to add the bundles to the release" >&2; exit 1; }; \
	npm whoami >/dev/null || { echo "release: log in to npm first (npm login), as a member of the @mcp-simple-aggregator organization" >&2; exit 1; }; \
	set -ex; \
	$(GORELEASER) release --clean; \
	$(GO) run ./internal/dist -mcpb $(MCPB); \
	$(MAKE) dist-check; \
	gh release upload "$$tag" dist/*.mcpb dist/server.json --clobber; \
	$(GO) run ./internal/dist publish-npm; \
	gh release edit "$$tag" --draft=false

# Publish dist/server.json to the MCP registry, after `make release` (the registry checks the
# npm package's mcpName and the bundles' hashes against what was published).
publish-registry: $(MCP_PUBLISHER)
	@test -n "$$GITHUB_TOKEN" || { echo "publish-registry: set GITHUB_TOKEN (a token of a member of the mcp-simple-aggregator GitHub organization)" >&2; exit 1; }
	$(MCP_PUBLISHER) login github --token "$$GITHUB_TOKEN"
	$(MCP_PUBLISHER) publish dist/server.json
