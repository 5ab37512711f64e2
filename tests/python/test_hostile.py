"""A hostile user against a shared, non-root stokerd, with three real uids:
the daemon's, a victim's and an attacker's (both trainers in the socket's
group). For every attack the suite asserts the attacker's clear error, that
the victim's reads (a train and a cached val Loader) keep their checksums
while provably overlapping the attack (each holds its session open
mid-epoch until the attack has ended, and is checked to be still running
then), that the daemon still answers health, and that SIGTERM still stops
it in time.
Needs root to create the users; skipped with a message otherwise."""

import contextlib
import json
import os
import pwd
import grp
import shutil
import signal
import subprocess
import time

import pytest

from conftest import wait_for_socket
from test_dist import bundle  # noqa: F401 (fixture)
from test_service import (DAEMON_USER, GROUP, TRAINER as VICTIM,
                          TRAINER2 as ATTACKER, as_user, needs_users,
                          readable_copy, users)  # noqa: F401 (fixture)

DRAIN_S = 15
# The victim shares its private data with the daemon (not with the attacker)
# through this group, which the daemon's user joins.
VICTIM_DATA_GROUP = "stoker-test-vd"
VICTIM_READ = ("--batch-size", "5", "--transform", "train", "--size", "40",
               "--seed", "11", "--epochs", "3")

NO_STORE = "http://127.0.0.1:9"

VICTIM_READ_PY = r"""
import hashlib, sys, stoker
data, sock, transform = sys.argv[1], sys.argv[2], sys.argv[3]
ld = stoker.Loader(data, batch_size=5, transform=transform, shuffle=True, image_size=40, seed=11,
                   socket=sock, timeout=60, resume_timeout=0)
digest = hashlib.sha256()
for epoch in range(3):
    for i, b in enumerate(ld.batches()):
        digest.update(memoryview(b.images).cast("B"))
        digest.update(memoryview(b.labels).cast("B"))
        if epoch == 0 and i == 0:
            print("reading", flush=True)
            sys.stdin.readline()  # Until the attack has ended.
print(digest.hexdigest(), flush=True)
"""


class Victim:
    """The victim's Loader (`transform`: train, or val, which the daemon
    caches), holding its session open mid-epoch from its first batch until
    resume(): an attack made in between provably overlaps its read."""

    def __init__(self, node, transform="train"):
        self.proc = subprocess.Popen(
            python_as(VICTIM, node, VICTIM_READ_PY, node.data, node.socket, transform),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "reading", self.proc.stderr.read()

    def resume(self):
        """The checksum of the victim's three epochs."""
        assert self.proc.poll() is None, "the victim's read ended before the attack did"
        out, err = self.proc.communicate("go\n", timeout=300)
        assert self.proc.returncode == 0, err
        return out.strip()


VICTIM_TRANSFORMS = ("train", "val")


class Node:
    """A stokerd of the bundle running as DAEMON_USER, with an L2 cache,
    its log in a file; the victim's dataset and the attacker's folder."""

    daemon_user = DAEMON_USER
    victims = True  # The victim's baseline reads are made.
    # The object store endpoint the daemon may reach, and flags of its own.
    store = NO_STORE
    daemon_flags = ()

    def __init__(self, bundle, dataset):  # noqa: F811
        self.top, self.data = readable_copy(dataset)
        self.bundle = bundle
        self.stokerctl = os.path.join(bundle, "bin", "stokerctl")
        daemon = pwd.getpwnam(self.daemon_user)
        run_dir = os.path.join(self.top, "run")
        os.mkdir(run_dir, 0o750)
        os.chown(run_dir, daemon.pw_uid, grp.getgrnam(GROUP).gr_gid)
        # L2 made readable by everyone, as it would be outside systemd with
        # a lax umask: the daemon must refuse it as a dataset anyway.
        self.l2 = os.path.join(self.top, "l2")
        os.mkdir(self.l2, 0o755)
        os.chown(self.l2, daemon.pw_uid, daemon.pw_gid)
        self.socket = os.path.join(run_dir, "stoker.sock")
        self.log_path = os.path.join(self.top, "stokerd.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            as_user(self.daemon_user, os.path.join(bundle, "bin", "stokerd"), "--socket",
                    self.socket, "--threads", "2", "--metrics-address", "",
                    *(["--allow-root"] if daemon.pw_uid == 0 else []),
                    "--l2-path", self.l2, "--shm-prefix", "stoker-hostile.",
                    # An object store nobody serves: what a session reads
                    # before its first request is attacked there.
                    "--object-store-endpoints", self.store,
                    # Small: arrays are read from their mappings, not copied.
                    "--l1-bytes", "1048576", *self.daemon_flags,
                    group=GROUP),
            stdout=subprocess.DEVNULL, stderr=self.log)
        wait_for_socket(self.socket, self.proc)
        # The attacker's own folder (it owns everything in it).
        self.mine = os.path.join(self.top, "attacker")
        shutil.copytree(self.data, self.mine)
        self.give(self.mine, ATTACKER)
        # Each victim's checksum with nothing beside it.
        self.baseline = ({t: Victim(self, t).resume() for t in VICTIM_TRANSFORMS}
                         if self.victims else {})

    def give(self, path, user):
        pw = pwd.getpwnam(user)
        for base, dirs, files in os.walk(path):
            os.chown(base, pw.pw_uid, pw.pw_gid)
            for f in files:
                os.chown(os.path.join(base, f), pw.pw_uid, pw.pw_gid, follow_symlinks=False)
        if os.path.isfile(path):
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def ctl(self, user, *args, timeout=120):
        return subprocess.run(as_user(user, self.stokerctl, "--socket", self.socket, *args),
                              capture_output=True, text=True, timeout=timeout)

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        """SIGTERM stops the daemon within its drain time."""
        if self.proc.poll() is None:
            began = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=DRAIN_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"stokerd ignored SIGTERM for {DRAIN_S} s")
            self.stop_seconds = time.monotonic() - began
            print(f"stokerd stopped {self.stop_seconds:.2f} s after SIGTERM")
        self.log.close()

    def remove(self):
        shutil.rmtree(self.top, ignore_errors=True)


@pytest.fixture(scope="module")
def data_group(users):  # noqa: F811
    try:
        grp.getgrnam(VICTIM_DATA_GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", VICTIM_DATA_GROUP], check=True)
    subprocess.run(["usermod", "-aG", VICTIM_DATA_GROUP, DAEMON_USER], check=True)


@contextlib.contextmanager
def running(kind, bundle, dataset):  # noqa: F811
    """A Node of class `kind`; afterwards it must have lived through the
    test and stopped cleanly on SIGTERM."""
    n = kind(bundle, dataset)
    try:
        yield n
    finally:
        stopped = n.proc.poll() is None
        log = n.log_text()
        try:
            n.stop()
        finally:
            n.remove()
        assert stopped, f"stokerd died ({n.proc.returncode}) during the test:\n" + log[-3000:]
        assert n.proc.returncode == 0, n.proc.returncode


@pytest.fixture()
def node(users, data_group, bundle, dataset):  # noqa: F811
    with running(Node, bundle, dataset) as n:
        yield n


@contextlib.contextmanager
def victim_alongside(node):
    """The victim's train and val reads hold their sessions open while the
    block attacks; afterwards each is still running, its checksum is the
    undisturbed one, and the daemon answers health."""
    victims = {t: Victim(node, t) for t in VICTIM_TRANSFORMS}
    yield
    assert {t: v.resume() for t, v in victims.items()} == node.baseline
    assert node.proc.poll() is None, node.log_text()[-3000:]
    health = node.ctl(VICTIM, "health")
    assert health.returncode == 0, health.stderr


def python_as(user, node, script, *args, env=()):
    """The command line running `script` as `user` with the bundle's Python
    package (and `env`, NAME=value strings)."""
    py = os.path.join(node.bundle, "lib", "stoker", "python")
    return as_user(user, "env", f"PYTHONPATH={py}", *env, "/usr/bin/python3", "-c", script,
                   *args)


def attacker_python(node, script, *args, user=ATTACKER):
    """`script` run as the attacker (or `user`) with the bundle's Python package."""
    return subprocess.run(python_as(user, node, script, *args), capture_output=True, text=True,
                          timeout=120)


def attacker_reads(node, *args, errors_ok=True):
    """The attacker's stokerctl read; its JSON summary (or None) and run."""
    extra = ("--on-error", "zeros", "--allow-errors") if errors_ok else ()
    out = node.ctl(ATTACKER, "read", "--batch-size", "4", *extra, *args)
    try:
        return json.loads(out.stdout), out
    except ValueError:
        return None, out


SCRIBBLE = r"""
import ctypes, sys, stoker
ld = stoker.Loader(sys.argv[1], batch_size=2, transform="val", image_size=16,
                   shuffle=True, socket=sys.argv[2], timeout=5)
it = iter(ld)
next(it)
rings = [l.split()[0] for l in open("/proc/self/maps") if "stoker-hostile." in l]
assert rings, "no ring mapped"
for r in rings:
    start = int(r.split("-")[0], 16)
    words = (ctypes.c_uint64 * 512).from_address(start)
    for value in (0xFFFFFFFFFFFFFFFF, 0, 1 << 63, 4096):
        for w in range(512):
            words[w] = value ^ w
print("scribbled", len(rings), flush=True)
for _ in range(3):
    try:
        next(it)
    except Exception as e:
        print("client error:", type(e).__name__, flush=True)
        break
"""


@needs_users
def test_ring_header_writes_do_not_reach_the_daemon(node):
    """Every word of the attacker's own ring header overwritten (geometry,
    counters, hints) while its session runs: the daemon keeps its own copy
    of the layout and bounds every hint."""
    with victim_alongside(node):
        out = attacker_python(node, SCRIBBLE, node.mine, node.socket)
        assert "scribbled 1" in out.stdout, out.stderr


@needs_users
def test_sparse_terabyte_file_is_one_samples_error(node):
    cls = sorted(os.listdir(node.mine))[0]
    big = os.path.join(node.mine, cls, "huge.jpg")
    with open(big, "wb") as f:
        f.truncate(1 << 40)
    node.give(big, ATTACKER)
    with victim_alongside(node):
        summary, out = attacker_reads(node, "--dataset", node.mine)
        assert out.returncode == 0, out.stderr
        assert summary["errors"] == 1
    assert "over the daemon's limit of 1073741824 bytes" in node.log_text()


@needs_users
def test_manifest_of_fifos_fails_fast_and_blocks_nobody(node):
    fifos = os.path.join(node.mine, "fifos")
    os.mkdir(fifos)
    lines = []
    for i in range(100):
        os.mkfifo(os.path.join(fifos, f"{i}.jpg"))
        lines.append(f"fifos/{i}.jpg\t0\n")
    manifest = os.path.join(node.mine, "fifos.tsv")
    with open(manifest, "w") as f:
        f.writelines(lines)
    node.give(node.mine, ATTACKER)
    with victim_alongside(node):
        summary, out = attacker_reads(node, "--dataset", manifest)
        assert out.returncode == 0, out.stderr
        assert summary["errors"] == 100
    assert "is a FIFO: only regular files are read" in node.log_text()


@needs_users
def test_manifests_that_are_no_files_are_refused(node):
    fifo = os.path.join(node.mine, "fifo.tsv")
    os.mkfifo(fifo)
    node.give(fifo, ATTACKER)
    with victim_alongside(node):
        for manifest, why in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
            summary, out = attacker_reads(node, "--dataset", manifest, errors_ok=False)
            assert out.returncode != 0
            assert "FAILED_PRECONDITION" in out.stderr and why in out.stderr, out.stderr


@needs_users
def test_the_daemons_rings_and_cache_are_no_dataset(node):
    """/dev/shm (every process's shared memory; rings are memory files with
    no name there) as a manifest's folder, and the daemon's L2 folder as an
    LMDB dataset."""
    name = f"stoker-hostile-list-{os.getpid()}.tsv"
    manifest = os.path.join("/dev/shm", name)
    with open(manifest, "w") as f:
        f.write(f"{name}\t0\n")
    node.give(manifest, ATTACKER)
    try:
        with victim_alongside(node):
            # The victim's ring is open, and nowhere in /dev/shm.
            assert not [n for n in os.listdir("/dev/shm") if n.startswith("stoker-hostile.")]
            summary, out = attacker_reads(node, "--dataset", manifest, errors_ok=False)
            assert out.returncode != 0
            assert "PERMISSION_DENIED" in out.stderr, out.stderr
            assert "daemon's own files" in out.stderr, out.stderr
            summary, out = attacker_reads(node, "--dataset", json.dumps({"lmdb": {"path": node.l2}}),
                                          errors_ok=False)
            assert out.returncode != 0
            assert "PERMISSION_DENIED" in out.stderr, out.stderr
    finally:
        os.unlink(manifest)


@needs_users
def test_cached_files_of_another_user_are_not_served(node):
    """The victim's private pictures are in the daemon's RAM cache; the
    attacker's manifest names them by absolute path."""
    private = os.path.join(node.top, "victim-private")
    shutil.copytree(node.data, private)
    node.give(private, VICTIM)
    shutil.chown(private, group=VICTIM_DATA_GROUP)
    os.chmod(private, 0o750)
    out = node.ctl(VICTIM, "read", "--dataset", private, *VICTIM_READ[:-2])
    assert out.returncode == 0, out.stderr
    files = [os.path.join(b, f) for b, _, fs in os.walk(private) for f in sorted(fs)]
    manifest = os.path.join(node.mine, "theirs.tsv")
    with open(manifest, "w") as f:
        f.writelines(f"{p}\t0\n" for p in files)
    node.give(manifest, ATTACKER)
    with victim_alongside(node):
        summary, out = attacker_reads(node, "--dataset", manifest)
        assert out.returncode == 0, out.stderr
        assert summary["errors"] == len(files)
    assert "is outside the dataset folder" in node.log_text()


READ_HDF5 = r"""
import sys, stoker
for path in sys.argv[2:]:
    try:
        ld = stoker.Loader({"hdf5": {"path": path, "dataset": "x"}}, batch_size=1,
                           shuffle=True, socket=sys.argv[1], timeout=10,
                           fields=[stoker.array((16,), "x", dtype="uint8")])
        for b in ld.batches():
            print("DATA", bytes(memoryview(b.field("x")).cast("B")), flush=True)
    except Exception as e:
        print("ERROR", path, e, flush=True)
"""


@needs_users
def test_hdf5_cannot_read_past_its_own_file(node):
    """External storage, an external link and a virtual dataset, each
    pointing at a 0600 file of the daemon's user: HDF5 would open those by
    path, with the daemon's rights."""
    h5py = pytest.importorskip("h5py")
    import numpy as np
    secret = os.path.join(node.top, "secret.bin")
    secret_h5 = os.path.join(node.top, "secret.h5")
    with open(secret, "wb") as f:
        f.write(b"DAEMON-SECRET-16")
    with h5py.File(secret_h5, "w") as f:
        f["x"] = np.frombuffer(b"DAEMON-SECRET-H5" * 4, dtype=np.uint8).reshape(4, 16)
    daemon = pwd.getpwnam(DAEMON_USER)
    for p in (secret, secret_h5):
        os.chown(p, daemon.pw_uid, daemon.pw_gid)
        os.chmod(p, 0o600)
    files = []
    with h5py.File(os.path.join(node.mine, "external.h5"), "w") as f:
        f.create_dataset("x", (1, 16), dtype="u1", external=[(secret, 0, 16)])
    with h5py.File(os.path.join(node.mine, "link.h5"), "w") as f:
        f["x"] = h5py.ExternalLink(secret_h5, "/x")
    with h5py.File(os.path.join(node.mine, "virtual.h5"), "w") as f:
        layout = h5py.VirtualLayout(shape=(4, 16), dtype="u1")
        layout[:] = h5py.VirtualSource(secret_h5, "x", shape=(4, 16))
        f.create_virtual_dataset("x", layout)
    for name in ("external.h5", "link.h5", "virtual.h5"):
        files.append(os.path.join(node.mine, name))
        node.give(files[-1], ATTACKER)
    with victim_alongside(node):
        out = attacker_python(node, READ_HDF5, node.socket, *files)
    assert "SECRET" not in out.stdout
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stdout + out.stderr
    for line, why in zip(lines, ("keeps its data in external files", "is an external link",
                                 "is a virtual dataset")):
        assert line.startswith("ERROR") and "PERMISSION_DENIED" in line, line
        assert why in line, line


HOSTILE_HDF5 = r"""
import sys, warnings, stoker
warnings.simplefilter("ignore")
ld = stoker.Loader({"hdf5": {"path": sys.argv[2], "dataset": "x"}}, batch_size=50,
                   shuffle=True, socket=sys.argv[1], timeout=300, on_error="zeros",
                   fields=[stoker.array((8, 16, 16), "x")])
batches = sum(1 for _ in ld.batches())
print("BATCHES", batches, len(ld), flush=True)
"""


def hostile_hdf5_files(folder, n, seed=33):
    """`n` mutations of one gzip-chunked volume as h5py writes it: bytes
    flipped, runs overwritten with patterns, chunks of the file cut out or
    repeated, the file cut short. Names in upper and lower case."""
    h5py = pytest.importorskip("h5py")
    import numpy as np
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(np.arange(8), np.arange(16), np.arange(16), indexing="ij")
    volume = (np.sin(z * 0.3 + y * 0.2) * 50 + x + rng.normal(0, 2, (8, 16, 16))).astype("f4")
    base = os.path.join(folder, "base.tmp")
    with h5py.File(base, "w") as f:
        f.create_dataset("x", data=volume, chunks=(4, 8, 8), compression="gzip", shuffle=True)
    good = open(base, "rb").read()
    os.remove(base)
    for k in range(n):
        b = bytearray(good)
        how = k % 5
        if how == 0:  # Scattered bit flips.
            for at in rng.integers(0, len(b), 1 + k % 16):
                b[at] ^= 1 << int(rng.integers(0, 8))
        elif how == 1:  # A run overwritten with 0x00, 0xff or a counter.
            at, run = int(rng.integers(0, len(b))), int(rng.integers(1, 64))
            pattern = (b"\x00", b"\xff", bytes(range(256)))[k % 3]
            b[at:at + run] = (pattern * 64)[:run]
        elif how == 2:  # Cut short.
            del b[int(rng.integers(0, len(b))):]
        elif how == 3:  # A stretch repeated in place (addresses and sizes now lie).
            at, run = int(rng.integers(0, len(b))), int(rng.integers(8, 256))
            b[at:at] = b[at:at + run]
        else:  # Big integers where sizes and addresses may be.
            at = int(rng.integers(0, max(1, len(b) - 8)))
            big = (2**63 - 1, 2**64 - 1, 2**32, 2**40)[int(rng.integers(0, 4))]
            b[at:at + 8] = big.to_bytes(8, "little")
        name = f"v{k:04d}." + ("H5" if k % 2 else "h5")
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes(b))


@needs_users
def test_a_thousand_hostile_hdf5_files_cost_only_their_own_samples(node):
    """1,000 mutated gzip HDF5 volumes read as one folder: libhdf5 parses
    them in the sandboxed reader, so whatever they do to it is a per-sample
    error for the attacker, while the daemon lives and the victim's reads
    keep their checksums."""
    folder = os.path.join(node.mine, "hostile-h5")
    os.makedirs(folder)
    hostile_hdf5_files(folder, 1000)
    node.give(folder, ATTACKER)
    with victim_alongside(node):
        out = attacker_python(node, HOSTILE_HDF5, node.socket, folder)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    # Every batch of 50 delivered (a sample that fails is zeros).
    assert out.stdout.split() == ["BATCHES", "20", "20"], out.stdout + out.stderr[-3000:]


READ_NPY = r"""
import sys, stoker
for path in sys.argv[2:]:
    try:
        ld = stoker.Loader({"npy": {"path": path}}, batch_size=1, socket=sys.argv[1],
                           shuffle=True, timeout=10, fields=[stoker.array((8,), "x")])
        for b in ld.batches():
            print("DATA", flush=True)
            break
    except Exception as e:
        print("ERROR", path, e, flush=True)
"""


def npy_header(shape, descr="<f8"):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, shape)
    d += " " * (-(10 + len(d) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode()


@needs_users
def test_npy_shapes_that_overflow_are_refused(node):
    """2^62 doubles (2^65 bytes, 0 after a 64-bit wrap), 2^40 rows of zero
    elements, and 2^61 rows of 8 doubles in a sparse file."""
    cases = {"wrap.npy": (npy_header("4611686018427387904,"), "exceeds"),
             "empty_rows.npy": (npy_header("1099511627776, 0"), "over the daemon's limit"),
             "sparse.npy": (npy_header("2305843009213693952, 8"), "exceeds")}
    files = []
    for name, (header, _) in cases.items():
        path = os.path.join(node.mine, name)
        with open(path, "wb") as f:
            f.write(header)
            if name == "sparse.npy":
                f.truncate(1 << 40)
        node.give(path, ATTACKER)
        files.append(path)
    with victim_alongside(node):
        out = attacker_python(node, READ_NPY, node.socket, *files)
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stdout + out.stderr
    for line, (_, why) in zip(lines, cases.values()):
        assert line.startswith("ERROR") and why in line, line


@needs_users
def test_root_is_no_admin_unless_the_group_says_so(node):
    """uid 0 (a trainer running as root in its container) may not resize the
    node's pools or close others' sessions; the daemon's own user may."""
    args = ("resize", "--pool", "decode", "--threads", "1")
    out = subprocess.run([node.stokerctl, "--socket", node.socket, *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "PERMISSION_DENIED" in out.stderr and "for admins" in out.stderr, out.stderr
    out = node.ctl(DAEMON_USER, *args)
    assert out.returncode == 0, out.stderr


TRUNCATE = r"""
import os, sys, warnings, stoker
path = sys.argv[2]
ld = stoker.Loader({"npy": {"path": path}}, batch_size=16, socket=sys.argv[1],
                   timeout=20, on_error="zeros", shuffle=False,
                   fields=[stoker.array((1024,), "x")])
batches = ld.batches()
next(batches)
os.truncate(path, 128)  # Its own file: the daemon has it mapped.
failed = 0
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for b in batches:
        failed += sum(1 for s in b.status if s != 0)
print("failed", failed, flush=True)
"""


@needs_users
def test_truncating_a_mapped_file_fails_its_reads_not_the_daemon(node):
    """The attacker's .npy (4 MiB, mapped by the daemon) cut to its header
    while the session reads it: SIGBUS in the daemon unless guarded."""
    path = os.path.join(node.mine, "rows.npy")
    with open(path, "wb") as f:
        f.write(npy_header("1024, 1024", "<f4"))
        f.write(bytes(range(256)) * (1024 * 4 * 1024 // 256))
    node.give(path, ATTACKER)
    with victim_alongside(node):
        out = attacker_python(node, TRUNCATE, node.socket, path)
    assert out.stdout.startswith("failed "), out.stdout + out.stderr
    assert int(out.stdout.split()[1]) > 0
    assert "the file shrank while it was being read" in node.log_text()
