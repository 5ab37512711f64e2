"""stokerd as a node service for many users, with real user ids: the daemon
runs unprivileged, trainers in the socket's group read batches (C++ and
Python), a user outside it is refused at connect, and a ring has no name
to open and no size its holder can change. Also systemd's readiness protocol (Type=notify).
Needs root to create the users; skipped with a message otherwise."""

import contextlib
import json
import fcntl
import os
import pwd
import grp
import shutil
import socket as socketlib
import subprocess
import tempfile
import time

import pytest

from conftest import wait_for_socket
from test_dist import bundle, read_checksum  # noqa: F401 (fixture)

GROUP = "stoker-test"
DAEMON_USER, TRAINER, TRAINER2, OUTSIDER = (
    "stoker-test-d", "stoker-test-t", "stoker-test-u", "stoker-test-x")

needs_users = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None
    or shutil.which("setpriv") is None,
    reason="needs root, useradd and setpriv to run as several users")


def ensure_user(name, groups=()):
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", name], check=True)
    for g in groups:
        subprocess.run(["usermod", "-aG", g, name], check=True)


@pytest.fixture(scope="module")
def users():
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", GROUP], check=True)
    ensure_user(DAEMON_USER)
    ensure_user(TRAINER, [GROUP])
    ensure_user(TRAINER2, [GROUP])
    ensure_user(OUTSIDER)
    # This process (root) is a client of those daemons too: it names their
    # user, as a trainer's profile does (as_user does for the others).
    before = os.environ.get("STOKER_DAEMON_USER")
    os.environ["STOKER_DAEMON_USER"] = DAEMON_USER
    yield
    if before is None:
        del os.environ["STOKER_DAEMON_USER"]
    else:
        os.environ["STOKER_DAEMON_USER"] = before


def as_user(user, *cmd, group=None):
    """Command line that runs `cmd` as `user` (and its groups), in an
    environment that names DAEMON_USER as the node service's user, as a
    trainer's profile or pod spec does (clients speak to no other daemon)."""
    pw = pwd.getpwnam(user)
    gid = grp.getgrnam(group).gr_gid if group else pw.pw_gid
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={gid}",
            "--init-groups", "--reset-env", "--",
            "env", f"STOKER_DAEMON_USER={DAEMON_USER}", *cmd]


def readable_copy(dataset):
    """The dataset where the daemon's user may read it."""
    folder = tempfile.mkdtemp(prefix="stoker-svc-data-")
    os.chmod(folder, 0o755)
    data = os.path.join(folder, "d")
    shutil.copytree(dataset, data)
    for base, dirs, files in os.walk(data):
        os.chmod(base, 0o755)
        for f in files:
            os.chmod(os.path.join(base, f), 0o644)
    return folder, data


@pytest.fixture()
def service(users, bundle, dataset):  # noqa: F811
    """stokerd of the bundle running as DAEMON_USER, socket group GROUP."""
    top, data = readable_copy(dataset)
    run_dir = os.path.join(top, "run")
    os.mkdir(run_dir, 0o750)
    os.chown(run_dir, pwd.getpwnam(DAEMON_USER).pw_uid, grp.getgrnam(GROUP).gr_gid)
    sock = os.path.join(run_dir, "stoker.sock")
    proc = subprocess.Popen(
        as_user(DAEMON_USER, os.path.join(bundle, "bin", "stokerd"), "--socket",
                sock, "--threads", "2", "--metrics-address", "",
                "--shm-prefix", "stoker-svc.", group=GROUP),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_socket(sock, proc)
    yield {"socket": sock, "data": data, "bundle": bundle, "proc": proc}
    proc.terminate()
    proc.wait(timeout=20)
    shutil.rmtree(top, ignore_errors=True)


@needs_users
def test_daemon_runs_unprivileged_and_rings_stay_its_own(service):
    pid = service["proc"].pid
    # setpriv execs stokerd in place: the pid is the daemon's.
    status = open(f"/proc/{pid}/status").read()
    uid = pwd.getpwnam(DAEMON_USER).pw_uid
    assert f"\nUid:\t{uid}\t{uid}\t{uid}\t{uid}" in status
    mode = os.stat(service["socket"]).st_mode & 0o777
    assert mode == 0o660
    # Not dumpable: its /proc files are root's, so not even its own user can
    # read its memory (trainers' credentials, their batches) or dump it.
    assert os.stat(f"/proc/{pid}/mem").st_uid == 0
    peek = subprocess.run(as_user(DAEMON_USER, "cat", f"/proc/{pid}/environ"),
                          capture_output=True, text=True)
    assert peek.returncode != 0 and "Permission denied" in peek.stderr, peek


@needs_users
def test_group_member_reads_and_outsider_is_refused(service):
    stokerctl = os.path.join(service["bundle"], "bin", "stokerctl")
    want = read_checksum(service["socket"], service["data"], stokerctl=stokerctl)
    # A trainer in the socket's group, C++ client.
    out = subprocess.run(
        as_user(TRAINER, stokerctl, "--socket", service["socket"], "read",
                "--dataset", service["data"], "--batch-size", "5",
                "--transform", "train", "--size", "40", "--seed", "11"),
        capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["checksum"] == want
    # The same trainer with the Python package of the bundle.
    script = (
        "import stoker; from stoker._native import lib\n"
        f"ld = stoker.Loader({service['data']!r}, batch_size=5, "
        f"transform='train', shuffle=True, image_size=40, seed=11, "
        f"socket={service['socket']!r})\n"
        "c = lib.Checksum()\n"
        "for b in ld.batches():\n"
        "    c.update(b.images); c.update(b.labels); c.update(b.status)\n"
        "print(c.hex)\n")
    py = os.path.join(service["bundle"], "lib", "stoker", "python")
    out = subprocess.run(
        as_user(TRAINER, "env", f"PYTHONPATH={py}", "/usr/bin/python3", "-c",
                script), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want
    # A user outside the group: refused at connect, with the socket named.
    out = subprocess.run(
        as_user(OUTSIDER, stokerctl, "--socket", service["socket"], "health"),
        capture_output=True, text=True)
    assert out.returncode == 1
    assert "PERMISSION_DENIED" in out.stderr and service["socket"] in out.stderr


@contextlib.contextmanager
def holding_session(service):
    """TRAINER's Loader (the bundle's Python package) holding a batch of an
    open session until the block ends."""
    py = os.path.join(service["bundle"], "lib", "stoker", "python")
    holder = subprocess.Popen(
        as_user(TRAINER, "env", f"PYTHONPATH={py}", "/usr/bin/python3", "-c",
                HOLD, service["data"], service["socket"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding", holder.stderr.read()
        yield holder
    finally:
        holder.kill()
        holder.wait()


HOLD = r"""
import sys, time
import stoker
ld = stoker.Loader(sys.argv[1], batch_size=2, transform="val", image_size=16,
                   shuffle=True, socket=sys.argv[2])
it = iter(ld)
next(it)
print("holding", flush=True)
time.sleep(30)
"""


@needs_users
def test_a_ring_has_no_name_and_no_holder_can_resize_it(service):
    """The ring is a sealed memory file: nothing in /dev/shm to open, the
    daemon's descriptors closed to every other user, and the trainer that
    holds one can neither shrink nor grow it."""
    with holding_session(service) as holder:
        assert not [n for n in os.listdir("/dev/shm") if n.startswith("stoker-svc.")]
        pid = service["proc"].pid
        maps = open(f"/proc/{pid}/maps").read()
        assert "/memfd:stoker-svc." in maps
        probe = ("import os, sys\n"
                 "try:\n"
                 "    os.listdir(f'/proc/{sys.argv[1]}/fd')\n"
                 "except PermissionError:\n"
                 "    print('denied')\n")
        for user in (TRAINER2, OUTSIDER):
            out = subprocess.run(as_user(user, "/usr/bin/python3", "-c", probe, str(pid)),
                                 capture_output=True, text=True)
            assert out.stdout.strip() == "denied", (user, out.stderr)
        # The holder's own mapping: the seals the kernel enforces.
        seals = None
        for line in open(f"/proc/{holder.pid}/maps"):
            if "/memfd:stoker-svc." in line:
                start = line.split("-")[0]
                path = f"/proc/{holder.pid}/map_files/{start}-{line.split()[0].split('-')[1]}"
                fd = os.open(path, os.O_RDWR)
                try:
                    seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
                    with pytest.raises(PermissionError):
                        os.ftruncate(fd, 0)
                    with pytest.raises(PermissionError):
                        os.ftruncate(fd, os.fstat(fd).st_size + 4096)
                finally:
                    os.close(fd)
                break
        want = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
        assert seals is not None and seals & want == want


def test_readiness_is_signalled_to_systemd(tmp_path):
    """Type=notify: READY=1 arrives on $NOTIFY_SOCKET once the control socket
    accepts connections, STOPPING=1 on SIGTERM."""
    from conftest import ROOT_FLAG, STOKERD
    notify = str(tmp_path / "notify")
    rx = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_DGRAM)
    rx.bind(notify)
    rx.settimeout(20)
    sock = str(tmp_path / "s.sock")
    env = dict(os.environ, NOTIFY_SOCKET=notify)
    proc = subprocess.Popen([STOKERD, "--socket", sock, "--threads", "1",
                             "--metrics-address", "", *ROOT_FLAG], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        msg = rx.recv(4096).decode()
        assert "READY=1" in msg and sock in msg
        probe = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        probe.connect(sock)  # Ready means listening.
        probe.close()
        proc.terminate()
        assert "STOPPING=1" in rx.recv(4096).decode()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        rx.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_daemon_refuses_root_unless_told(tmp_path):
    from conftest import STOKERD
    out = subprocess.run([STOKERD, "--socket", str(tmp_path / "s.sock"),
                          "--metrics-address", ""],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 2
    assert "refusing to run as root" in out.stderr
    assert not os.path.exists(tmp_path / "s.sock")


def test_socket_folders_others_can_write_are_refused(tmp_path):
    """The daemon will not serve in a folder where another user could replace
    its socket, and the client will not trust a server found in one."""
    from conftest import ROOT_FLAG, STOKERCTL, STOKERD
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # Like /tmp.
    out = subprocess.run([STOKERD, "--socket", str(shared / "s.sock"),
                          "--metrics-address", "", *ROOT_FLAG],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 1
    assert "lets other users create or replace sockets" in out.stderr
    # Something listening there anyway (an impostor): the client refuses it.
    impostor = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    impostor.bind(str(shared / "s.sock"))
    impostor.listen(4)
    try:
        out = subprocess.run([STOKERCTL, "--socket", str(shared / "s.sock"),
                              "health"], capture_output=True, text=True,
                             timeout=20)
        assert out.returncode == 1
        assert "FAILED_PRECONDITION" in out.stderr
        assert str(shared) in out.stderr
    finally:
        impostor.close()


def ctl(user, service, *args):
    stokerctl = os.path.join(service["bundle"], "bin", "stokerctl")
    return subprocess.run(as_user(user, stokerctl, "--socket", service["socket"],
                                  *args), capture_output=True, text=True)


@needs_users
def test_users_may_touch_only_their_own_sessions(service):
    with holding_session(service) as holder:
        # The daemon's own user is an admin: it sees the session in full.
        out = ctl(DAEMON_USER, service, "stats", "--json")
        assert out.returncode == 0, out.stderr
        (session,) = json.loads(out.stdout)["sessions"]
        sid = str(session["session_id"])
        assert session["dataset"] == f"folder:{service['data']}"
        assert int(session["client_uid"]) == pwd.getpwnam(TRAINER).pw_uid
        # Another member of the socket's group: no path, no pid, no close,
        # no resize.
        out = ctl(TRAINER2, service, "stats", "--json")
        assert out.returncode == 0, out.stderr
        (seen,) = json.loads(out.stdout)["sessions"]
        assert seen["dataset"] == "(another user's session)"
        assert int(seen.get("client_pid", 0)) == 0
        assert service["data"] not in ctl(TRAINER2, service, "sessions").stdout
        out = ctl(TRAINER2, service, "close", "--session", sid)
        assert out.returncode == 1 and "PERMISSION_DENIED" in out.stderr
        out = ctl(TRAINER2, service, "resize", "--pool", "decode", "--threads", "1")
        assert out.returncode == 1 and "PERMISSION_DENIED" in out.stderr
        assert holder.poll() is None  # Still reading.
        # The owner may close it.
        out = ctl(TRAINER, service, "close", "--session", sid)
        assert out.returncode == 0, out.stderr


@needs_users
def test_calls_without_a_caller_token_are_unauthenticated(service):
    grpc = pytest.importorskip("grpc")
    with grpc.insecure_channel("unix:" + service["socket"]) as channel:
        call = channel.unary_unary("/stoker.v1.Stoker/ListSessions",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as err:
            call(b"", timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            call(b"", timeout=10, metadata=[("stoker-caller-token", "0" * 32)])
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


@needs_users
def test_users_read_only_folders_they_can_open_themselves(service):
    """A dataset the daemon's user may read but the trainer may not open is
    refused; a symlink out of the trainer's own folder reads as a failure."""
    top = os.path.dirname(service["data"])
    private = os.path.join(top, "private")
    shutil.copytree(service["data"], private)
    daemon_uid = pwd.getpwnam(DAEMON_USER).pw_uid
    for base, dirs, files in os.walk(private):
        os.chown(base, daemon_uid, 0)
        for f in files:
            os.chown(os.path.join(base, f), daemon_uid, 0)
    os.chmod(private, 0o700)
    out = ctl(TRAINER, service, "read", "--dataset", private, "--batch-size", "4")
    assert out.returncode == 1
    assert "PERMISSION_DENIED" in out.stderr and private in out.stderr
    # The trainer's own folder, with one sample linking into the private one.
    own = os.path.join(top, "own")
    shutil.copytree(service["data"], own)
    cls = sorted(d for d in os.listdir(own))[0]
    target = os.path.join(private, cls, sorted(os.listdir(os.path.join(private, cls)))[0])
    os.symlink(target, os.path.join(own, cls, "zz_escape.jpg"))
    out = ctl(TRAINER, service, "read", "--dataset", own, "--batch-size", "4",
              "--on-error", "zeros", "--allow-errors")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["errors"] == 1
