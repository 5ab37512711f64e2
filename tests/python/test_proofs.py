"""A cached epoch touches no storage, for a trainer who is no admin of a
shared, non-root node daemon (real uids: the daemon's and the trainer's,
whose every open is its own): each file is opened once in a session (its
proof, --proof-lifetime), a second session over L1 reads no byte of any
file, a revocation bites where docs/operating.md says, class folders that
are symlinks read as torchvision's ImageFolder reads them, and SIGTERM
ends the daemon at once while the trainer's opener does not answer."""

import json
import os
import shutil
import signal
import subprocess

import pytest

from test_dist import bundle  # noqa: F401 (fixture)
from test_hostile import (ATTACKER, Node, data_group, needs_users,  # noqa: F401
                          python_as, running)
from test_service import DAEMON_USER, users  # noqa: F401 (fixture)

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")


class Quiet(Node):
    """A Node without the victim's reads, whose L1 holds these datasets."""
    victims = False
    daemon_flags = ("--l1-bytes", "256M")


class Unproven(Quiet):
    """Every read opens its file (--proof-lifetime 0)."""
    daemon_flags = Quiet.daemon_flags + ("--proof-lifetime", "0")


def stats(node):
    out = node.ctl(DAEMON_USER, "stats", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["reader"]


# Epochs of a folder in its order, train crops: each epoch's failed samples.
# With "pause", it waits for a line on stdin after each epoch but the last.
EPOCHS_PY = r"""
import json, sys, stoker
data, sock, epochs, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "pause"
ld = stoker.Loader(data, batch_size=10, transform="train", image_size=32, socket=sock, timeout=60,
                   resume_timeout=0, on_error="zeros", shuffle=False)
for epoch in range(epochs):
    failed = sum(sum(1 for s in b.status if s != 0) for b in ld.batches())
    print(json.dumps({"epoch": epoch, "failed": failed}), flush=True)
    if pause and epoch + 1 < epochs:
        sys.stdin.readline()
"""


class Epochs:
    """EPOCHS_PY as the trainer; its epochs' lines as they come."""

    def __init__(self, node, data, epochs, pause=False):
        self.proc = subprocess.Popen(
            python_as(ATTACKER, node, EPOCHS_PY, data, node.socket, str(epochs),
                      "pause" if pause else "go"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def next(self):
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()
        return json.loads(line)

    def go_on(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def finish(self):
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        return [json.loads(line) for line in out.splitlines()]


@pytest.fixture()
def quiet(users, data_group, bundle, small_photos):  # noqa: F811
    with running(Quiet, bundle, small_photos) as n:
        yield n


@needs_users
def test_a_session_opens_each_file_once_and_a_second_reads_no_byte(quiet):
    n = 120  # small_photos
    before = stats(quiet)
    epochs = Epochs(quiet, quiet.mine, 3).finish()
    assert [e["failed"] for e in epochs] == [0, 0, 0]
    after = stats(quiet)
    opens = after.get("source_stats", 0) - before.get("source_stats", 0)
    assert n <= opens <= 1.1 * n, opens
    assert after["source_reads"] - before.get("source_reads", 0) == n
    # A second session of the same user proves every file again, and reads
    # its bytes from L1: not one from the files.
    epochs = Epochs(quiet, quiet.mine, 1).finish()
    assert epochs == [{"epoch": 0, "failed": 0}]
    again = stats(quiet)
    assert again["source_reads"] == after["source_reads"]
    assert again["source_bytes"] == after["source_bytes"]
    assert n <= again["source_stats"] - after["source_stats"] <= 1.1 * n
    reads = after["source_reads"] - before.get("source_reads", 0)
    print(f"{n} files: 3 epochs, {opens} opens, {reads} reads; a second session, "
          f"{again['source_stats'] - after['source_stats']} opens, "
          f"{again['source_bytes'] - after['source_bytes']} bytes read")


def revoke_after_the_first_epoch(node, folder):
    """Two epochs of the trainer's with one file made unreadable to it
    (chmod 000) between them; the failed samples of each. The file is the
    epoch's last, far past the batches the daemon reads ahead while the
    trainer waits."""
    trainer = Epochs(node, folder, 2, pause=True)
    first = trainer.next()
    victim = os.path.join(folder, sorted(os.listdir(folder))[-1])
    victim = os.path.join(victim, sorted(os.listdir(victim))[-1])
    os.chmod(victim, 0)
    trainer.go_on()
    return [e["failed"] for e in [first] + trainer.finish()]


@needs_users
def test_a_revocation_bites_at_the_next_session_or_when_proofs_last_no_time(
        users, data_group, bundle, small_photos):  # noqa: F811
    with running(Quiet, bundle, small_photos) as node:
        # Proven in the session's first epoch: the second is served from
        # the caches, as a process that holds a file open reads it on.
        assert revoke_after_the_first_epoch(node, node.mine) == [0, 0]
        # A new session proves again: refused.
        assert Epochs(node, node.mine, 1).finish() == [{"epoch": 0, "failed": 1}]
    with running(Unproven, bundle, small_photos) as node:
        assert revoke_after_the_first_epoch(node, node.mine) == [0, 1]


# ImageFolder's samples and labels, then the Loader's, as the indices of
# the files' colours.
IMAGEFOLDER_PY = r"""
import json, sys, stoker
import numpy as np
from torchvision.datasets import ImageFolder
data, sock = sys.argv[1], sys.argv[2]
folder = ImageFolder(data)
want = [[int(np.asarray(folder.loader(p))[0, 0, 0]), label] for p, label in folder.samples]
ld = stoker.Loader(data, batch_size=5, transform="val", image_size=8, shuffle=False,
                   socket=sock, timeout=60, resume_timeout=0)
got = []
for b in ld.batches():
    images, labels = np.asarray(b.images), np.asarray(b.labels)
    got += [[int(images[i, 4, 4, 0]), int(labels[i])] for i in range(len(labels))]
print(json.dumps({"want": want, "got": got, "classes": folder.classes}), flush=True)
"""


def colour_png(path, index):
    """A 20 x 16 PNG of one colour whose red is `index`."""
    Image.fromarray(np.full((16, 20, 3), (index, 255 - index, 90), np.uint8)).save(
        path, format="PNG")


@needs_users
def test_symlinked_class_folders_read_as_imagefolder_reads_them(quiet):
    # Class folders kept elsewhere (one nested, upper-case suffixes), and
    # a subset made of symlinks to them, absolute and relative, beside a
    # real folder holding a symlinked file.
    store = os.path.join(quiet.top, "store")
    index = 0
    for cls, names in (("ant", ["b.png", "a.PNG", "sub/c.png", "notes.txt"]),
                       ("bee", ["z.png", "y.png"]), ("cow", ["x.png"])):
        for name in names:
            path = os.path.join(store, cls, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if name.endswith(".txt"):
                with open(path, "w") as f:
                    f.write("not a picture")
            else:
                index += 1
                colour_png(path, index * 10)
    subset = os.path.join(quiet.top, "subset")
    os.makedirs(os.path.join(subset, "dog"))
    os.symlink(os.path.join(store, "ant"), os.path.join(subset, "cat"))  # Absolute.
    os.symlink("../store/bee", os.path.join(subset, "eel"))  # Relative.
    os.symlink(os.path.join(store, "cow", "x.png"), os.path.join(subset, "dog", "x.png"))
    quiet.give(store, ATTACKER)
    quiet.give(subset, ATTACKER)
    out = subprocess.run(python_as(ATTACKER, quiet, IMAGEFOLDER_PY, subset, quiet.socket),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["classes"] == ["cat", "dog", "eel"]
    assert len(result["want"]) == 6
    got = [[round(red / 10) * 10, label] for red, label in result["got"]]
    assert got == result["want"]


# A Loader whose first batch comes, then stops (SIGSTOP, from outside):
# its opener stops answering while the daemon opens the next batches.
STALLED_PY = r"""
import sys, stoker
ld = stoker.Loader(sys.argv[1], batch_size=400, transform="train", image_size=16,
                   socket=sys.argv[2],
                   timeout=60, resume_timeout=0, on_error="zeros", shuffle=False)
for b in ld.batches():
    print("first", flush=True)
    sys.stdin.readline()
"""


@needs_users
def test_sigterm_ends_the_daemon_while_a_trainers_opener_does_not_answer(
        users, data_group, bundle, small_photos):  # noqa: F811
    node = Quiet(bundle, small_photos)
    trainer = None
    try:
        # 2,000 names of one picture (hard links): each is opened by the
        # trainer's opener, while its bytes come from L1.
        many = os.path.join(node.top, "many")
        one = os.path.join(small_photos, sorted(os.listdir(small_photos))[0])
        first = os.path.join(many, "c00", "000.jpg")
        for c in range(20):
            os.makedirs(os.path.join(many, f"c{c:02}"))
            for i in range(100):
                path = os.path.join(many, f"c{c:02}", f"{i:03}.jpg")
                if path == first:
                    shutil.copy(os.path.join(one, sorted(os.listdir(one))[0]), path)
                else:
                    os.link(first, path)
        node.give(many, ATTACKER)
        trainer = subprocess.Popen(python_as(ATTACKER, node, STALLED_PY, many, node.socket),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        assert trainer.stdout.readline().strip() == "first", trainer.stderr.read()
        # The daemon is opening the next three batches' 1,200 files.
        trainer.send_signal(signal.SIGSTOP)
        # Within DRAIN_S, half the opener's 30 s timeout, or this fails.
        node.stop()
        assert node.proc.returncode == 0, node.log_text()[-3000:]
    finally:
        if trainer is not None:
            trainer.kill()
            trainer.send_signal(signal.SIGCONT)
            trainer.communicate()
        node.stop()
        node.remove()
