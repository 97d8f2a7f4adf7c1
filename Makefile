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

bench: ## run the Go benchmarks (about 5 minutes on 2 cores) and print their standard lines
	$(GO) test -run '^$$' -bench 'BenchmarkRawLuaCommit|BenchmarkCommitSteps' -benchtime 20000x -timeout 5m ./internal/store/redisstore ./internal/store/boltstore
	$(GO) test -run '^$$' -bench 'BenchmarkStepCommits' -benchtime 50000x -timeout 5m ./actors
	$(GO) test -run '^$$' -bench 'BenchmarkRuns3Step' -benchtime 6000x -timeout 5m ./actors
	$(GO) test -run '^$$' -bench 'BenchmarkSubmitToFirstStep' -benchtime 1000x -timeout 5m ./actors
	$(GO) test -run '^$$' -bench 'BenchmarkFairShare' -benchtime 50x -timeout 5m ./actors
	$(GO) test -run '^$$' -bench 'BenchmarkInFlightMemory' -benchtime 1x -timeout 8m ./actors
	$(GO) test -run '^$$' -bench 'BenchmarkHTTPRuns3Step' -benchtime 3000x -timeout 5m ./internal/api
	$(GO) test -run '^$$' -bench 'BenchmarkRunLatency' -benchtime 1000x -timeout 5m ./internal/api
	$(GO) test -run '^$$' -bench 'BenchmarkClusterMessages' -benchtime 200000x -timeout 5m ./cluster
	$(GO) test -run '^$$' -bench 'BenchmarkScaleOut|BenchmarkSSEFanout|BenchmarkClusterRecovery' -benchtime 1x -timeout 8m ./cmd/dair
	$(GO) test -run '^$$' -bench 'BenchmarkSubmitToFirstStepCrossNode' -benchtime 500x -timeout 5m ./cmd/dair
	$(GO) test -run '^$$' -bench 'BenchmarkDispatch' -benchtime 3000x -timeout 5m ./internal/runtimehost
	$(GO) test -run '^$$' -bench 'BenchmarkAgentSend|BenchmarkRemotePingPong' -benchtime 200000x -timeout 5m ./actors
	$(GO) test -run '^$$' -bench 'BenchmarkAgentPublish' -benchtime 200x -timeout 5m ./actors

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
