"""The wheel on a host older than the one it was built on: a Debian 11 root
file system (glibc 2.31, GCC 10's libgcc_s, Python 3.9, no Stoker
libraries) made from Debian's archive by mmdebstrap and entered with
chroot. pip installs the wheel into a fresh venv there, the wheel's stokerd
answers --version, and a Loader reads an epoch through the embedded daemon
with the checksum the node daemon gives here."""

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import tarfile
import tempfile

import pytest

from test_dist import LOADER_SCRIPT, artifact, read_checksum

# Made once per machine (about 45 s), kept for later runs.
CACHE = "/var/cache/stoker/rootfs"
SUITE, GLIBC, PYTHON = "bullseye", "2.31", "3.9"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")


def root_tarball():
    path = os.path.join(CACHE, f"{SUITE}-python3-venv.tar")
    if os.path.isfile(path):
        return path
    if os.path.isdir(path):  # A folder left by a run that named no format.
        shutil.rmtree(path)
    mmdebstrap = shutil.which("mmdebstrap")
    assert mmdebstrap, "mmdebstrap is missing: deploy/install-deps.sh installs it"
    os.makedirs(CACHE, exist_ok=True)
    partial = path + ".partial"
    # The format is named: mmdebstrap takes it from the name's suffix
    # otherwise, and ".partial" would make a folder.
    out = subprocess.run([mmdebstrap, "--quiet", "--variant=minbase", "--format=tar",
                          "--include=python3-venv", SUITE, partial,
                          "http://deb.debian.org/debian"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    os.rename(partial, path)
    return path


@pytest.fixture(scope="module")
def old_root():
    folder = tempfile.mkdtemp(prefix="stoker-old-host-")
    with tarfile.open(root_tarball()) as tar:
        tar.extractall(folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def in_chroot(root, script, env):
    """Runs `script` under /bin/sh in `root`, in mount and process
    namespaces of its own: /proc and /dev mounted there, and every process
    it starts (the embedded daemon too) ends with it."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    inner = f"env -i {exports} /bin/sh -ec {shlex.quote(script)}"
    outer = (f"mount -t proc proc {root}/proc && mount --rbind /dev {root}/dev && "
             f"exec chroot {root} /bin/sh -c {shlex.quote(inner)}")
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--pid",
                             "--fork", "--kill-child", "--", "/bin/sh", "-c", outer],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        # The namespace's first process dies with unshare, and all in it.
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_wheel_reads_an_epoch_on_glibc_2_31(old_root, daemon, dataset):
    work = os.path.join(old_root, "tmp", "t")
    shutil.copytree(dataset, os.path.join(work, "photos"))
    wheel = os.path.basename(artifact("stoker-*.whl"))
    shutil.copy(artifact("stoker-*.whl"), work)
    with open(os.path.join(work, "read.py"), "w") as f:
        f.write(LOADER_SCRIPT)
    env = {"PATH": "/tmp/t/v/bin:/usr/bin:/bin", "HOME": "/tmp/t",
           "STOKER_SOCKET": "embedded", "STOKER_EMBEDDED_DIR": "/tmp/t/embedded"}
    out = in_chroot(old_root, f"""
        ldd --version | head -n 1 >&2
        python3 -m venv /tmp/t/v
        /tmp/t/v/bin/pip install -q --no-index /tmp/t/{wheel}
        /tmp/t/v/bin/stokerd --version >&2
        /tmp/t/v/bin/python /tmp/t/read.py /tmp/t/photos '' embedded
    """, env)
    assert out.returncode == 0, out.stderr[-4000:]
    glibc_line, version_line = out.stderr.splitlines()[:2]
    assert glibc_line.endswith(" " + GLIBC), glibc_line
    got = json.loads(out.stdout)
    assert version_line.startswith("stokerd " + got["version"]), version_line
    assert got["python"].startswith(PYTHON + ".")
    assert got["stokerd"].startswith("/tmp/t/v/")  # The wheel's own, embedded.
    assert got["checksum"] == read_checksum(daemon.socket, dataset)
