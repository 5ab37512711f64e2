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
from test_hostile import (ATTACKER, NO_STORE, VICTIM as VICTIM_USER, Node,  # noqa: F401
                          data_group, needs_users, VICTIM_DATA_GROUP, Victim, as_user,
                          attacker_python, running)
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


def victim_notes(node, text, folder_mode=0o750):
    """The victim's notes holding `text`, shared with the daemon's group
    only (the file 0640, in a folder of `folder_mode`): the daemon's user
    may read them, the attacker may not."""
    private = os.path.join(node.top, "victim-notes")
    os.mkdir(private)
    notes = os.path.join(private, "notes.txt")
    with open(notes, "w") as f:
        f.write(text)
    node.give(private, VICTIM_USER)
    shutil.chown(private, group=VICTIM_DATA_GROUP)
    shutil.chown(notes, group=VICTIM_DATA_GROUP)
    os.chmod(private, folder_mode)
    os.chmod(notes, 0o640)
    return notes


@needs_users
def test_a_root_manifest_reads_nothing_the_attacker_cannot_open(any_node):
    node = any_node
    notes = victim_notes(node, "VICTIM-PRIVATE-NOTES")
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


@needs_users
def test_an_object_store_datasets_local_manifest_is_read_as_its_caller(any_node):
    """An S3 dataset's manifest may be a local file, read as the trainer:
    the victim's notes (shaped as a manifest line), which the daemon's user
    could read, are refused before any request, and nothing of them shows;
    the attacker's own manifest is read, and the session gets as far as the
    object store (which nobody serves here)."""
    node = any_node
    # A folder the attacker may enter (so its client proves it), a file it
    # may not read: the daemon's read, as the attacker, is what refuses.
    notes = victim_notes(node, "VICTIM-SECRET-KEY/x.jpg\t0\n", folder_mode=0o751)
    own = os.path.join(node.mine, "own.tsv")
    with open(own, "w") as f:
        f.write("cat/x.jpg\t0\n")
    node.give(own, ATTACKER)
    env = ["env", "AWS_ACCESS_KEY_ID=AKIAATTACKER", "AWS_SECRET_ACCESS_KEY=x",
           "AWS_DEFAULT_REGION=us-east-1", f"AWS_ENDPOINT_URL={NO_STORE}", f"HOME={node.mine}"]

    def read(manifest):
        spec = json.dumps({"s3": {"url": "s3://bucket/train/", "manifest": manifest}})
        return subprocess.run(
            as_user(ATTACKER, *env, node.stokerctl, "--socket", node.socket, "read",
                    "--batch-size", "1", "--dataset", spec),
            capture_output=True, text=True, timeout=300)

    victim = Victim(node)
    for manifest in (notes, "/etc/shadow"):
        out = read(manifest)
        assert out.returncode != 0, out.stdout
        assert "PERMISSION_DENIED" in out.stderr, out.stderr
        assert "VICTIM-SECRET" not in out.stderr + out.stdout
    mine = read(own)
    attacked = victim.resume()
    assert mine.returncode != 0, mine.stdout
    assert "PERMISSION_DENIED" not in mine.stderr and NO_STORE.split("//")[1] in mine.stderr, \
        mine.stderr
    assert "VICTIM-SECRET" not in node.log_text()
    assert Victim(node).resume() == attacked
    assert node.proc.poll() is None
