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
  # Shared memory, decode (JPEG, PNG), array sources (HDF5).
  libboost-dev libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libhdf5-dev
  # Inflate outside libhdf5: libdeflate whole buffers (HDF5 chunks,
  # feature files), ISA-L streams (.nii.gz, slab by slab), zlib for tests.
  libdeflate-dev libisal-dev zlib1g-dev
  # The HDF5 reader's system-call allow-list (server/h5probe).
  libseccomp-dev
  # NUMA topology and placement (numactl: checking it by hand).
  libnuma-dev numactl
  # Caches and the LMDB dataset source.
  liblmdb-dev
  # Object stores: the S3 client (libcurl's multi interface), the parser
  # of its XML replies, and SigV4's SHA-256 and HMAC (Nettle, also linked
  # into the client library, which signs its session's requests).
  libcurl4-openssl-dev libssl-dev libexpat1-dev ca-certificates nettle-dev
  # Metrics, and the real Prometheus server and tmux the tests drive.
  prometheus-cpp-dev prometheus tmux
  # Tests.
  libgtest-dev libgmock-dev
  # Python client tests: numpy/torch, a second gRPC in the same process,
  # fresh virtual environments for the wheel.
  python3-numpy python3-torch python3-torchvision python3-pytest python3-pil
  python3-grpcio python3-venv python3-h5py python3-nibabel
  # Packaging: the release bundle (RPATHs, symbol checks), the node service.
  patchelf binutils dpkg-dev systemd nlohmann-json3-dev libcli11-dev
  # Root file systems from Debian's archive: the node service's OCI image,
  # and Debian 11 (glibc 2.31) to run the wheel on; skopeo reads the image,
  # python3-yaml the Kubernetes manifests.
  mmdebstrap skopeo python3-yaml
  # Real photographs for the sanitizer's decode fuzzing (make sanitize).
  mate-backgrounds
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# What the shipped files link beyond Debian's packages: sources at the
# installed versions, an HTTP-only libcurl.a and glibc 2.28 link stubs.
SUDO=$SUDO bash "$(dirname "$0")/debian-src.sh"

# The object store tests run against a real S3 API server, moto_server.
# Debian ships it as python3-moto from Debian 13 on; on Debian 12 it comes
# with the machine image (pip), since nothing outside Debian's archive is
# fetched here. Where neither exists, those tests skip and say so.
if ! command -v moto_server >/dev/null 2>&1 && ! ls /root/.pyenv/versions/*/bin/moto_server \
    >/dev/null 2>&1; then
  if apt-cache show python3-moto >/dev/null 2>&1; then
    $SUDO apt-get install -y -qq --no-install-recommends python3-moto
  else
    echo "install-deps: no moto_server (Debian 12 has no python3-moto); the object store" \
         "tests will skip (set STOKER_MOTO_SERVER to one to run them)"
  fi
fi
echo "install-deps: done"
