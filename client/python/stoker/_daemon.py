"""Finding a daemon, or starting the embedded one this user's processes share.

With no socket given, the Loader uses the daemon the library's rule finds
(client/cpp/daemon_locator.h: $STOKER_SOCKET, which must answer; else the
node's daemon; else this user's embedded daemon, in $STOKER_EMBEDDED_DIR,
default /tmp/stoker-embedded-<uid>, mode 0700). The first process to need
the embedded daemon starts it (under a file lock, so the ranks of a
torchrun job started together start one); every process using it registers
its pid in the folder's owners/ list, and the daemon exits when the last
of them is gone (a killed trainer included: the daemon checks the pids).
Its log is stokerd.log there, the logs of its last three runs beside it
(.1 the newest). A process using it starts it again when it dies (at most
5 times in 10 minutes), and its sessions go on where they were (the
Loader's resume_timeout).
"""

import atexit
import fcntl
import os
import shutil
import stat
import subprocess
import threading
import time
import warnings

from stoker.errors import StokerError

LOGS_KEPT = 3  # Earlier runs' logs beside stokerd.log.
RESTARTS, RESTART_SPAN = 5, 600.0  # At most so many restarts in so many seconds.
_HERE = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_embedded = None  # (socket path, owner file) once this process registered
_described = {}  # Socket: the daemon in words, as located.


def _answers(path):
    from stoker._native import lib
    return lib.socket_answers(path)


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


def log_path(folder):
    """The log of the embedded daemon in `folder`."""
    return os.path.join(folder, "stokerd.log")


def _rotate(log):
    """Keeps the last LOGS_KEPT runs' logs: stokerd.log.1 the newest."""
    for n in range(LOGS_KEPT - 1, 0, -1):
        if os.path.exists(f"{log}.{n}"):
            os.replace(f"{log}.{n}", f"{log}.{n + 1}")
    if os.path.exists(log):
        os.replace(log, f"{log}.1")


def _identity(pid):
    """"pid starttime" of process `pid` while it runs (not a zombie), else
    None: a pid reused by another process later differs."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return f"{pid} {fields[19]}"


def _running(folder):
    """Whether the embedded daemon `folder` records still runs."""
    try:
        with open(os.path.join(folder, "stokerd.pid")) as f:
            recorded = f.read().strip()
        return _identity(int(recorded.split()[0])) == recorded
    except (OSError, ValueError, IndexError):
        return False


def _start(folder, socket_path, threads):
    log = log_path(folder)
    _rotate(log)
    args = [find_stokerd(), "--socket", socket_path,
            "--owners-dir", os.path.join(folder, "owners"),
            "--metrics-address", "127.0.0.1:0",
            # Its one user's sessions reach the object store endpoint that
            # user's own configuration names.
            "--object-store-own-endpoints"]
    if threads:
        args += ["--threads", str(int(threads))]
    with open(log, "wb") as out:
        # Its own session: it outlives the process that started it while
        # other ranks still use it.
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, close_fds=True,
                                start_new_session=True)
    with open(os.path.join(folder, "stokerd.pid"), "w") as f:
        f.write(_identity(proc.pid) or "")
    deadline = time.monotonic() + 20
    while not _answers(socket_path):
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(log, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            proc.kill()
            raise StokerError("UNAVAILABLE",
                              f"embedded stokerd did not start (its log: {log}): {tail}")
        time.sleep(0.02)


def _start_unless_running(folder, socket_path, threads):
    """Starts the embedded daemon under the folder's lock unless one runs
    (or an older one without a pid file answers). Whether it started one."""
    with open(os.path.join(folder, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _running(folder) or _answers(socket_path):
            return False
        _start(folder, socket_path, threads)
        return True


def _watch(folder, socket_path, threads):
    """While this process uses the embedded daemon: starts it again when it
    dies, so the sessions' reconnects find it (at most RESTARTS times in
    RESTART_SPAN seconds, then says so and stops)."""
    restarts = []
    while True:
        time.sleep(0.25)
        with _lock:
            if _embedded is None or _embedded[0] != socket_path:
                return
        if _running(folder) or _answers(socket_path):
            continue
        now = time.monotonic()
        restarts = [t for t in restarts if now - t < RESTART_SPAN]
        log = log_path(folder)
        if len(restarts) >= RESTARTS:
            warnings.warn(f"stoker: the embedded daemon stopped again ({RESTARTS} restarts "
                          f"in {RESTART_SPAN:.0f} s); not starting it again. Its logs: {log}, "
                          f"{log}.1 ...", RuntimeWarning)
            return
        try:
            started = _start_unless_running(folder, socket_path, threads)
        except (OSError, StokerError) as e:
            warnings.warn(f"stoker: the embedded daemon stopped and did not start again: {e}",
                          RuntimeWarning)
            return
        if started:
            restarts.append(now)
            warnings.warn(f"stoker: the embedded daemon stopped (its log: {log}.1); "
                          "started it again, sessions go on where they were", RuntimeWarning)


def daemon_socket(threads=None):
    """The socket of the daemon to use, starting the embedded one if needed."""
    from stoker._native import lib
    global _embedded
    with _lock:
        if _embedded is not None and _answers(_embedded[0]):
            return _embedded[0]
        at = lib.locate_daemon()
        _described[at["socket"]] = at["described"]
        if not at["embedded"]:
            return at["socket"]
        socket_path = at["socket"]
        folder = os.path.dirname(socket_path)
        _private_folder(folder)
        owner = os.path.join(folder, "owners", str(os.getpid()))
        # Registered before the daemon looks, so it never sees no owner.
        open(owner, "w").close()
        _start_unless_running(folder, socket_path, threads)
        first = _embedded is None
        _embedded = (socket_path, owner)
        if first:
            threading.Thread(target=_watch, args=(folder, socket_path, threads),
                             name="stoker-embedded-watch", daemon=True).start()
        return socket_path


def described(socket):
    """Which daemon `socket` is, in words for warnings (the embedded one's
    names its log)."""
    with _lock:
        return _described.get(socket, f"the daemon at {socket}")


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
