"""The embedded daemon: started when none answers, shared by the Loaders of
a process and by the ranks of a job, gone when the last of them exits."""

import os
import subprocess
import sys
import tempfile
import time

from conftest import ROOT

SCRIPT = r"""
import os, sys
import stoker, stoker._daemon as d
a = stoker.Loader(sys.argv[1], batch_size=4, transform="val", image_size=32)
b = stoker.Loader(sys.argv[1], batch_size=3, transform="train", image_size=32)
na = sum(x.shape[0] for x, _ in a)
nb = sum(x.shape[0] for x, _ in b)
print(d.embedded_daemon_pid(), d.daemon_socket(), na, nb, flush=True)
if len(sys.argv) > 2:
    os.kill(os.getpid(), 9)  # Die without atexit: the daemon must notice.
"""


def env_for(folder, **extra):
    return dict(os.environ, STOKER_SOCKET="/nonexistent/stoker.sock",
                STOKER_EMBEDDED_DIR=folder,
                PYTHONPATH=os.path.join(ROOT, "client", "python"), **extra)


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
ld2 = stoker.Loader(sys.argv[1], batch_size=4, transform="val", image_size=32)
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


def test_embedded_daemon_refuses_threads_out_of_its_range_in_its_words(dataset):
    # The range is the daemon's (--threads 0..4096); the Loader restates none.
    script = ("import sys, stoker\n"
              "try:\n"
              "    next(iter(stoker.Loader(sys.argv[1], batch_size=4, threads=5000)))\n"
              "except stoker.StokerError as e:\n"
              "    print(e.code, str(e))\n")
    folder = os.path.join(tempfile.mkdtemp(prefix="stoker-emb-"), "d")
    r = subprocess.run([sys.executable, "-c", script, dataset], env=env_for(folder),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("UNAVAILABLE"), r.stdout
    assert "--threads must be in 0..4096" in r.stdout, r.stdout
