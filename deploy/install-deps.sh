#!/usr/bin/env bash
# Installs the Debian 12 packages Stoker builds, tests and runs with.
# Idempotent: packages already present are left alone; nothing outside
# Debian's archive is fetched. Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  # Build system (offline Bazel and the local repositories it needs).
  bazel-bootstrap bazel-rules-java bazel-platforms
  build-essential make
  # Control plane.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  # Shared memory, decode.
  libboost-dev libturbojpeg0-dev libjpeg62-turbo-dev
  # Caches and the LMDB dataset source.
  liblmdb-dev
  # Metrics, and the real Prometheus server and tmux the tests drive.
  prometheus-cpp-dev prometheus tmux
  # Tests.
  libgtest-dev libgmock-dev
  # Python client (built against Debian's /usr/bin/python3) and its tests.
  pybind11-dev python3-dev python3-numpy python3-torch python3-torchvision
  python3-pytest python3-pil
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
