# dair build, test and tooling entry points. `make help` lists the targets.

GO        ?= go
BIN       ?= bin/dair
PKG       ?= ./...
FUZZTIME  ?= 10s
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.5.1
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: help build test mutate bench proto demo fuzz lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build the binary into bin/dair
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/dair

test: ## run every test with the race detector, then the example module's (examples/testkit-module)
	$(GO) test -race -count=1 -timeout 14m $(PKG)
	cd examples/testkit-module && $(GO) test -race -count=1 ./...

mutate: ## check that the tests outside internal/store catch deliberate fencing and exactly-once faults
	$(GO) run ./internal/tools/mutate

# bench1 runs the benchmarks matching $(1) for $(2) iterations in the packages $(4) within $(3),
# noting a failure in the shell variable failed instead of stopping.
define bench1
echo "+ go test -bench '$(1)' $(4)"; $(GO) test -run '^$$' -bench '$(1)' -benchtime $(2) -timeout $(3) $(4) || failed="$$failed $(1)";
endef

bench: ## run the Go benchmarks (about 5 minutes on 2 cores) and print their standard lines; a failing one does not stop the rest
	@failed=""; \
	$(call bench1,BenchmarkRawLuaCommit|BenchmarkCommitSteps,20000x,5m,./internal/store/redisstore ./internal/store/boltstore) \
	$(call bench1,BenchmarkStepCommits,50000x,5m,./actors) \
	$(call bench1,BenchmarkRuns3Step,6000x,5m,./actors) \
	$(call bench1,BenchmarkSubmitToFirstStep,1000x,5m,./actors) \
	$(call bench1,BenchmarkFairShare,50x,5m,./actors) \
	$(call bench1,BenchmarkInFlightMemory,1x,8m,./actors) \
	$(call bench1,BenchmarkHTTPRuns3Step,3000x,5m,./internal/api) \
	$(call bench1,BenchmarkRunLatency,1000x,5m,./internal/api) \
	$(call bench1,BenchmarkClusterMessages,200000x,5m,./cluster) \
	$(call bench1,BenchmarkScaleOut|BenchmarkSSEFanout|BenchmarkClusterRecovery,1x,8m,./cmd/dair) \
	$(call bench1,BenchmarkSubmitToFirstStepCrossNode,500x,5m,./cmd/dair) \
	$(call bench1,BenchmarkDispatch,3000x,5m,./internal/runtimehost) \
	$(call bench1,BenchmarkAgentSend|BenchmarkRemotePingPong,200000x,5m,./actors) \
	$(call bench1,BenchmarkAgentPublish,200x,5m,./actors) \
	if [ -n "$$failed" ]; then echo "make bench: failed:$$failed"; exit 1; fi

proto: ## regenerate messages/*.pb.go (needs protoc)
	@command -v protoc-gen-go >/dev/null 2>&1 || $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@command -v protoc-gen-go-grpc >/dev/null 2>&1 || $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc --go_out=. --go_opt=paths=source_relative messages/dair.proto messages/agents.proto
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative messages/runtime.proto

demo: build ## run the demo scenario
	./$(BIN) demo

fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for dir in $$($(GO) list -f '{{.Dir}}' $(PKG)); do \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "== $$dir $$target"; \
			(cd $$dir && $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) .); \
		done; \
	done

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKG)

clean: ## remove build output
	rm -rf bin
