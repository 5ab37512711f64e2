#!/usr/bin/env python3
"""Builds Stoker's release artifacts from the Bazel outputs (no network).

    deploy/package.py dist              # dist/stoker-<v>-linux-<arch>.tar.gz
                                        # dist/stoker-<v>-py3-none-<plat>.whl
    deploy/package.py install PREFIX    # the bundle's layout under PREFIX

Bundle layout (the same under an install PREFIX):
    bin/stokerd, bin/stokerctl      RUNPATH $ORIGIN/../lib/stoker
    bin/stoker-h5probe              the HDF5 reader stokerd runs
    lib/libstoker.so                the C ABI
    lib/stoker/                     private shared libraries of the binaries
                                    (ISA-L: the rest is linked in)
    lib/stoker/python/stoker/       the Python package (finds ../../../)
    include/stoker.h                the C ABI's header and manual
    share/stoker/                   systemd unit, Prometheus, Grafana,
                                    Kubernetes and example config files

The binaries' libraries are private (lib/stoker, not lib/) so an install
into /usr/local never puts a second libstdc++ or libprotobuf on the system's
search path. The wheel carries the package with libstoker.so and the
libraries in stoker/_lib and the binaries in stoker/_bin.

Every ELF file needs only glibc 2.28 and libgcc_s (third_party/shipped.bzl
links them so); `dist` scans each file's symbol versions, fails above
FLOOR, and tags the wheel with the newest glibc version found.
Only the standard library is used; any python3 runs it.
"""

import base64
import hashlib
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.join(ROOT, "bazel-bin")
BINARIES = {"stokerd": os.path.join(BIN, "server", "stokerd"),
            # The HDF5 reader: stokerd runs it from beside itself.
            "stoker-h5probe": os.path.join(BIN, "server", "stoker-h5probe"),
            "stokerctl": os.path.join(BIN, "client", "cpp", "stokerctl")}
LIBSTOKER = os.path.join(BIN, "client", "c", "libstoker.so")
PACKAGE = os.path.join(ROOT, "client", "python", "stoker")
# Provided by the system; never bundled. glibc's libraries and the C++
# runtime (Debian 12's libstdc++ needs glibc 2.36; the shipped files carry
# theirs inside, and FLOOR bounds what they may need of a host's).
SYSTEM_LIBS = re.compile(r"^(libc|libm|libdl|librt|libpthread|libutil|"
                         r"libresolv|libanl|libstdc\+\+|libgcc_s|"
                         r"ld-linux[-\w]*)\.so")
SHARE = {  # share/stoker/<dest> <- deploy/<src>
    "systemd": "systemd", "prometheus": "prometheus", "grafana": "grafana",
    "kubernetes": "kubernetes", "config": "config"}
# The newest symbol version a bundled file may need, per versioned library:
# glibc 2.28 (RHEL 8, manylinux_2_28), and no newer C++ runtime or libgcc_s
# than such hosts have (the shipped files carry their libstdc++ inside).
FLOOR = {"GLIBC_": (2, 28), "GLIBCXX_": (3, 4, 24), "CXXABI_": (1, 3, 11),
         "GCC_": (7, 0, 0)}
UNIT = os.path.join("share", "stoker", "systemd", "stokerd.service")


def version():
    text = open(os.path.join(ROOT, "util", "version.h")).read()
    return re.search(r'STOKER_VERSION_STRING "([^"]+)"', text).group(1)


def run(*args):
    return subprocess.run(args, check=True, capture_output=True,
                          text=True).stdout


def needed_libraries(binary):
    """Resolved paths of every shared library `binary` loads, minus glibc."""
    out = {}
    for line in run("ldd", binary).splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m and not SYSTEM_LIBS.match(m.group(1)):
            out[m.group(1)] = m.group(2)
    return out


def copy_file(src, dst, mode):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)


def stage(dest):
    """Writes the bundle layout into `dest`."""
    for path in list(BINARIES.values()) + [LIBSTOKER]:
        if not os.path.exists(path):
            sys.exit(f"package: {path} is missing: run `make build` first")
    private = os.path.join(dest, "lib", "stoker")
    libs = {}
    for name, path in BINARIES.items():
        out = os.path.join(dest, "bin", name)
        copy_file(path, out, 0o755)
        run("patchelf", "--set-rpath", "$ORIGIN/../lib/stoker", out)
        libs.update(needed_libraries(path))
    for soname, path in sorted(libs.items()):
        out = os.path.join(private, soname)
        copy_file(path, out, 0o644)
        run("patchelf", "--set-rpath", "$ORIGIN", out)
    copy_file(LIBSTOKER, os.path.join(dest, "lib", "libstoker.so"), 0o755)
    shutil.copytree(PACKAGE, os.path.join(private, "python", "stoker"),
                    ignore=shutil.ignore_patterns("__pycache__", "_lib",
                                                  "_bin"))
    copy_file(os.path.join(ROOT, "client", "c", "stoker.h"),
              os.path.join(dest, "include", "stoker.h"), 0o644)
    for name, src in SHARE.items():
        src = os.path.join(ROOT, "deploy", src)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, "share", "stoker", name))
    copy_file(os.path.join(ROOT, "README.md"),
              os.path.join(dest, "share", "doc", "stoker", "README.md"), 0o644)
    # The README's links into docs/ resolve beside it.
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        if name.endswith(".md"):
            copy_file(os.path.join(ROOT, "docs", name),
                      os.path.join(dest, "share", "doc", "stoker", "docs", name), 0o644)


def needed_versions(folder):
    """{path: {(prefix, version tuple)}}: the symbol versions (GLIBC_2.17,
    GCC_3.0, ...) each ELF file under `folder` needs of the host."""
    out = {}
    for base, _, files in os.walk(folder):
        for f in files:
            path = os.path.join(base, f)
            with open(path, "rb") as fh:
                if os.path.islink(path) or fh.read(4) != b"\x7fELF":
                    continue
            text = run("readelf", "-V", "-W", path)
            # Only what the file needs (verneed), not what it defines.
            needs = text.split("Version needs section")[-1] \
                if "Version needs section" in text else ""
            # A name with no number (GLIBC_PRIVATE) sorts above every floor.
            out[path] = {(p, tuple(int(x) for x in v.split(".")) if v[0].isdigit()
                          else (10**6, v))
                         for p, v in re.findall(
                             r"Name: ((?:GLIBC|GLIBCXX|CXXABI|GCC)_)(\S+)", needs)}
    return out


def over_floor(folder, needed=None):
    """'file needs GLIBC_2.34' for each version above FLOOR, sorted
    (`needed`: needed_versions(folder), if already read)."""
    def name(v):
        return v[1] if v[0] == 10**6 else ".".join(map(str, v))
    return sorted(f"{os.path.relpath(path, folder)} needs {p}{name(v)}"
                  for path, versions in (needed or needed_versions(folder)).items()
                  for p, v in versions if p in FLOOR and v > FLOOR[p])


def newest_version(needed, prefix):
    """The newest `prefix` version in needed_versions' `needed`."""
    return max([v for versions in needed.values()
                for p, v in versions if p == prefix] or [(0,)])


def arch():
    return platform.machine()


def tarball(staged, out_dir, name):
    path = os.path.join(out_dir, name + ".tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        tar.add(staged, arcname=name)
    return path


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return f"{arcname},sha256={digest.rstrip(b'=').decode()},{len(data)}"


def wheel(staged, out_dir, ver, plat):
    """A wheel of the package with libstoker.so, the libraries and the
    binaries inside it, for `pip install` into any venv."""
    name = f"stoker-{ver}-py3-none-{plat}.whl"
    path = os.path.join(out_dir, name)
    info = f"stoker-{ver}.dist-info"
    files = []  # (arcname, source path or bytes, mode)
    pkg = os.path.join(staged, "lib", "stoker", "python", "stoker")
    for base, _, names in os.walk(pkg):
        for f in sorted(names):
            src = os.path.join(base, f)
            files.append(("stoker/" + os.path.relpath(src, pkg), src, 0o644))
    files.append(("stoker/_lib/libstoker.so",
                  os.path.join(staged, "lib", "libstoker.so"), 0o755))
    private = os.path.join(staged, "lib", "stoker")
    for f in sorted(os.listdir(private)):
        if os.path.isfile(os.path.join(private, f)):
            files.append((f"stoker/_lib/{f}", os.path.join(private, f), 0o644))
    with tempfile.TemporaryDirectory() as tmp:
        for b in BINARIES:
            out = os.path.join(tmp, b)
            copy_file(os.path.join(staged, "bin", b), out, 0o755)
            run("patchelf", "--set-rpath", "$ORIGIN/../_lib", out)
            files.append((f"stoker/_bin/{b}", open(out, "rb").read(), 0o755))
        files.append(("stoker/include/stoker.h",
                      os.path.join(staged, "include", "stoker.h"), 0o644))
        meta = {
            f"{info}/METADATA": (
                "Metadata-Version: 2.1\nName: stoker\nVersion: " + ver + "\n"
                "Summary: Stoker: a per-node data-loading daemon and its "
                "zero-copy Python client\nRequires-Python: >=3.8\n"),
            f"{info}/WHEEL": (
                "Wheel-Version: 1.0\nGenerator: stoker-package\n"
                "Root-Is-Purelib: false\nTag: py3-none-" + plat + "\n"),
            f"{info}/entry_points.txt": (
                "[console_scripts]\nstokerctl = stoker._cli:stokerctl\n"
                "stokerd = stoker._cli:stokerd\n"),
            f"{info}/top_level.txt": "stoker\n",
        }
        for arc, text in meta.items():
            files.append((arc, text.encode(), 0o644))
        record = []
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for arc, src, mode in files:
                data = src if isinstance(src, bytes) else open(src, "rb").read()
                zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                zi.external_attr = (stat.S_IFREG | mode) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
                record.append(_record_line(arc, data))
            record.append(f"{info}/RECORD,,")
            zi = zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = (stat.S_IFREG | 0o644) << 16
            z.writestr(zi, "\n".join(record) + "\n")
    return path


def main(argv):
    if len(argv) < 2 or argv[1] not in ("dist", "install"):
        sys.exit(__doc__)
    ver = version()
    if argv[1] == "install":
        if len(argv) != 3:
            sys.exit("usage: deploy/package.py install PREFIX")
        prefix = os.path.abspath(argv[2])
        with tempfile.TemporaryDirectory() as tmp:
            stage(tmp)
            # The unit names its binary and manual under /usr/local.
            unit = os.path.join(tmp, UNIT)
            text = open(unit).read().replace("/usr/local/", prefix + "/")
            with open(unit, "w") as f:
                f.write(text)
            shutil.copytree(tmp, prefix, dirs_exist_ok=True)
        print(f"package: installed stoker {ver} under {prefix}")
        return
    out_dir = os.path.join(ROOT, "dist")
    os.makedirs(out_dir, exist_ok=True)
    name = f"stoker-{ver}-linux-{arch()}"
    with tempfile.TemporaryDirectory() as tmp:
        staged = os.path.join(tmp, name)
        stage(staged)
        needed = needed_versions(staged)  # Read once: the check and the tag.
        too_new = over_floor(staged, needed)
        if too_new:
            sys.exit("package: above the shipping floor (" + ", ".join(
                f"{p}{'.'.join(map(str, v))}" for p, v in FLOOR.items()) +
                "):\n  " + "\n  ".join(too_new))
        major, minor = newest_version(needed, "GLIBC_")[:2]
        gcc = ".".join(map(str, newest_version(needed, "GCC_")))
        plat = f"manylinux_{major}_{minor}_{arch()}"
        with open(os.path.join(staged, "share", "stoker", "REQUIRES"), "w") as f:
            f.write(f"glibc {major}.{minor}\nlibgcc_s GCC_{gcc}\n")
        for old in os.listdir(out_dir):
            if old.startswith("stoker-"):
                os.remove(os.path.join(out_dir, old))
        tar = tarball(staged, out_dir, name)
        whl = wheel(staged, out_dir, ver, plat)
    for p in (tar, whl):
        print(f"package: {os.path.relpath(p, ROOT)} "
              f"({os.path.getsize(p) / 2**20:.1f} MiB)")
    print(f"package: needs glibc >= {major}.{minor} ({plat}) and libgcc_s")


if __name__ == "__main__":
    main(sys.argv)
