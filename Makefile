# Stoker: the two commands are `make demo` and `make test`. Each installs the
# Debian packages it needs first (deploy/install-deps.sh, idempotent).
BAZEL ?= bazel
DATA ?=
THREADS ?= 2
# The Python client is pure Python over libstoker.so; tests run it with
# Debian's interpreter (numpy, torch) and, in tests/dist_test.py, others.
PYTHON := /usr/bin/python3
PYENV := PYTHONPATH=client/python

PREFIX ?= /usr/local

# A real S3 API server for the object store tests (C++ and Python): moto's,
# on PATH or in the machine image's pyenv; none: those tests skip.
STOKER_MOTO_SERVER ?= $(shell ls /root/.pyenv/versions/*/bin/moto_server 2>/dev/null | \
  head -n 1 | grep . || command -v moto_server 2>/dev/null)
export STOKER_MOTO_SERVER

.PHONY: all deps build dist install test pytest sanitize demo bench clean

all: build

deps:
	@bash deploy/install-deps.sh

build: deps
	$(BAZEL) build //...

# Release artifacts (deploy/package.py): dist/stoker-<v>-linux-<arch>.tar.gz
# and dist/stoker-<v>-py3-none-manylinux_2_<N>_<arch>.whl; then the node
# service's OCI image, dist/stokerd-<v>-oci.tar (deploy/image.py, from
# Debian's archive and the tarball).
dist: build
	$(PYTHON) deploy/package.py dist
	$(PYTHON) deploy/image.py

install: build
	$(PYTHON) deploy/package.py install "$(PREFIX)"

test: deps
	$(BAZEL) test //...
	$(PYTHON) deploy/package.py dist
	$(PYTHON) deploy/image.py
	$(MAKE) --no-print-directory pytest

# AddressSanitizer + UBSan: the unit tests of the decode path, the pipeline,
# the ring and the socket code, then 3,000 mutations of real photographs
# (Debian's mate-backgrounds, as JPEG and PNG) through the decoders and a
# custom pipeline. Any report fails the run.
SANITIZED_TESTS := //server/access/... //server/pool/... //server/imaging/... \
	//server/dataset/... //server/cache/... //server/sources/... //server/ops/... \
	//server/pipeline/... //server/serve/... //server/objstore/... //server/h5probe:protocol_test \
	//shm:ring_test //shm:fd_passing_test //shm:open_channel_test //shm:pinned_socket_test \
	//server/daemon:daemon_test \
	//util:util_test //util:mapped_read_test //util:buffer_test
sanitize: deps
	$(BAZEL) test --config=sanitize $(SANITIZED_TESTS)
	$(BAZEL) build --config=sanitize //tests:fuzz_decode //server:stoker-h5probe
	STOKER_H5PROBE=bazel-sanitize-bin/server/stoker-h5probe bazel-sanitize-bin/tests/fuzz_decode --photos /usr/share/backgrounds/mate/nature \
	  --mutations 3000

pytest:
	$(PYENV) $(PYTHON) -m pytest -q -p no:cacheprovider tests/python
	bash tests/python/run_other_python.sh

bench: deps
	$(BAZEL) build //...
	@test -f /tmp/stoker-demo-data/.complete || { rm -rf /tmp/stoker-demo-data && \
	  bazel-bin/tests/make_dataset --out /tmp/stoker-demo-data --classes 4 \
	    --per_class 100 && touch /tmp/stoker-demo-data/.complete; }
	bazel-bin/bench/storage_bench --data /tmp/stoker-demo-data
	$(PYENV) $(PYTHON) bench/loader_overhead.py
	$(PYENV) $(PYTHON) bench/op_cost.py
	$(PYTHON) bench/vs_torch.py
	$(PYTHON) bench/any_sample.py
	$(PYTHON) bench/caller_rights.py
	$(PYTHON) bench/ranks.py
	$(PYTHON) bench/pixels.py
	$(PYTHON) bench/webdataset.py
	$(PYTHON) bench/s3.py
	$(PYTHON) bench/many_nodes.py
	$(PYTHON) bench/client_decode.py
	$(PYTHON) bench/gpu_train.py
	$(PYTHON) bench/reads_in_flight.py
	bazel-bin/bench/volume_bench
	$(PYTHON) bench/large_pictures.py
	$(PYTHON) bench/shared_store.py

demo: deps
	$(BAZEL) build //server:stokerd //client/cpp:stokerctl //tests:make_dataset
	@bash deploy/demo.sh "$(DATA)" "$(THREADS)"

clean:
	$(BAZEL) clean
