#!/bin/bash
# The checks that need a GPU, prepared here and run there in one call.
#
#   bench/gpu_checks.sh bundle   here, after `make test` (or deps and a
#       build): the GPU tests and every shared library they load but the C
#       library's own into .gpu/ (ignored by git), and the release bundle
#       (dist/stoker-*-linux-x86_64.tar.gz, from deploy/package.py).
#   bench/gpu_checks.sh run      there, carrying .gpu and dist: the tests
#       on the GPU (the cuda kind of slabs: 3 trainers x 10,000 batches, a
#       ring's 2,000 batches through its slabs, a slab there and back by
#       descriptor), then bench/gpu_slabs.py (sessions' batches in GPU
#       slabs, two trainers) and bench/gpu_train.py, with the bundle's
#       stokerd and libstoker.so. Logs go to $OUT (or .gpu/out).
#       MODELS, SECONDS, WARM, DL_WORKERS pass through to gpu_train.py;
#       GPU_TRAIN=0 skips it.
#
# Nothing here needs CUDA to bundle; without a GPU `run` runs the tests
# (their GPU cases skip, saying why) and gpu_train.py says there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(shm:batch_slabs_test shm:slab_ring_test shm:cuda_slabs_test)
# Loaded from the machine that runs them: its C library and loader.
SYSTEM='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt)[.-]'

bundle() {
  bazel build --jobs=2 "${TESTS[@]/#///}" //shm:libfake_cuda.so
  rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib .gpu/shm
  for t in "${TESTS[@]}"; do
    local bin="bazel-bin/${t/://}"
    cp -L "$bin" .gpu/bin/
    ldd "$bin" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      [[ "$name" =~ $SYSTEM ]] || cp -Ln "$path" .gpu/lib/ 2>/dev/null || true
    done
  done
  cp -L bazel-bin/shm/libfake_cuda.so .gpu/shm/
  ls dist/stoker-*-linux-x86_64.tar.gz >/dev/null
  du -sh .gpu dist/stoker-*-linux-x86_64.tar.gz
}

run() {
  local out="${OUT:-$PWD/.gpu/out}" rc=0
  mkdir -p "$out"
  nvidia-smi -L 2>&1 | tee "$out/gpu.txt" || true
  for t in "${TESTS[@]}"; do
    local name="${t#*:}"
    (cd .gpu && LD_LIBRARY_PATH="$PWD/lib" "./bin/$name" --gtest_color=no) \
        >"$out/$name.log" 2>&1 || rc=1
    tail -n 3 "$out/$name.log"
  done
  local tree=/tmp/stoker-bundle
  rm -rf "$tree" && mkdir -p "$tree"
  tar xzf dist/stoker-*-linux-x86_64.tar.gz -C "$tree" --strip-components=1
  export STOKERD="$tree/bin/stokerd" STOKER_LIB="$tree/lib/libstoker.so" PYTHONUNBUFFERED=1
  python3 bench/gpu_slabs.py 2>&1 | tee "$out/gpu_slabs.log" || rc=1
  if [ "${GPU_TRAIN:-1}" != 0 ]; then
    python3 bench/gpu_train.py 2>&1 | tee "$out/gpu_train.log" || rc=1
  fi
  return "$rc"
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *) echo "usage: $0 bundle|run" >&2; exit 2 ;;
esac
