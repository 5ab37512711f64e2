"""Every read with the caller's own rights: a trainer gets through the
node's daemon only what it could open itself, whether the daemon runs as
its own user (which may read more than the trainer: a folder shared with its
group) or as root. Real uids: the daemon's (or root), a victim's and an
attacker's. The attacker's manifest has root `/` and names the victim's
files by path, in an `encoded` field that would hand back their bytes.

For every attack the victim's read, started first and checked to be still
running when the attack has ended, keeps its checksum; the daemon stays up."""

import json
import os
import shutil
import subprocess

import pytest

from test_dist import bundle  # noqa: F401 (fixture)
from test_hostile import (ATTACKER, VICTIM as VICTIM_USER, Node, data_group,  # noqa: F401
                          needs_users, VICTIM_DATA_GROUP, Victim, attacker_python,
                          running)
from test_service import users  # noqa: F401 (fixture)

STEAL = r"""
import json, sys, stoker
manifest, sock = sys.argv[1], sys.argv[2]
ld = stoker.Loader({"list": {"path": manifest, "root": "/"}}, batch_size=1, socket=sock,
                   timeout=30, on_error="zeros", shuffle=False, resume_timeout=0,
                   fields=[stoker.encoded(4096, name="raw")])
got = []
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for b in ld.batches():
        raw = bytes(memoryview(b.field("raw")).cast("B"))
        n = int.from_bytes(raw[:4], "little")
        got.append({"status": int(b.status[0]), "bytes": raw[4:4 + n].decode("latin-1")})
print(json.dumps(got), flush=True)
"""


class RootNode(Node):
    """The same node with stokerd running as root (--allow-root)."""
    daemon_user = "root"


@pytest.fixture(params=["daemon-user", "root"])
def any_node(request, users, data_group, bundle, dataset):  # noqa: F811
    with running(RootNode if request.param == "root" else Node, bundle, dataset) as n:
        yield n


def steal(node, paths, user=ATTACKER):
    """The attacker's (or `user`'s) root-`/` manifest of `paths`, read with
    an encoded field; each sample's status and bytes."""
    manifest = os.path.join(node.top, f"steal-{user}.tsv")
    with open(manifest, "w") as f:
        f.writelines(f"{p.lstrip('/')}\t0\n" for p in paths)
    node.give(manifest, user)
    out = attacker_python(node, STEAL, manifest, node.socket, user=user)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_users
def test_a_root_manifest_reads_nothing_the_attacker_cannot_open(any_node):
    node = any_node
    # The victim's notes, shared with the daemon's group only (0750, 0640):
    # the daemon's user may read them, the attacker may not.
    private = os.path.join(node.top, "victim-notes")
    os.mkdir(private)
    notes = os.path.join(private, "notes.txt")
    with open(notes, "w") as f:
        f.write("VICTIM-PRIVATE-NOTES")
    node.give(private, VICTIM_USER)
    shutil.chown(private, group=VICTIM_DATA_GROUP)
    shutil.chown(notes, group=VICTIM_DATA_GROUP)
    os.chmod(private, 0o750)
    os.chmod(notes, 0o640)
    # And a file of its own, which it may read.
    own = os.path.join(node.mine, "own.txt")
    with open(own, "w") as f:
        f.write("ATTACKER-OWN")
    node.give(own, ATTACKER)
    # The victim reads its notes first: they are in the daemon's RAM cache.
    assert steal(node, [notes], user=VICTIM_USER) == [
        {"status": 0, "bytes": "VICTIM-PRIVATE-NOTES"}]
    victim = Victim(node)
    got = steal(node, [notes, "/etc/shadow", own])
    attacked = victim.resume()
    assert got[0]["status"] != 0 and got[0]["bytes"] == "", got
    assert got[1]["status"] != 0 and got[1]["bytes"] == "", got
    assert got[2] == {"status": 0, "bytes": "ATTACKER-OWN"}, got
    log = node.log_text()
    assert "victim-notes/notes.txt: Permission denied" in log, log[-3000:]
    assert "/etc/shadow: Permission denied" in log, log[-3000:]
    # The same read again, with nothing beside it: the attack changed nothing.
    assert Victim(node).resume() == attacked
    assert node.proc.poll() is None
