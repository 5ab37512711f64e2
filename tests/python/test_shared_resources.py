"""Shared resources a hostile user of a node could take from another, with
the real uids of test_hostile.py: a stand-in for the daemon (a byte relay,
or the user's own stokerd) gets no secret, nor does the node's own daemon
(each request is signed in the trainer's process), a store that drips holds only
its user's reader threads, and failed samples cost the daemon a bounded
log. Each attack overlaps the victim's reads, which keep their checksums.
Needs root to create the users; skipped with a message otherwise."""

import os
import pwd
import subprocess

import pytest

from conftest import wait_for_socket
from s3_stores import Drip, LoopbackStore, image_folder_keys
from test_dist import bundle  # noqa: F401 (fixture)
from test_hostile import (ATTACKER, NO_STORE, VICTIM, Node, attacker_reads,  # noqa: F401
                          data_group, node, python_as, running, victim_alongside)
from test_service import as_user, needs_users, users  # noqa: F401 (fixture)


RELAY = r"""
import os, socket, sys, threading
folder, target = sys.argv[1], sys.argv[2]
got = []
def pump(src, dst, keep):
    while True:
        try:
            b = src.recv(65536)
        except OSError:
            b = b""
        if not b:
            break
        if keep:
            got.append(b)
        try:
            dst.sendall(b)
        except OSError:
            break
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve(listener, to):
    while True:
        c, _ = listener.accept()
        up = socket.socket(socket.AF_UNIX)
        up.connect(to)
        threading.Thread(target=pump, args=(c, up, True), daemon=True).start()
        threading.Thread(target=pump, args=(up, c, False), daemon=True).start()
for name, to in (("stoker.sock.ring", target + ".ring"), ("stoker.sock", target)):
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(os.path.join(folder, name))
    os.chmod(os.path.join(folder, name), 0o666)
    listener.listen(16)
    threading.Thread(target=serve, args=(listener, to), daemon=True).start()
print("relaying", flush=True)
sys.stdin.readline()
data = b"".join(got)
print(len(data), data.count(b"VICTIMSECRET"), flush=True)
"""

VICTIM_S3 = r"""
import sys, stoker
try:
    ld = stoker.Loader("s3://photos/train/", batch_size=2, transform="val", image_size=16,
                       shuffle=True, socket=sys.argv[1], timeout=20, resume_timeout=0)
    next(iter(ld))
except Exception as e:
    print(e, flush=True)
    sys.exit(3)
print("served", flush=True)
"""

SECRETS = ("AWS_ACCESS_KEY_ID=AKIAVICTIM", "AWS_SECRET_ACCESS_KEY=VICTIMSECRET",
           "AWS_DEFAULT_REGION=us-east-1")


@needs_users
@pytest.mark.parametrize("stand_in", ["relay", "stokerd"])
def test_a_daemon_of_another_user_gets_no_secret(node, stand_in):
    """The attacker listens in a folder of its own (0755, as anyone may make
    one): a byte relay to the real daemon, or its own unmodified stokerd
    with an object store listed. A victim pointed there is refused before
    it sends a byte, with a message naming the socket and its owner."""
    folder = os.path.join(node.top, "stand-in")
    os.mkdir(folder, 0o755)
    node.give(folder, ATTACKER)
    sock = os.path.join(folder, "stoker.sock")
    if stand_in == "relay":
        cmd = python_as(ATTACKER, node, RELAY, folder, node.socket)
    else:
        cmd = as_user(ATTACKER, os.path.join(node.bundle, "bin", "stokerd"), "--socket", sock,
                      "--socket-mode", "0666", "--threads", "1", "--metrics-address", "",
                      "--shm-prefix",
                      "stoker-standin.", "--object-store-endpoints", NO_STORE)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        if stand_in == "relay":
            assert proc.stdout.readline().strip() == "relaying", proc.stderr.read()
        else:
            wait_for_socket(sock, proc)
        with victim_alongside(node):
            victim = subprocess.run(python_as(VICTIM, node, VICTIM_S3, sock, env=SECRETS),
                                    capture_output=True, text=True, timeout=120)
        assert victim.returncode == 3, (victim.stdout, victim.stderr)
        attacker_uid = pwd.getpwnam(ATTACKER).pw_uid
        assert sock in victim.stdout and f"uid {attacker_uid}" in victim.stdout, victim.stdout
        assert "refusing to talk" in victim.stdout, victim.stdout
        if stand_in == "relay":
            out, _ = proc.communicate("done\n", timeout=30)
            assert out.split() == ["0", "0"], out  # Not a byte, nor the secret.
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=20)


class DripStore(LoopbackStore):
    """An S3 API store on loopback whose listings answer at once and whose
    objects drip, a byte a second, for as long as the client stays: the
    attacker's slow store (bucket "drip"). It counts the GETs in flight,
    and their most."""

    CLASSES = ("cat", "dog")
    PER_CLASS = 16
    SIZE = 100000

    def __init__(self):
        super().__init__({"drip": Drip(image_folder_keys("train", self.CLASSES, self.PER_CLASS),
                                       self.SIZE)})


class DripNode(Node):
    """A Node whose object store drips. Eight reader threads, so a user may
    hold four; no low speed and ten minutes' deadline, so that only the cap
    keeps reader threads for the victim, and only the session's close ends
    the attacker's reads."""

    READERS, CAP = 8, 4
    daemon_flags = ("--reader-threads", str(READERS), "--max-reader-threads-per-user", str(CAP),
                    "--object-store-low-speed", "0",
                    "--object-store-deadline", "10m")

    def __init__(self, bundle, dataset):  # noqa: F811
        self.drip = DripStore()
        self.store = self.drip.url
        super().__init__(bundle, dataset)

    def remove(self):
        self.drip.close()
        super().remove()


DRIP_READ_PY = r"""
import sys, stoker
ld = stoker.Loader("s3://drip/train/", batch_size=8, transform="val", image_size=16,
                   shuffle=True, socket=sys.argv[1], on_error="zeros")
for b in ld.batches():
    pass
"""


def drip_reader(node, user, key_id, secret):
    """`user` reading the drip store's bucket with its own key, started."""
    return subprocess.Popen(
        python_as(user, node, DRIP_READ_PY, node.socket,
                  env=(f"AWS_ENDPOINT_URL={node.store}", f"AWS_ACCESS_KEY_ID={key_id}",
                       f"AWS_SECRET_ACCESS_KEY={secret}", "AWS_DEFAULT_REGION=us-east-1")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@needs_users
def test_a_store_that_drips_holds_only_its_users_reader_threads(users, data_group, bundle,
                                                                 dataset):  # noqa: F811
    """The attacker reads from a store that sends a byte a second: its reads
    hold at most its cap of reader threads, the victim's local reads finish
    their epochs on the others, undisturbed, while the attacker's are still
    held; and once the attacker's session closes, its reads end."""
    with running(DripNode, bundle, dataset) as node:
        attacker = drip_reader(node, ATTACKER, "AKIAATTACKER", "attacker-secret")
        try:
            with victim_alongside(node):
                # The attacker holds all it may before the victim goes on.
                assert node.drip.wait(lambda s: s.active >= node.CAP, 120), (
                    attacker.poll(), node.log_text()[-3000:])
            # The victims finished while the attacker's reads were held.
            assert node.drip.active == node.CAP
            assert attacker.poll() is None, attacker.communicate()
        finally:
            attacker.kill()
            attacker.communicate()
        # Its session closed: its reads end now, not in an hour.
        assert node.drip.wait(lambda s: s.active == 0, 60), node.drip.active
        assert node.drip.most == node.CAP


@needs_users
def test_sigterm_ends_the_daemon_while_a_store_drips(users, data_group, bundle,
                                                     dataset):  # noqa: F811
    """SIGTERM while the attacker's reads hang on a store that sends a byte
    a second (ten minutes' deadline): the daemon ends its reads and stops
    within the drain time, not when the store lets go."""
    node = DripNode(bundle, dataset)
    attacker = drip_reader(node, ATTACKER, "AKIAATTACKER", "attacker-secret")
    try:
        assert node.drip.wait(lambda s: s.active >= node.CAP, 120), (
            attacker.poll(), node.log_text()[-3000:])
        node.stop()  # Within DRAIN_S, or this fails.
        assert node.proc.returncode == 0, node.log_text()[-3000:]
        assert node.drip.wait(lambda s: s.active == 0, 60), node.drip.active
    finally:
        attacker.kill()
        attacker.communicate()
        node.stop()
        node.remove()


def memory_counts(pid, needles):
    """How many times each of `needles` (bytes) is in the readable memory of
    process `pid` (root reads any process's)."""
    counts = dict.fromkeys(needles, 0)
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("r") or line.rstrip().endswith("[vvar]"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            overlap = max(len(n) for n in needles) - 1
            at, tail = start, b""
            while at < end:  # In pieces, each joined to the last one's end.
                try:
                    mem.seek(at)
                    piece = mem.read(min(8 << 20, end - at))
                except OSError:
                    break
                data = tail + piece
                for n in needles:
                    counts[n] += data.count(n)
                tail = data[-overlap:]
                at += len(piece)
                if not piece:
                    break
    return counts


@needs_users
def test_the_node_daemon_reads_a_bucket_without_the_secret(users, data_group, bundle,
                                                            dataset):  # noqa: F811
    """The node's own daemon reads a victim's bucket: the listing and the
    GETs in flight are signed in the victim's process, and the daemon's
    whole memory holds the key id (the scan finds what is there) but not
    one copy of the secret, while the reads run."""
    with running(DripNode, bundle, dataset) as node:
        victim = drip_reader(node, VICTIM, "AKIAVICTIMKEYID", "VICTIMSECRETKEY")
        try:
            assert node.drip.wait(lambda s: s.active >= 1, 120), (
                victim.poll(), node.log_text()[-3000:])
            counts = memory_counts(node.proc.pid, (b"AKIAVICTIMKEYID", b"VICTIMSECRETKEY"))
        finally:
            victim.kill()
            victim.communicate()
        assert counts[b"AKIAVICTIMKEYID"] > 0, counts
        assert counts[b"VICTIMSECRETKEY"] == 0, counts


@needs_users
def test_failed_samples_cost_the_daemon_a_bounded_log(node):
    """Three sessions of 1,500 missing files each with 2 KiB names: each
    session logs at most SampleErrorLog's 1,000 paths and one line that it
    stopped, so what the daemon keeps and writes for them is bounded
    whatever names and how many a user brings (before: every path, for
    the daemon's lifetime)."""
    long_name = "n" * 200
    for rnd in range(3):
        manifest = os.path.join(node.mine, f"missing{rnd}.tsv")
        with open(manifest, "w") as f:
            for i in range(1500):
                f.write(f"gone/{long_name}/{long_name}/{rnd}/{i:05d}.JPEG\t0\n")
        node.give(manifest, ATTACKER)
    with victim_alongside(node):
        for rnd in range(3):
            summary, out = attacker_reads(node, "--dataset",
                                          os.path.join(node.mine, f"missing{rnd}.tsv"))
            assert out.returncode == 0, out.stderr
            assert summary["errors"] == 1500, summary
    log = node.log_text()
    failed = [l for l in log.splitlines() if "sample failed (delivered as zeros" in l]
    stopped = [l for l in log.splitlines() if "samples failed; the rest are counted" in l]
    assert len(failed) == 3 * 1000, len(failed)
    assert len(stopped) == 3, stopped
