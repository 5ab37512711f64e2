"""The release artifacts (make dist): the bundle is relocatable and needs only
glibc 2.28 and libgcc_s of the host, libstoker.so exports only the C ABI,
and the wheel gives a working Loader in fresh venvs of other interpreters,
next to grpc and torch in one process."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

import pytest

import s3_server
from conftest import ROOT, ROOT_FLAG, STOKERCTL, Daemon, wait_for_socket

DIST = os.path.join(ROOT, "dist")
sys.path.insert(0, os.path.join(ROOT, "deploy"))
from package import SYSTEM_LIBS as SYSTEM  # noqa: E402 (what is never bundled)
from package import FLOOR, over_floor  # noqa: E402 (the shipping floor)


def artifact(pattern):
    found = glob.glob(os.path.join(DIST, pattern))
    assert len(found) == 1, (f"expected one {pattern} in {DIST} (make dist), "
                             f"found {found}")
    return found[0]


@pytest.fixture(scope="module")
def bundle():
    """The tarball unpacked into a fresh folder (world-readable, so other
    users' tests can run it too)."""
    tmp = tempfile.mkdtemp(prefix="stoker-bundle-")
    os.chmod(tmp, 0o755)
    with tarfile.open(artifact("stoker-*-linux-*.tar.gz")) as tar:
        tar.extractall(tmp)
    (top,) = os.listdir(tmp)
    yield os.path.join(tmp, top)
    shutil.rmtree(tmp, ignore_errors=True)


def read_checksum(socket, dataset, stokerctl=STOKERCTL, env=None):
    out = subprocess.run(
        [stokerctl, "--socket", socket, "read", "--dataset", dataset,
         "--batch-size", "5", "--transform", "train", "--size", "40",
         "--seed", "11"], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)["checksum"]


def elf_files(folder):
    for base, _, names in os.walk(folder):
        for n in names:
            path = os.path.join(base, n)
            if not os.path.islink(path):
                with open(path, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        yield path


def dynamic(path):
    text = subprocess.run(["readelf", "-d", "-W", path], check=True,
                          capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", text)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.+)\]", text)
    return needed, runpath


def test_bundle_needs_nothing_outside_itself_but_glibc(bundle):
    private = set(os.listdir(os.path.join(bundle, "lib", "stoker")))
    files = list(elf_files(bundle))
    # The four shipped files carry their libraries inside, but ISA-L.
    assert sorted(os.path.relpath(f, bundle) for f in files) == [
        "bin/stoker-h5probe", "bin/stokerctl", "bin/stokerd",
        "lib/libstoker.so", "lib/stoker/libisal.so.2"]
    assert over_floor(bundle) == []
    assert FLOOR["GLIBC_"] == (2, 28)
    for path in files:
        needed, runpath = dynamic(path)
        for lib in needed:
            assert SYSTEM.match(lib) or lib in private, f"{path} needs {lib}"
        for rp in runpath:
            assert rp.startswith("$ORIGIN"), f"{path} has RUNPATH {rp}"
    # Every file carries its C++ runtime: only glibc and libgcc_s.
    for path in files:
        needed, _ = dynamic(path)
        assert set(needed) - {"libisal.so.2"} <= {
            "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
            "libgcc_s.so.1", "ld-linux-x86-64.so.2"}, (path, needed)
    assert dynamic(os.path.join(bundle, "lib", "libstoker.so"))[1] == []
    # ldd agrees: every library resolves inside the bundle or the system.
    for b in ("stokerd", "stokerctl"):
        out = subprocess.run(["ldd", os.path.join(bundle, "bin", b)],
                             check=True, capture_output=True, text=True).stdout
        assert "not found" not in out
        for line in out.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line)
            if m and not SYSTEM.match(m.group(1)):
                assert m.group(2).startswith(bundle), line
    requires = open(os.path.join(bundle, "share", "stoker", "REQUIRES")).read()
    m = re.match(r"glibc 2\.(\d+)\nlibgcc_s GCC_[\d.]+\n$", requires)
    assert m and int(m.group(1)) <= FLOOR["GLIBC_"][1], requires
    wheel = os.path.basename(artifact("stoker-*.whl"))
    assert f"-py3-none-manylinux_2_{m.group(1)}_x86_64.whl" in wheel


def test_the_scan_names_each_file_above_the_floor():
    """What `make dist` refuses: Debian 12's own builds of expat and gRPC."""
    folder = tempfile.mkdtemp(prefix="stoker-floor-")
    try:
        lib = "/usr/lib/x86_64-linux-gnu"
        for name in ("libexpat.so.1", "libgrpc++.so.1.51", "libc.so.6"):
            shutil.copy(os.path.join(lib, name), folder)
        os.symlink("libexpat.so.1", os.path.join(folder, "libexpat.so"))
        found = over_floor(folder)
        assert "libexpat.so.1 needs GLIBC_2.36" in found
        assert "libgrpc++.so.1.51 needs GLIBCXX_3.4.29" in found
        assert "libc.so.6 needs GLIBC_PRIVATE" in found  # No number: never allowed.
        assert all(line.split()[0] in ("libexpat.so.1", "libgrpc++.so.1.51", "libc.so.6")
                   for line in found), found
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_libstoker_exports_only_the_c_abi(bundle):
    out = subprocess.run(
        ["nm", "-D", "--defined-only", os.path.join(bundle, "lib", "libstoker.so")],
        check=True, capture_output=True, text=True).stdout
    exported = [line.split()[-1] for line in out.splitlines()
                if len(line.split()) == 3 and line.split()[1].isupper()
                and line.split()[1] != "A"]
    assert exported, out
    assert all(name.startswith("stoker_") for name in exported), exported
    header = open(os.path.join(bundle, "include", "stoker.h")).read()
    declared = set(re.findall(r"\b(stoker_[a-z_0-9]+)\(", header))
    assert {n.split("@")[0] for n in exported} == declared


def test_relocated_binaries_serve_under_an_empty_environment(bundle, dataset):
    reference = Daemon(threads=2)
    try:
        want = read_checksum(reference.socket, dataset)
    finally:
        reference.stop()
    folder = tempfile.mkdtemp(prefix="stoker-reloc-")
    sock = os.path.join(folder, "s.sock")
    proc = subprocess.Popen(
        ["env", "-i", os.path.join(bundle, "bin", "stokerd"), "--socket", sock,
         "--threads", "2", "--metrics-address", "", *ROOT_FLAG],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_socket(sock, proc)
        got = read_checksum(sock, dataset,
                            stokerctl=os.path.join(bundle, "bin", "stokerctl"),
                            env={})
        assert got == want
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(folder, ignore_errors=True)


LOADER_SCRIPT = r"""
import json, sys
order = sys.argv[2].split(",") if sys.argv[2] else []
for name in order:  # stoker and other native stacks, in this order.
    __import__(name)
import stoker
from stoker._native import lib
numpy = sys.modules.get("numpy")
socket = None if sys.argv[3] == "embedded" else sys.argv[3]
ld = stoker.Loader(sys.argv[1], batch_size=5, transform="train", shuffle=True,
                   image_size=40, seed=11, socket=socket)
c = lib.Checksum()
for b in ld.batches():
    c.update(b.images); c.update(b.labels); c.update(b.status)
kinds = set(type(x).__name__ for x, _ in ld)
import stoker._daemon as d
print(json.dumps({"checksum": c.hex, "version": stoker.__version__,
                  "stokerd": d.find_stokerd(),
                  "python": sys.version.split()[0], "kinds": sorted(kinds),
                  "lib": stoker._native._dll._name}))
"""


def venv_with_wheel(python, *venv_flags):
    folder = tempfile.mkdtemp(prefix="stoker-venv-")
    subprocess.run([python, "-m", "venv", *venv_flags, folder], check=True,
                   capture_output=True)
    subprocess.run([os.path.join(folder, "bin", "pip"), "install", "-q",
                    "--no-index", artifact("stoker-*.whl")], check=True,
                   capture_output=True)
    return folder


def run_in(venv, dataset, socket, order=(), env=None):
    env = {"PATH": os.path.join(venv, "bin") + ":/usr/bin:/bin",
           "HOME": venv, "STOKER_SOCKET": "embedded",
           "STOKER_EMBEDDED_DIR": os.path.join(venv, "embedded"), **(env or {})}
    out = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                          LOADER_SCRIPT, dataset, ",".join(order), socket],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def other_pythons():
    """CPython >= 3.8 interpreters on this machine other than the one running
    the tests (and Debian's): python3 on PATH, and pyenv's if present."""
    found = {}
    cands = [shutil.which("python3")] + sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))
    for cand in cands:
        if not cand or os.path.realpath(cand) == os.path.realpath(sys.executable):
            continue
        out = subprocess.run([cand, "-c", "import sys; print(sys.version_info[:2] "
                              ">= (3, 8), sys.version.split()[0])"],
                             capture_output=True, text=True)
        ok, _, version = out.stdout.strip().partition(" ")
        if out.returncode == 0 and ok == "True":
            found.setdefault(version, cand)
    return sorted(found.items())


OTHER_PYTHONS = other_pythons()


@pytest.mark.skipif(not OTHER_PYTHONS, reason="no second Python interpreter")
@pytest.mark.parametrize("version,python", OTHER_PYTHONS)
def test_wheel_in_a_venv_of_another_interpreter(daemon, dataset, version, python):
    venv = venv_with_wheel(python)
    try:
        want = read_checksum(daemon.socket, dataset)
        got = run_in(venv, dataset, daemon.socket)
        assert got["checksum"] == want
        assert got["python"] == version
        assert got["lib"].startswith(venv)  # The wheel's own library.
        print(f"\nwheel in a venv of Python {version} ({python}): {got['kinds']}")
        # No socket and no node daemon: the wheel's own stokerd, embedded.
        embedded = run_in(venv, dataset, "embedded")
        assert embedded["checksum"] == want
        assert embedded["stokerd"].startswith(venv)
        out = subprocess.run([os.path.join(venv, "bin", "stokerd"), "--version"],
                             capture_output=True, text=True, env={})
        assert out.returncode == 0 and got["version"] in out.stdout, out
        # The console script runs the wheel's stokerctl.
        out = subprocess.run([os.path.join(venv, "bin", "stokerctl"),
                              "--socket", daemon.socket, "health"],
                             capture_output=True, text=True, env={})
        assert out.returncode == 0, out.stderr
    finally:
        shutil.rmtree(venv, ignore_errors=True)


@pytest.mark.skipif(not s3_server.available(), reason="moto_server not found (make test sets "
                    "STOKER_MOTO_SERVER)")
def test_a_plain_install_reads_a_bucket_its_user_names(daemon, dataset):
    """pip install, then s3:// with nothing but the user's AWS_* variables:
    the embedded daemon reaches the endpoint they name (a loopback one, that
    no operator listed), and reads what the local folder holds."""
    python = OTHER_PYTHONS[0][1] if OTHER_PYTHONS else "/usr/bin/python3"
    venv = venv_with_wheel(python)
    try:
        with s3_server.MotoServer() as moto:
            moto.upload_folder(dataset, "photos", "train")
            aws = {"AWS_ENDPOINT_URL": moto.url, "AWS_ACCESS_KEY_ID": "AKIAPLAIN",
                   "AWS_SECRET_ACCESS_KEY": "plain-secret", "AWS_DEFAULT_REGION": "us-east-1"}
            got = run_in(venv, "s3://photos/train/", "embedded", env=aws)
        assert got["checksum"] == read_checksum(daemon.socket, dataset)
        assert got["stokerd"].startswith(venv)
        log = open(os.path.join(venv, "embedded", "stokerd.log")).read()
        assert "plain-secret" not in log
    finally:
        shutil.rmtree(venv, ignore_errors=True)


@pytest.mark.parametrize("order", [("grpc", "torch", "stoker"),
                                   ("stoker", "grpc", "torch"),
                                   ("torch", "stoker", "grpc")])
def test_wheel_next_to_grpc_and_torch_in_one_process(daemon, dataset, order):
    venv = venv_with_wheel("/usr/bin/python3", "--system-site-packages")
    try:
        got = run_in(venv, dataset, daemon.socket, order)
        assert got["checksum"] == read_checksum(daemon.socket, dataset)
        assert got["kinds"] == ["Tensor"]  # Debian's torch, zero-copy views.
        assert got["lib"].startswith(venv)
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def test_make_install_layout_and_systemd_unit(bundle):
    prefix = tempfile.mkdtemp(prefix="stoker-prefix-")
    try:
        subprocess.run([sys.executable, os.path.join(ROOT, "deploy", "package.py"),
                        "install", prefix], check=True, capture_output=True)
        for rel in ("bin/stokerd", "bin/stokerctl", "lib/libstoker.so",
                    "include/stoker.h", "lib/stoker/python/stoker/__init__.py",
                    "share/stoker/systemd/stokerd.service",
                    "share/stoker/kubernetes/stokerd-daemonset.yaml"):
            assert os.path.exists(os.path.join(prefix, rel)), rel
        unit = os.path.join(prefix, "share", "stoker", "systemd", "stokerd.service")
        assert f"ExecStart={prefix}/bin/stokerd " in open(unit).read()
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            pytest.skip("systemd-analyze is not installed: unit not verified")
        out = subprocess.run([analyze, "verify", unit], capture_output=True,
                             text=True, cwd=prefix)
        assert out.returncode == 0, out.stderr
        sec = subprocess.run([analyze, "security", "--offline=yes", unit],
                             capture_output=True, text=True, cwd=prefix)
        score = float(re.search(r"Overall exposure level for \S+: ([\d.]+)",
                                sec.stdout).group(1))
        print(f"\nsystemd-analyze security: {score}")
        assert score <= 3.0
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
