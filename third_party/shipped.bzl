"""How every shipped ELF file links: stokerd, stokerctl, stoker-h5probe and
libstoker.so need glibc 2.28 and libgcc_s, and nothing else from the host.

- glibc: against glibc 2.28's link stubs and start files (@debian_src,
  deploy/debian-src.sh), so each symbol binds to its 2.28 version; the
  few newer functions Debian's archives call are in //util:glibc_compat.
- everything else: Debian's static archives (//third_party:shipped_archives,
  libstdc++ among them), placed before the dependencies' -l flags, so that
  --as-needed drops the shared libraries those flags name. ISA-L, which has
  no archive, stays a bundled shared library that needs glibc 2.14.
- libgcc_s stays shared: GCC 12's libgcc_eh needs glibc 2.35. The host's
  libgcc_s is not linked against the stubs, hence --allow-shlib-undefined.

Sanitizer builds (--config=sanitize) are never shipped, and their runtime
needs the build host's glibc: they link as every other target does.
deploy/package.py scans the result and fails above the floor.
"""

def _shipped(values):
    return select({
        "//third_party:sanitized": [],
        "//conditions:default": values,
    })

SHIPPED_LINK_INPUTS = _shipped([
    "//third_party:shipped_archives",
    "@debian_src//:glibc_floor",
    "@debian_src//:libcurl.a",
])

SHIPPED_LINKOPTS = _shipped([
    "-Bexternal/debian_src/glibc-2.28",
    "-Lexternal/debian_src/glibc-2.28",
    "$(location //third_party:shipped_archives)",
    "-Wl,--as-needed",
    # In glibc 2.28 these are libraries of their own.
    "-lpthread",
    "-ldl",
    "-lrt",
    "-Wl,--allow-shlib-undefined",
])

SHIPPED_DEPS = _shipped(["//util:glibc_compat"])
