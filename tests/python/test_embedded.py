"""The embedded daemon: started when none answers, shared by the Loaders of
a process and by the ranks of a job, gone when the last of them exits;
started again when it dies, its sessions going on where they were; found
by stokerctl without flags. A named socket where nothing answers is an
error, not a reason to start one."""

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ROOT, STOKERCTL, STOKERD

SCRIPT = r"""
import os, sys
import stoker, stoker._daemon as d
a = stoker.Loader(sys.argv[1], batch_size=4, transform="val", shuffle=True, image_size=32)
b = stoker.Loader(sys.argv[1], batch_size=3, transform="train", shuffle=True, image_size=32)
na = sum(x.shape[0] for x, _ in a)
nb = sum(x.shape[0] for x, _ in b)
print(d.embedded_daemon_pid(), d.daemon_socket(), na, nb, flush=True)
if len(sys.argv) > 2:
    os.kill(os.getpid(), 9)  # Die without atexit: the daemon must notice.
"""


def env_for(folder, **extra):
    return dict(os.environ, **{"STOKER_SOCKET": "embedded", "STOKER_EMBEDDED_DIR": folder,
                               "PYTHONPATH": os.path.join(ROOT, "client", "python"), **extra})


def run(dataset, *extra):
    folder = os.path.join(tempfile.mkdtemp(prefix="stoker-emb-"), "d")
    return subprocess.run([sys.executable, "-c", SCRIPT, dataset, *extra],
                          env=env_for(folder), capture_output=True, text=True,
                          timeout=120)


def gone(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie still answers kill(0); it is gone when its state is Z.
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_embedded_daemon_serves_and_stops_at_exit(dataset):
    r = run(dataset)
    assert r.returncode == 0, r.stderr
    pid, sock, na, nb = r.stdout.split()
    assert (int(na), int(nb)) == (24, 24)  # Both Loaders, one daemon.
    assert gone(int(pid), 10)
    assert not os.path.exists(sock)  # Removed by the daemon as it stopped.


def test_embedded_daemon_exits_when_its_trainer_is_killed(dataset):
    r = run(dataset, "die")
    assert r.returncode == -9
    pid, folder, _, _ = r.stdout.split()
    assert gone(int(pid), 10)


RANK_SCRIPT = r"""
import os, sys, time
import stoker, stoker._daemon as d
ld = stoker.Loader(sys.argv[1], batch_size=4, transform="val", image_size=32,
                   shuffle=True, seed=7)
indices = [int(i) for b in ld.batches() for i in b.indices]
print(d.embedded_daemon_pid(), ld.rank, ld.world_size,
      ",".join(map(str, indices)), flush=True)
sys.stdin.readline()  # The test lets rank 0 go first; rank 1 reads after it left.
ld2 = stoker.Loader(sys.argv[1], batch_size=4, transform="val", shuffle=True,
                    image_size=32)
print(sum(b.samples for b in ld2.batches()), flush=True)
"""


def test_ranks_share_one_embedded_daemon_and_cover_the_epoch_once(dataset):
    folder = os.path.join(tempfile.mkdtemp(prefix="stoker-emb-"), "d")
    procs = [subprocess.Popen(
        [sys.executable, "-c", RANK_SCRIPT, dataset],
        env=env_for(folder, RANK=str(rank), WORLD_SIZE="2"), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in range(2)]
    # Both ranks have read their epoch (so both own the daemon); then rank 0
    # leaves, and only once it is gone does rank 1 read on.
    firsts = [p.stdout.readline() for p in procs]
    outs = []
    for p, first in zip(procs, firsts):
        out, err = p.communicate("\n", timeout=120)
        outs.append((first + out, err))
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    lines = [out.split("\n") for out, _ in outs]
    pids = {line[0].split()[0] for line in lines}
    log = os.path.join(folder, "stokerd.log")
    detail = (outs, open(log).read() if os.path.exists(log) else "no log")
    assert len(pids) == 1, detail  # One daemon for both ranks.
    ranks = sorted((int(line[0].split()[1]), int(line[0].split()[2]))
                   for line in lines)
    assert ranks == [(0, 2), (1, 2)], detail
    covered = [int(i) for line in lines for i in line[0].split()[3].split(",")]
    assert sorted(covered) == list(range(24)), detail  # Each sample once.
    # Rank 1 kept reading after rank 0 exited: 12 of 24 samples per rank.
    assert [int(line[1]) for line in lines] == [12, 12], detail
    assert gone(int(pids.pop()), 10), detail  # Gone with the last rank.


REFUSED_SCRIPT = r"""
import sys, stoker
try:
    next(iter(stoker.Loader(sys.argv[1], batch_size=4, transform="train", shuffle=True,
                       threads=int(sys.argv[2]) or None)))
except stoker.StokerError as e:
    print(e.code, str(e))
"""


def refusal(dataset, threads=0, **env):
    """What a Loader's first batch is refused with (code and message), its
    embedded folder (not made unless a daemon was started)."""
    folder = os.path.join(tempfile.mkdtemp(prefix="stoker-emb-"), "d")
    r = subprocess.run([sys.executable, "-c", REFUSED_SCRIPT, dataset, str(threads)],
                       env=env_for(folder, **env), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout, folder


def test_embedded_daemon_refuses_threads_out_of_its_range_in_its_words(dataset):
    # The range is the daemon's (--threads 0..4096); the Loader restates none.
    said, _ = refusal(dataset, threads=5000)
    assert said.startswith("UNAVAILABLE"), said
    assert "--threads must be in 0..4096" in said, said


def test_a_stokerd_of_another_release_named_by_STOKERD_is_refused(dataset, tmp_path):
    older = tmp_path / "stokerd"
    older.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'stokerd 0.1.0 (release)'\n"
                     "exit 2\n")
    older.chmod(0o755)
    said, folder = refusal(dataset, STOKERD=str(older))
    assert said.startswith("FAILED_PRECONDITION"), said
    assert f"$STOKERD names {older}, stokerd 0.1.0; this package is stoker " in said, said
    assert "unset STOKERD to use this package's own (" in said, said
    assert not os.path.exists(os.path.join(folder, "stokerd.json"))  # Never started.


def test_a_named_socket_where_nothing_answers_is_an_error(dataset):
    said, folder = refusal(dataset, STOKER_SOCKET="/nonexistent/stoker.sock")
    assert said.startswith("UNAVAILABLE"), said
    assert "STOKER_SOCKET names /nonexistent/stoker.sock" in said, said
    assert not os.path.exists(folder)  # No embedded daemon was started.


KILL_SCRIPT = r"""
import json, os, signal, sys, time, warnings
import stoker, stoker._daemon as d
from stoker._native import lib

def run(kill_at):
    ld = stoker.Loader(sys.argv[1], batch_size=2, transform="train", image_size=32,
                       shuffle=True, seed=5, ring_slots=2)
    sums, longest, killed = [], 0.0, None
    for epoch in range(2):
        last = time.monotonic()
        for i, b in enumerate(ld.batches()):
            now = time.monotonic()
            if killed is not None:
                longest = max(longest, now - last)
            last = now
            c = lib.Checksum()
            c.update(b.images)
            c.update(b.labels)
            sums.append(c.hex)
            if epoch == 0 and i == kill_at:
                killed = d.embedded_daemon_pid()
                os.kill(killed, signal.SIGKILL)
    return sums, longest, killed, ld._session.reconnects

with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    want, _, _, _ = run(-1)
    got, longest, killed, reconnects = run(3)
print(json.dumps({"want": want, "got": got, "longest": longest, "killed": killed,
                  "now": d.embedded_daemon_pid(), "reconnects": reconnects,
                  "said": [str(w.message) for w in said]}), flush=True)
sys.stdin.readline()  # stokerctl looks at the daemon meanwhile.
"""


def test_a_killed_embedded_daemon_starts_again_and_the_epoch_goes_on(dataset):
    folder = os.path.join(tempfile.mkdtemp(prefix="stoker-emb-"), "d")
    env = env_for(folder)
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, dataset], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line:
            pytest.fail(proc.communicate(timeout=30)[1][-3000:])
        out = json.loads(line)
        log = os.path.join(folder, "stokerd.log")
        # The same batches as the undisturbed epochs, in order, none lost.
        assert out["got"] == out["want"] and len(out["want"]) == 24, out
        assert out["longest"] < 10, out
        assert out["reconnects"] >= 1, out
        assert out["now"] != out["killed"], out
        assert any("starting it again" in m and f"{log}.1" in m for m in out["said"]), out
        assert os.path.exists(f"{log}.1") and os.path.exists(log)  # The killed run's log kept.
        # stokerctl finds the running embedded daemon without a flag, and
        # says which it is.
        top = subprocess.run([STOKERCTL, "top", "--frames", "1"], env=env,
                             capture_output=True, text=True, timeout=30)
        assert top.returncode == 0, top.stderr
        assert f"pid {out['now']}" in top.stdout, top.stdout
        assert os.path.join(folder, "stoker.sock") in top.stdout, top.stdout
        assert "embedded daemon" in top.stderr and log in top.stderr, top.stderr
    finally:
        _, err = proc.communicate("\n" if proc.poll() is None else None, timeout=60)
    assert proc.returncode == 0, err
    # Its last user gone, it stops; stokerctl then says there is none.
    assert gone(int(out["now"]), 10)
    top = subprocess.run([STOKERCTL, "stats"], env=env, capture_output=True, text=True,
                         timeout=30)
    assert top.returncode == 1, top.stdout
    assert "embedded daemon" in top.stderr and "not running" in top.stderr, top.stderr


HOLD_SCRIPT = r"""
import sys, warnings
import stoker, stoker._daemon as d
warnings.simplefilter("always")
try:
    ld = stoker.Loader(sys.argv[1], batch_size=4, transform="train", shuffle=True,
                       threads=int(sys.argv[2]))
    print(sum(b.samples for b in ld.batches()), d.embedded_daemon_pid(), flush=True)
except stoker.StokerError as e:
    print(e.code, str(e), flush=True)
sys.stdin.readline()
"""


def test_a_loader_of_another_build_does_not_attach_and_other_threads_are_named(dataset,
                                                                               tmp_path):
    """The daemon of one install (threads=2) runs; a second process of that
    build asking for 1 thread is served and told its threads are not
    applied; one whose stokerd is another build is refused, saying why."""
    folder = os.path.join(tempfile.mkdtemp(prefix="stoker-emb-"), "d")
    other = tmp_path / "stokerd"
    with open(STOKERD, "rb") as src, open(other, "wb") as dst:
        dst.write(src.read() + b"another build")
    other.chmod(0o755)

    def start(threads, **env):
        return subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, dataset, str(threads)],
                                env=env_for(folder, **env), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = start(2)
    try:
        samples, pid = first.stdout.readline().split()
        assert samples == "24"
        second = start(1)
        said, warned = second.communicate("\n", timeout=60)
        assert said.split() == ["24", pid], (said, warned)  # The same daemon.
        assert "threads=1 is not applied" in warned and "threads=2" in warned, warned
        third = start(2, STOKERD=str(other))
        said, _ = third.communicate("\n", timeout=60)
        assert said.startswith("FAILED_PRECONDITION"), said
        assert f"(pid {pid}) runs another build of stokerd" in said, said
        assert str(other) in said, said
    finally:
        first.communicate("\n", timeout=60)
    assert first.returncode == 0
    assert gone(int(pid), 10)
