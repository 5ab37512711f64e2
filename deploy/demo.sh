#!/usr/bin/env bash
# `make demo`: starts stokerd on a private socket, reads two epochs of a
# dataset with `stokerctl read` (val, then train, at 224x224) and prints the
# summaries and the daemon's stats. Generates a photo-like sample dataset
# first when no dataset folder is given.
#   deploy/demo.sh [DATASET_DIR] [DECODE_THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-}"
threads="${2:-2}"
bin=bazel-bin
if [ -z "$data" ]; then
  data=/tmp/stoker-demo-data
  if [ ! -f "$data/.complete" ]; then
    echo "demo: generating a sample dataset in $data"
    rm -rf "$data"
    "$bin/tests/make_dataset" --out "$data" --classes 4 --per_class 100 \
      --min_side 375 --max_side 500
    touch "$data/.complete"
  fi
fi
[ -d "$data" ] || { echo "demo: dataset folder $data does not exist" >&2; exit 1; }

run=$(mktemp -d /tmp/stoker-demo-XXXXXX)
sock="$run/stoker.sock"
root_flag=""
[ "$(id -u)" -eq 0 ] && root_flag="--allow-root"  # A demo as root is fine.
"$bin/server/stokerd" --socket "$sock" --threads "$threads" $root_flag \
  --metrics-address 127.0.0.1:0 2>"$run/stokerd.log" &
daemon=$!
cleanup() {
  kill -TERM "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  rm -rf "$run"
}
trap cleanup EXIT
for _ in $(seq 100); do
  "$bin/client/cpp/stokerctl" --socket "$sock" health >/dev/null 2>&1 && break
  sleep 0.1
done
port=$("$bin/client/cpp/stokerctl" --socket "$sock" stats --json |
  sed -n 's/.*"metrics_port": *\([0-9]*\).*/\1/p')
echo "demo: stokerd (pid $daemon) serving on $sock with $threads decode threads"
echo "demo: Prometheus metrics on http://127.0.0.1:$port/metrics"
for t in val train; do
  echo "demo: stokerctl read --transform $t --size 224 --batch-size 32 --epochs 2"
  "$bin/client/cpp/stokerctl" --socket "$sock" read --dataset "$data" \
    --transform "$t" --size 224 --batch-size 32 --epochs 2
done
"$bin/client/cpp/stokerctl" --socket "$sock" stats
