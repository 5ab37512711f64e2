"""The node service as it ships to Kubernetes: the OCI image deploy/image.py
builds offline, and the kustomize base in deploy/kubernetes.

The image is checked by skopeo (a real OCI reader that verifies every
digest), then run as the DaemonSet would run it: its root file system
read-only, the image's user, the DaemonSet's own arguments, a host socket
folder as the one shared path. A trainer outside it reads an epoch with
the checksum a node daemon gives, and the DaemonSet's probe command answers
inside it."""

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

import pytest

from conftest import ROOT, wait_for_socket
from test_dist import LOADER_SCRIPT, artifact, read_checksum

import yaml  # Debian's python3-yaml (deploy/install-deps.sh).

sys.path.insert(0, os.path.join(ROOT, "deploy"))
from image import UID, image_name  # noqa: E402
from package import version  # noqa: E402

KUSTOMIZE = os.path.join(ROOT, "deploy", "kubernetes")
VERSION = version()


@pytest.fixture(scope="module")
def image():
    path = os.path.join(ROOT, "dist", image_name(VERSION))
    if not os.path.exists(path):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "deploy", "image.py")],
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr
    assert os.path.getmtime(path) >= os.path.getmtime(artifact("stoker-*-linux-*.tar.gz"))
    return path


def rendered():
    """The base's objects: `kubectl kustomize` where kubectl is installed;
    else its resources in order, which is the same while the base has no
    other keys (checked)."""
    kubectl = shutil.which("kubectl")
    if kubectl:
        out = subprocess.run([kubectl, "kustomize", KUSTOMIZE], check=True,
                             capture_output=True, text=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    base = yaml.safe_load(open(os.path.join(KUSTOMIZE, "kustomization.yaml")))
    assert set(base) == {"resources"}, base
    docs = []
    for name in base["resources"]:
        docs += [d for d in yaml.safe_load_all(open(os.path.join(KUSTOMIZE, name))) if d]
    return docs


def daemonset():
    (ds,) = [d for d in rendered() if d["kind"] == "DaemonSet"]
    return ds


def test_the_daemonset_shares_only_the_socket_folder_with_its_node():
    pod = daemonset()["spec"]["template"]["spec"]
    for key in ("hostIPC", "hostPID", "hostNetwork"):
        assert not pod.get(key), key
    host = [v for v in pod["volumes"] if "hostPath" in v]
    assert [v["hostPath"]["path"] for v in host] == ["/run/stoker"]
    (c,) = pod["containers"]
    assert c["image"] == f"stoker:{VERSION}"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts[host[0]["name"]] == "/run/stoker"
    sec = c["securityContext"]
    assert sec["allowPrivilegeEscalation"] is False
    assert sec["readOnlyRootFilesystem"] is True
    assert sec["capabilities"] == {"drop": ["ALL"]}
    assert not sec.get("privileged")
    assert pod["securityContext"]["runAsUser"] == UID
    assert pod["securityContext"]["fsGroup"] == UID
    # The one step as root: the socket folder made the daemon's.
    (init,) = pod["initContainers"]
    assert init["image"] == c["image"]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"],
                                                       "add": ["CHOWN", "FOWNER"]}
    assert init["securityContext"]["allowPrivilegeEscalation"] is False
    assert [m["mountPath"] for m in init["volumeMounts"]] == ["/run/stoker"]
    # The example trainer: the same folder, the daemon's group and uid.
    trainer = yaml.safe_load(open(os.path.join(KUSTOMIZE, "trainer-pod.yaml")))
    spec = trainer["spec"]
    assert UID in spec["securityContext"]["supplementalGroups"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["STOKER_DAEMON_USER"] == str(UID)
    assert env["STOKER_SOCKET"].startswith("/run/stoker/")
    for key in ("hostIPC", "hostPID", "hostNetwork"):
        assert not spec.get(key), key


def test_skopeo_reads_the_image_and_its_digests(image):
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is missing: deploy/install-deps.sh installs it"
    out = subprocess.run([skopeo, "inspect", "--config", f"oci-archive:{image}"],
                         check=True, capture_output=True, text=True).stdout
    config = json.loads(out)
    assert config["architecture"] == "amd64" and config["os"] == "linux"
    assert config["config"]["Entrypoint"] == ["/opt/stoker/bin/stokerd"]
    assert config["config"]["User"] == f"{UID}:{UID}"
    # A copy reads every blob and checks it against its digest.
    dest = tempfile.mkdtemp(prefix="stoker-oci-copy-")
    try:
        subprocess.run([skopeo, "copy", "--quiet", f"oci-archive:{image}",
                        f"dir:{dest}"], check=True, capture_output=True, text=True)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def unpack(image, folder):
    """The image's one layer, as a container engine would lay it out."""
    with tarfile.open(image) as outer:
        index = json.load(outer.extractfile("index.json"))
        manifest = json.load(outer.extractfile(
            "blobs/sha256/" + index["manifests"][0]["digest"].split(":")[1]))
        (layer,) = manifest["layers"]
        blob = outer.extractfile("blobs/sha256/" + layer["digest"].split(":")[1])
        with tarfile.open(fileobj=blob, mode="r:gz") as inner:
            inner.extractall(folder, numeric_owner=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_the_images_stokerd_serves_a_trainer_through_the_socket_folder(image, daemon,
                                                                        dataset):
    root = tempfile.mkdtemp(prefix="stoker-image-root-")
    run_dir = tempfile.mkdtemp(prefix="stoker-image-run-")  # Root's 0700, as made.
    log = os.path.join(tempfile.mkdtemp(prefix="stoker-image-log-"), "stokerd.log")
    unpack(image, root)
    for mount_point in ("run/stoker", "var/cache/stoker"):  # As a runtime makes them.
        os.makedirs(os.path.join(root, mount_point), exist_ok=True)
    pod = daemonset()["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    (c,) = pod["containers"]
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in c["args"]]
    # The init container, as root in the image with only the capabilities
    # it asks for, its root read-only, makes the host folder the daemon's.
    assert init["image"] == c["image"]
    caps = ",".join(f"+{cap.lower()}" for cap in
                    init["securityContext"]["capabilities"]["add"])
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "--",
                          "/bin/sh", "-c", " && ".join([
                              f"mount --bind {root} {root}", f"mount -o remount,bind,ro {root}",
                              f"mount --bind {run_dir} {root}/run/stoker",
                              f"exec chroot {root} setpriv --bounding-set=-all,{caps} "
                              "--inh-caps=-all --no-new-privs -- "
                              + shlex.join(init["command"])])],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    st = os.stat(run_dir)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (UID, UID, 0o755)
    # As the kubelet would: the root read-only, the socket folder and the
    # cache writable, /proc and /dev mounted, the image's user.
    setup = " && ".join([
        f"mount --bind {root} {root}", f"mount -o remount,bind,ro {root}",
        f"mount -t proc proc {root}/proc", f"mount --rbind /dev {root}/dev",
        f"mount --bind {run_dir} {root}/run/stoker",
        f"mount -t tmpfs tmpfs {root}/var/cache/stoker",
        f"chown {UID}:{UID} {root}/var/cache/stoker",
        f"exec chroot --userspec={UID}:{UID} {root} "
        + shlex.join(c.get("command", ["/opt/stoker/bin/stokerd"]) + args)])
    with open(log, "w") as err:
        proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--",
                                 "/bin/sh", "-c", setup], stdout=subprocess.DEVNULL, stderr=err)
    sock = os.path.join(run_dir, "stoker.sock")
    try:
        try:
            wait_for_socket(sock, proc, seconds=30)  # Until it answers there.
        except RuntimeError as e:
            raise AssertionError(f"{e}: {open(log).read()}") from None
        # The probe runs in the container: its mounts, its user.
        probe = c["readinessProbe"]["exec"]["command"]
        out = subprocess.run(["nsenter", f"--target={proc.pid}", "--mount", "--",
                              "chroot", f"--userspec={UID}:{UID}", root, *probe],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python"),
                   STOKER_DAEMON_USER=str(UID))
        got = subprocess.run([sys.executable, "-c", LOADER_SCRIPT, dataset, "", sock],
                             env=env, capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["checksum"] == read_checksum(daemon.socket, dataset)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        subprocess.run(["rm", "-rf", root, run_dir, os.path.dirname(log)])
