"""A daemon killed (-9) and restarted mid-epoch: the C++ client (stokerctl)
and the Python Loader reconnect, go on at the next undelivered batch, and
end with the checksum of an undisturbed run. The killed daemon is left a
zombie (not reaped) while the new one starts: its ring must still go."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from conftest import ROOT_FLAG, STOKERCTL, STOKERD, wait_for_socket

import stoker
from stoker._native import lib

# Decoding every epoch: kept pictures would finish a read before a restart.
SPEC = ["--batch-size", "2", "--transform", "train", "--size", "64",
        "--seed", "21", "--epochs", "3", "--no-pixel-cache"]


def start(sock, prefix, extra=()):
    proc = subprocess.Popen(
        [STOKERD, "--socket", sock, "--threads", "1", "--metrics-address", "",
         "--shm-prefix", prefix, *ROOT_FLAG, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_socket(sock, proc)
    return proc


def read(sock, dataset):
    out = subprocess.run([STOKERCTL, "--socket", sock, "read", "--dataset",
                          dataset, *SPEC], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


class Restarter:
    """Once the client has been handed `after` batches (the daemon's own
    counter), freezes the daemon (SIGSTOP: the read cannot finish first),
    kills it (leaving a zombie) and starts a new one on the same socket
    (with the flags `extra`); `restarted` is set once it has (or failed
    to)."""

    def __init__(self, sock, prefix, proc, after=2, extra=()):
        self.sock, self.prefix, self.old, self.new = sock, prefix, proc, None
        self.extra = extra
        self.error = None
        self.restarted = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(after,))
        self.thread.start()

    def _delivered(self):
        sessions = lib.Client(self.sock).stats().get("sessions", [])
        return max((int(s.get("batches_delivered", 0)) for s in sessions), default=0)

    def _run(self, after):
        try:
            deadline = time.monotonic() + 120
            while self._delivered() < after:
                assert time.monotonic() < deadline, "the client never got a batch"
                time.sleep(0.01)  # Polling the counter, not timing the read.
            self.old.send_signal(signal.SIGSTOP)
            self.old.send_signal(signal.SIGKILL)
            self.new = start(self.sock, self.prefix, self.extra)
        except BaseException as e:  # Raised again by finish().
            self.error = e
        finally:
            self.restarted.set()

    def finish(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        self.old.wait()
        self.new.terminate()
        self.new.wait(timeout=20)


def checksum_epochs(ld, epochs, restart=None, hold_after=3):
    """(checksum, samples) of `epochs` epochs of the Loader's native
    batches. With a Restarter, the loop holds after `hold_after` batches
    until the daemon has been restarted, so the restart falls mid-run."""
    checksum, samples, taken = lib.Checksum(), 0, 0
    for _ in range(epochs):
        for b in ld.batches():
            checksum.update(b.images)
            checksum.update(b.labels)
            checksum.update(b.status)
            samples += b.samples
            taken += 1
            if restart is not None and taken == hold_after:
                assert restart.restarted.wait(120), "the daemon was never restarted"
    return checksum.hex, samples


def test_clients_resume_across_a_daemon_restart(large_dataset):
    folder = tempfile.mkdtemp(prefix="stoker-resume-")
    sock = os.path.join(folder, "s.sock")
    prefix = f"stoker-resume{os.getpid()}."
    try:
        proc = start(sock, prefix)
        want = read(sock, large_dataset)
        assert want["samples"] == 48

        # C++: stokerctl through a kill -9 and restart.
        restart = Restarter(sock, prefix, proc)
        got = read(sock, large_dataset)
        restart.finish()
        assert got["checksum"] == want["checksum"]
        assert got["samples"] == 48
        assert got["reconnects"] == 1

        # Python: the same Loader object, holding mid-run until the restart.
        proc = start(sock, prefix)
        ld = stoker.Loader(large_dataset, batch_size=2, transform="train",
                           image_size=64, seed=21, socket=sock,
                           starvation_threshold=1.0, pixel_cache=None, shuffle=True)
        restart = Restarter(sock, prefix, proc)
        got = checksum_epochs(ld, 3, restart)
        reconnects = ld._session.reconnects
        ld.close()
        restart.finish()
        assert got == (want["checksum"], 48)
        assert reconnects == 1  # It went on in a new session.
    finally:
        shutil.rmtree(folder, ignore_errors=True)
