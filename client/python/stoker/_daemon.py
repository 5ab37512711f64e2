"""Finding a daemon, or starting a private one for this process.

With no socket given, the Loader uses the node's daemon at $STOKER_SOCKET
(default /run/stoker/stoker.sock) if one answers there; otherwise it starts
an embedded `stokerd` child on a socket in a private temporary folder,
shared by every Loader in this process and stopped when the interpreter
exits (and, should the interpreter be killed, by the daemon itself through
--exit_with_pid).
"""

import atexit
import os
import shutil
import socket as socketlib
import subprocess
import tempfile
import threading
import time

from stoker.errors import StokerError

DEFAULT_SOCKET = "/run/stoker/stoker.sock"

_lock = threading.Lock()
_embedded = None  # (process, socket path, folder)


def _answers(path):
    s = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    try:
        s.settimeout(0.5)
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def find_stokerd():
    """Path of the stokerd binary: $STOKERD, PATH, or the Bazel output."""
    env = os.environ.get("STOKERD")
    if env:
        return env
    found = shutil.which("stokerd")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.normpath(os.path.join(here, "..", "..", "..", "bazel-bin",
                                          "server", "stokerd"))
    if os.access(built, os.X_OK):
        return built
    raise StokerError("NOT_FOUND",
                      "no stokerd daemon answers and no stokerd binary was "
                      "found ($STOKERD, PATH, bazel-bin/server/stokerd); "
                      "build it with `make` or pass socket=")


def daemon_socket(threads=None):
    """The socket of the daemon to use, starting an embedded one if needed."""
    default = os.environ.get("STOKER_SOCKET", DEFAULT_SOCKET)
    global _embedded
    with _lock:
        if _embedded is not None and _embedded[0].poll() is None:
            return _embedded[1]
        if _answers(default):
            return default
        binary = find_stokerd()
        folder = tempfile.mkdtemp(prefix="stoker-")
        path = os.path.join(folder, "stoker.sock")
        args = [binary, "--socket", path, "--exit_with_pid", str(os.getpid()),
                "--metrics_address", "127.0.0.1:0"]
        if threads:
            args += ["--threads", str(int(threads))]
        log = open(os.path.join(folder, "stokerd.log"), "wb")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, close_fds=True)
        log.close()
        deadline = time.monotonic() + 20
        while not _answers(path):
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(folder, "stokerd.log"), "rb") as f:
                    tail = f.read()[-2000:].decode(errors="replace")
                proc.kill()
                shutil.rmtree(folder, ignore_errors=True)
                raise StokerError("UNAVAILABLE",
                                  f"embedded stokerd did not start: {tail}")
            time.sleep(0.02)
        _embedded = (proc, path, folder)
        return path


def embedded_daemon_pid():
    """The embedded daemon's pid, or None if this process started none."""
    with _lock:
        return _embedded[0].pid if _embedded else None


def stop_embedded_daemon():
    """Stops the embedded daemon (if any); Loaders using it stop working."""
    global _embedded
    with _lock:
        if _embedded is None:
            return
        proc, _, folder = _embedded
        _embedded = None
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(folder, ignore_errors=True)


atexit.register(stop_embedded_daemon)
