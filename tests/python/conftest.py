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


@pytest.fixture(scope="session")
def dataset():
    """3 classes x 8 photo-like JPEGs of 260-340 px."""
    folder = _generated("stoker-pyds-", "--classes", "3", "--per_class", "8",
                        "--min_side", "260", "--max_side", "340", "--seed", "5")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def large_dataset():
    """Few big images: slow to decode with one thread."""
    folder = _generated("stoker-pyds-large-", "--classes", "2", "--per_class",
                        "8", "--min_side", "1400", "--max_side", "1800",
                        "--seed", "6")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


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
