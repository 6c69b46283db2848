# fedsched Makefile.
#
# Protobuf generation uses PINNED generators, so that `make proto` gives
# byte-identical output on every machine (the generated headers record the
# versions):
#   - protoc 3.21.12, from Debian bookworm's packages:
#       apt-get install -y protobuf-compiler libprotobuf-dev
#     (protobuf-compiler 3.21.12-3+deb12u1; libprotobuf-dev ships the
#     well-known types such as google/protobuf/timestamp.proto under
#     /usr/include).
#   - protoc-gen-go and protoc-gen-go-grpc, pinned by the `tool` directives
#     of go.mod (google.golang.org/protobuf v1.36.12 and
#     google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2) and built from
#     the module cache: nothing is installed globally.
#
# Targets:
#   make proto        regenerate the Go code of every .proto file in place
#   make proto-check  regenerate into a temporary directory and fail if the
#                     committed code differs (for CI; see proto/check.sh)

PROTOC          ?= protoc
PROTOC_VERSION  := 3.21.12
PROTO_INCLUDE   ?= /usr/include
# GEN_OUT is the root the generated files are written under; proto/check.sh
# points it at a temporary directory.
GEN_OUT         ?= .

# API protos live under proto/ and are imported as "fedsched/v1/...".
API_PROTOS      := fedsched/v1/site.proto fedsched/v1/federation.proto
# Store records live next to the package that owns them.
STORE_PROTOS    := node/store/internal/storepb/records.proto

.PHONY: proto proto-check proto-protoc-version

proto-protoc-version:
	@$(PROTOC) --version | grep -qx 'libprotoc $(PROTOC_VERSION)' || { \
		echo "make proto: need protoc $(PROTOC_VERSION), found: $$($(PROTOC) --version 2>&1)" >&2; \
		echo "install it with: apt-get install -y protobuf-compiler libprotobuf-dev" >&2; \
		exit 1; }

proto: proto-protoc-version
	@set -e; bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; \
	go build -o "$$bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc; \
	mkdir -p "$(GEN_OUT)/proto"; \
	$(PROTOC) -I proto -I $(PROTO_INCLUDE) \
		--plugin=protoc-gen-go="$$bin/protoc-gen-go" \
		--plugin=protoc-gen-go-grpc="$$bin/protoc-gen-go-grpc" \
		--go_out="$(GEN_OUT)/proto" --go_opt=paths=source_relative \
		--go-grpc_out="$(GEN_OUT)/proto" --go-grpc_opt=paths=source_relative \
		$(API_PROTOS); \
	$(PROTOC) -I . -I proto -I $(PROTO_INCLUDE) \
		--plugin=protoc-gen-go="$$bin/protoc-gen-go" \
		--go_out="$(GEN_OUT)" --go_opt=paths=source_relative \
		$(STORE_PROTOS)

proto-check:
	@sh proto/check.sh
