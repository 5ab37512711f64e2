"""Finding a daemon, or starting the embedded one this user's processes share.

With no socket given, the Loader uses the node's daemon at $STOKER_SOCKET
(default /run/stoker/stoker.sock) if one answers there. Otherwise it uses the
embedded daemon of this user on this node: a `stokerd` on a socket in
$STOKER_EMBEDDED_DIR (default /tmp/stoker-embedded-<uid>, mode 0700). The
first process to need it starts it (under a file lock, so the ranks of a
torchrun job started together start one); every process using it registers
its pid in the folder's owners/ list, and the daemon exits when the last of
them is gone (a killed trainer included: the daemon checks the pids).
"""

import atexit
import fcntl
import os
import shutil
import socket as socketlib
import stat
import subprocess
import threading
import time

from stoker.errors import StokerError

DEFAULT_SOCKET = "/run/stoker/stoker.sock"
_HERE = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_embedded = None  # (socket path, owner file) once this process registered


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


def find_binary(name):
    """Path of a bundled binary: $STOKERD (for stokerd), the wheel's _bin,
    the release bundle's bin, PATH, or the Bazel output of a source tree."""
    if name == "stokerd" and os.environ.get("STOKERD"):
        return os.environ["STOKERD"]
    built = {"stokerd": ("server", "stokerd"),
             "stokerctl": ("client", "cpp", "stokerctl")}[name]
    for path in (os.path.join(_HERE, "_bin", name),
                 os.path.join(_HERE, "..", "..", "..", "..", "bin", name),
                 shutil.which(name) or "",
                 os.path.join(_HERE, "..", "..", "..", "bazel-bin", *built)):
        if path and os.access(path, os.X_OK):
            return os.path.normpath(path)
    raise StokerError("NOT_FOUND",
                      f"no {name} binary was found (the stoker wheel or "
                      "release bundle ships one; also looked at $STOKERD, "
                      "PATH and bazel-bin); install one or pass socket=")


def find_stokerd():
    return find_binary("stokerd")


def embedded_dir():
    return os.environ.get("STOKER_EMBEDDED_DIR",
                          f"/tmp/stoker-embedded-{os.getuid()}")


def _private_folder(path):
    """Creates `path` 0700, or checks that the existing one is ours and
    private (a folder in /tmp another user made must not be trusted)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or \
            st.st_mode & 0o077:
        raise StokerError("PERMISSION_DENIED",
                          f"{path} must be a folder owned by this user with "
                          "mode 0700 (set STOKER_EMBEDDED_DIR elsewhere)")
    os.makedirs(os.path.join(path, "owners"), mode=0o700, exist_ok=True)


def _start(folder, socket_path, threads):
    log_path = os.path.join(folder, "stokerd.log")
    args = [find_stokerd(), "--socket", socket_path,
            "--owners-dir", os.path.join(folder, "owners"),
            "--metrics-address", "127.0.0.1:0",
            # Its one user's sessions reach the object store endpoint that
            # user's own configuration names.
            "--object-store-own-endpoints"]
    if threads:
        args += ["--threads", str(int(threads))]
    with open(log_path, "wb") as log:
        # Its own session: it outlives the process that started it while
        # other ranks still use it.
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, close_fds=True,
                                start_new_session=True)
    deadline = time.monotonic() + 20
    while not _answers(socket_path):
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(log_path, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            proc.kill()
            raise StokerError("UNAVAILABLE",
                              f"embedded stokerd did not start: {tail}")
        time.sleep(0.02)


def daemon_socket(threads=None):
    """The socket of the daemon to use, starting the embedded one if needed."""
    default = os.environ.get("STOKER_SOCKET", DEFAULT_SOCKET)
    global _embedded
    with _lock:
        if _embedded is not None and _answers(_embedded[0]):
            return _embedded[0]
        if _answers(default):
            return default
        folder = embedded_dir()
        _private_folder(folder)
        socket_path = os.path.join(folder, "stoker.sock")
        owner = os.path.join(folder, "owners", str(os.getpid()))
        with open(os.path.join(folder, "lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # Registered before the daemon looks, so it never sees no owner.
            open(owner, "w").close()
            if not _answers(socket_path):
                _start(folder, socket_path, threads)
        _embedded = (socket_path, owner)
        return socket_path


def embedded_daemon_pid():
    """The embedded daemon's pid (from its stats), or None if not in use."""
    with _lock:
        if _embedded is None or not _answers(_embedded[0]):
            return None
        path = _embedded[0]
    from stoker._native import lib
    return int(lib.Client(path).stats()["pid"])


def stop_embedded_daemon():
    """Leaves the embedded daemon: it exits once no registered process is
    left (immediately when this was the last)."""
    global _embedded
    with _lock:
        if _embedded is None:
            return
        _, owner = _embedded
        _embedded = None
    try:
        os.unlink(owner)
    except FileNotFoundError:
        pass


atexit.register(stop_embedded_daemon)
