# Stoker: the two commands are `make demo` and `make test`. Each installs the
# Debian packages it needs first (deploy/install-deps.sh, idempotent).
BAZEL ?= bazel
DATA ?=
THREADS ?= 2

.PHONY: deps build test demo clean

deps:
	@bash deploy/install-deps.sh

build: deps
	$(BAZEL) build //...

test: deps
	$(BAZEL) test //...

demo: deps
	$(BAZEL) build //server:stokerd //client/cpp:stokerctl //tests:make_dataset
	@bash deploy/demo.sh "$(DATA)" "$(THREADS)"

clean:
	$(BAZEL) clean
