"""The embedded daemon: started when none answers, shared, gone at exit."""

import os
import subprocess
import sys
import time

from conftest import ROOT, BIN

SCRIPT = r"""
import os, sys
import stoker, stoker._daemon as d
a = stoker.Loader(sys.argv[1], batch_size=4, transform="val", image_size=32)
b = stoker.Loader(sys.argv[1], batch_size=3, transform="train", image_size=32)
na = sum(x.shape[0] for x, _ in a)
nb = sum(x.shape[0] for x, _ in b)
print(d.embedded_daemon_pid(), os.path.dirname(d.daemon_socket()), na, nb, flush=True)
if len(sys.argv) > 2:
    os.kill(os.getpid(), 9)  # Die without atexit: the daemon must notice.
"""


def run(dataset, *extra):
    env = dict(os.environ, STOKER_SOCKET="/nonexistent/stoker.sock",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "client", "python"),
                                           os.path.join(BIN, "client", "python")]))
    return subprocess.run([sys.executable, "-c", SCRIPT, dataset, *extra],
                          env=env, capture_output=True, text=True, timeout=120)


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
    pid, folder, na, nb = r.stdout.split()
    assert (int(na), int(nb)) == (24, 24)  # Both Loaders, one daemon.
    assert gone(int(pid), 10)
    assert not os.path.exists(folder)


def test_embedded_daemon_exits_when_its_trainer_is_killed(dataset):
    r = run(dataset, "die")
    assert r.returncode == -9
    pid, folder, _, _ = r.stdout.split()
    assert gone(int(pid), 10)
