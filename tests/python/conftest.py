"""Fixtures for the Python client tests: a generated photo-like dataset and
a private stokerd (the real binary) on a socket in a temporary folder.
Run from the repository root after `bazel build //...` (make test does)."""

import os
import shutil
import signal
import socket as socketlib
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "bazel-bin")
STOKERD = os.path.join(BIN, "server", "stokerd")
STOKERCTL = os.path.join(BIN, "client", "cpp", "stokerctl")
MAKE_DATASET = os.path.join(BIN, "tests", "make_dataset")
# stokerd refuses root unless told; tests run as root in CI.
ROOT_FLAG = ["--allow-root"] if os.geteuid() == 0 else []


def wait_for_socket(path, proc, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"stokerd exited with {proc.returncode}")
        s = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        try:
            s.connect(path)
            return
        except OSError:
            time.sleep(0.02)
        finally:
            s.close()
    raise RuntimeError("stokerd did not start")


class Daemon:
    """A stokerd subprocess on a private socket."""

    def __init__(self, threads=2, extra=()):
        self.folder = tempfile.mkdtemp(prefix="stoker-pyd-")
        self.socket = os.path.join(self.folder, "s.sock")
        self.proc = subprocess.Popen(
            [STOKERD, "--socket", self.socket, "--threads", str(threads),
             "--metrics-address", "127.0.0.1:0", *ROOT_FLAG, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_socket(self.socket, self.proc)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
        shutil.rmtree(self.folder, ignore_errors=True)


def _generated(prefix, *flags):
    folder = tempfile.mkdtemp(prefix=prefix)
    subprocess.run([MAKE_DATASET, "--out", folder, *flags], check=True,
                   capture_output=True)
    return folder


def _made(prefix, classes, per_class, min_side, max_side, seed):
    """A fixture's generated folder of `classes` x `per_class` photo-like
    JPEGs: yielded, then removed."""
    folder = _generated(prefix, "--classes", str(classes), "--per_class", str(per_class),
                        "--min_side", str(min_side), "--max_side", str(max_side),
                        "--seed", str(seed))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def dataset():
    """3 classes x 8 photo-like JPEGs of 260-340 px."""
    yield from _made("stoker-pyds-", 3, 8, 260, 340, 5)


@pytest.fixture(scope="session")
def small_photos():
    """4 classes x 30 small JPEGs: 120 samples, 6 canonical partitions of 20."""
    yield from _made("stoker-pyds-small-", 4, 30, 24, 40, 8)


@pytest.fixture(scope="session")
def large_dataset():
    """Few big images: slow to decode with one thread."""
    yield from _made("stoker-pyds-large-", 2, 8, 1400, 1800, 6)


@pytest.fixture(scope="session")
def daemon():
    d = Daemon(threads=2)
    yield d
    d.stop()


@pytest.fixture()
def private_daemon():
    d = Daemon(threads=1)
    yield d
    d.stop()
