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
(.1 the newest), and stokerd.json says which build and threads it runs
with: a process of another build does not attach to it (it says why), one
asking for other threads is told they are not applied. A process using it
starts it again when it dies (at most 5 times in 10 minutes), and its
sessions go on where they were (the Loader's resume_timeout).
"""

import atexit
import contextlib
import fcntl
import hashlib
import json
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
_build_id = None  # _build()'s, once computed.
_watcher = None  # The thread that starts the embedded daemon again (_watch).


def _answers(path):
    from stoker._native import lib
    return lib.socket_answers(path)


def find_binary(name, named=True):
    """Path of a bundled binary: $STOKERD (for stokerd, if `named`), the
    wheel's _bin, the release bundle's bin, PATH, or the Bazel output of a
    source tree."""
    if name == "stokerd" and named and os.environ.get("STOKERD"):
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


def _build():
    """This install's stokerd, by content: two installs of one build share
    an embedded daemon, two builds do not."""
    global _build_id
    if _build_id is None:
        h = hashlib.blake2b(digest_size=16)
        with open(find_stokerd(), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _build_id = h.hexdigest()
    return _build_id


def _record(folder):
    """What the process that started the embedded daemon in `folder` wrote
    of it (stokerd.json: process, binary, build, threads), or None."""
    try:
        with open(os.path.join(folder, "stokerd.json")) as f:
            record = json.load(f)
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def _running(folder, record=None):
    """Whether the embedded daemon `folder` records still runs."""
    record = record or _record(folder)
    try:
        return _identity(int(str(record["process"]).split()[0])) == record["process"]
    except (TypeError, KeyError, ValueError, IndexError):
        return False


def _same_build(folder, socket_path, threads):
    """Checks that the running embedded daemon this process did not start
    is this install's build (StokerError FAILED_PRECONDITION saying why
    not), and warns when it runs with other threads than asked for."""
    record = _record(folder)
    owners = os.path.join(folder, "owners")
    if record is None or not _running(folder, record):
        raise StokerError(
            "FAILED_PRECONDITION", f"an embedded daemon that no stoker of this version started "
            f"answers at {socket_path}; it exits when the processes using it do (their pids "
            f"are in {owners}), or set STOKER_EMBEDDED_DIR to a folder of this install's own")
    if record.get("build") != _build():
        raise StokerError(
            "FAILED_PRECONDITION", f"this user's embedded daemon at {socket_path} (pid "
            f"{str(record['process']).split()[0]}) runs another build of stokerd "
            f"({record.get('binary')}) than this install's ({find_stokerd()}); it exits when "
            f"the processes using it do (their pids are in {owners}), or set "
            "STOKER_EMBEDDED_DIR to a folder of this install's own")
    if threads and int(threads) != record.get("threads"):
        running = record.get("threads") or "every core"
        warnings.warn(f"stoker: threads={threads} is not applied: this user's embedded daemon "
                      f"(started by another process) runs with threads={running}; `stokerctl "
                      "resize --threads N` changes it for all its sessions", RuntimeWarning)


def _check_named_stokerd():
    """A stokerd that $STOKERD names must be of this package's release: an
    older one lacks flags the embedded daemon is started with."""
    path = os.environ.get("STOKERD")
    if not path:
        return
    from stoker._native import version as ours
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=10, stdin=subprocess.DEVNULL).stdout.split()
    except (OSError, subprocess.TimeoutExpired) as e:
        raise StokerError("FAILED_PRECONDITION", f"$STOKERD names {path}, which does "
                          f"not run ({e}): unset STOKERD to use this package's own") from None
    theirs = out[1] if len(out) > 1 and out[0] == "stokerd" else "of no known release"
    if theirs != ours:
        try:
            own = f" ({find_binary('stokerd', named=False)})"
        except StokerError:
            own = ""
        raise StokerError("FAILED_PRECONDITION",
                          f"$STOKERD names {path}, stokerd {theirs}; this package is stoker "
                          f"{ours} and starts its embedded daemon with flags another release "
                          f"may lack: unset STOKERD to use this package's own{own}, or name "
                          f"a stokerd {ours}")


def _start(folder, socket_path, threads):
    _check_named_stokerd()
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
    record = {"process": _identity(proc.pid), "binary": find_stokerd(), "build": _build(),
              "threads": int(threads or 0)}
    with open(os.path.join(folder, "stokerd.json.new"), "w") as f:
        json.dump(record, f)
    os.replace(os.path.join(folder, "stokerd.json.new"), os.path.join(folder, "stokerd.json"))
    deadline = time.monotonic() + 20
    while not _answers(socket_path):
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(log, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            proc.kill()
            raise StokerError("UNAVAILABLE",
                              f"embedded stokerd did not start (its log: {log}): {tail}")
        time.sleep(0.02)


def _start_unless_running(folder, socket_path, threads, say=None):
    """Starts the embedded daemon under the folder's lock unless one runs
    (or an older one without a record answers), warning `say` (if given)
    first. Whether it started one."""
    with open(os.path.join(folder, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _running(folder) or _answers(socket_path):
            return False
        if say:
            warnings.warn(say, RuntimeWarning)
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
                return  # Left (a later daemon_socket starts a watcher of its own).
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
        # The threads it ran with, whoever started it.
        threads = (_record(folder) or {}).get("threads") or threads
        try:
            # Said before it starts, so before any session goes on.
            if _start_unless_running(folder, socket_path, threads,
                                     say=f"stoker: the embedded daemon stopped (its log: "
                                     f"{log}.1); starting it again, sessions go on where "
                                     "they were"):
                restarts.append(now)
        except (OSError, StokerError) as e:
            warnings.warn(f"stoker: the embedded daemon stopped and did not start again: {e}",
                          RuntimeWarning)
            return


def daemon_socket(threads=None):
    """The socket of the daemon to use, starting the embedded one if needed."""
    from stoker._native import lib
    global _embedded, _watcher
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
        try:
            if not _start_unless_running(folder, socket_path, threads):
                _same_build(folder, socket_path, threads)
        except BaseException:
            _embedded = None  # Not this process's to use: unregistered.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(owner)
            raise
        _embedded = (socket_path, owner)
        if _watcher is None or not _watcher.is_alive():
            _watcher = threading.Thread(target=_watch, args=(folder, socket_path, threads),
                                        name="stoker-embedded-watch", daemon=True)
            _watcher.start()
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
