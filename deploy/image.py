#!/usr/bin/env python3
"""Builds the node service's OCI image offline, from Debian's archive and
the release tarball (no registry, no container engine):

    deploy/image.py     # dist/stokerd-<v>-oci.tar, after deploy/package.py dist

The root file system is Debian 12's essential set plus ca-certificates,
made by mmdebstrap from Debian's archive (MIRROR), with the release
tarball unpacked at /opt/stoker-<v> (/opt/stoker links to it) and a
`stoker` user and group (uid and gid 9464) for the daemon. It becomes one
layer of an OCI image layout, written as a tar archive that podman,
skopeo and docker load (`podman load -i`, `docker load -i`) under the name
stoker:<v>. deploy/kubernetes runs it; tests/python/test_image.py runs its
stokerd with the DaemonSet's arguments.

Only the standard library is used, besides mmdebstrap.
"""

import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from package import arch, version  # noqa: E402

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
UID = 9464  # The DaemonSet's runAsUser and fsGroup.
# Fixed times make the same inputs give the same image.
EPOCH = 1700000000
CREATED = "2023-11-14T22:13:20Z"


def image_name(ver):
    return f"stokerd-{ver}-oci.tar"


def root_filesystem(tarball, ver, out):
    """mmdebstrap's tar of the image's file system, written to `out`."""
    name = os.path.basename(tarball)[:-len(".tar.gz")]
    hooks = [
        f'tar -C "$1/opt" --no-same-owner -xzf {shlex.quote(tarball)}',
        f'ln -s {shlex.quote(name)} "$1/opt/stoker"',
        f'echo "stoker:x:{UID}:" >> "$1/etc/group"',
        f'echo "stoker:x:{UID}:{UID}:stokerd:/nonexistent:/usr/sbin/nologin"'
        ' >> "$1/etc/passwd"',
        'mkdir -p "$1/var/cache/stoker"',
        f'chown {UID}:{UID} "$1/var/cache/stoker"',
    ]
    cmd = ["mmdebstrap", "--quiet", "--variant=essential",
           "--include=ca-certificates",
           "--dpkgopt=path-exclude=/usr/share/man/*",
           "--dpkgopt=path-exclude=/usr/share/locale/*",
           "--dpkgopt=path-exclude=/usr/share/doc/*"]
    cmd += [f"--customize-hook={h}" for h in hooks]
    cmd += [SUITE, out, MIRROR]
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(EPOCH))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"image: mmdebstrap failed:\n{done.stderr[-4000:]}")


def blob(files, data):
    """Adds `data` as a content-addressed blob; returns its descriptor."""
    digest = hashlib.sha256(data).hexdigest()
    files[f"blobs/sha256/{digest}"] = data
    return {"digest": f"sha256:{digest}", "size": len(data)}


def image_config(ver, diff_id):
    return {
        "created": CREATED, "architecture": "amd64", "os": "linux",
        "config": {
            "User": f"{UID}:{UID}",
            "Env": ["PATH=/opt/stoker/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": ["/opt/stoker/bin/stokerd"],
            # Metrics stay on the container's loopback unless
            # --metrics-address says otherwise.
            "Cmd": ["--socket=/run/stoker/stoker.sock"],
            "Labels": {"org.opencontainers.image.title": "stokerd",
                       "org.opencontainers.image.version": ver},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": CREATED,
                     "created_by": f"deploy/image.py: mmdebstrap {SUITE} + "
                                   f"stoker-{ver}"}],
    }


def oci_archive(layer_tar, ver, out):
    """An OCI image layout of one layer, with docker's manifest.json beside
    it, as a tar archive at `out`."""
    raw = open(layer_tar, "rb").read()
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    files = {}
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=EPOCH) as g:
        g.write(raw)
    layer = blob(files, gz.getvalue())
    layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    config = blob(files, json.dumps(image_config(ver, diff_id), sort_keys=True).encode())
    config["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = blob(files, json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config, "layers": [layer]}, sort_keys=True).encode())
    manifest["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    manifest["annotations"] = {"org.opencontainers.image.ref.name": ver,
                               "io.containerd.image.name": f"docker.io/library/stoker:{ver}"}
    manifest["platform"] = {"architecture": "amd64", "os": "linux"}
    files["index.json"] = json.dumps({"schemaVersion": 2,
                                      "manifests": [manifest]}).encode()
    files["oci-layout"] = b'{"imageLayoutVersion": "1.0.0"}'
    files["manifest.json"] = json.dumps([{
        "Config": "blobs/sha256/" + config["digest"].split(":")[1],
        "RepoTags": [f"stoker:{ver}"],
        "Layers": ["blobs/sha256/" + layer["digest"].split(":")[1]]}]).encode()
    with tarfile.open(out, "w") as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(files[name]), EPOCH, 0o644
            tar.addfile(info, io.BytesIO(files[name]))


def main():
    if arch() != "x86_64":
        sys.exit("image: only x86_64 images are built")
    if shutil.which("mmdebstrap") is None:
        sys.exit("image: mmdebstrap is missing: deploy/install-deps.sh installs it")
    ver = version()
    tarball = os.path.join(ROOT, "dist", f"stoker-{ver}-linux-{arch()}.tar.gz")
    if not os.path.exists(tarball):
        sys.exit(f"image: {tarball} is missing: run deploy/package.py dist first")
    out = os.path.join(ROOT, "dist", image_name(ver))
    with tempfile.TemporaryDirectory() as tmp:
        layer = os.path.join(tmp, "rootfs.tar")
        root_filesystem(tarball, ver, layer)
        oci_archive(layer, ver, out + ".partial")
    os.replace(out + ".partial", out)
    print(f"image: {os.path.relpath(out, ROOT)} ({os.path.getsize(out) / 2**20:.1f} MiB), "
          f"stoker:{ver}")


if __name__ == "__main__":
    main()
