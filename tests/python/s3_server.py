"""A local S3 API server for tests and benchmarks: moto_server
($STOKER_MOTO_SERVER, which `make test` sets) on a free loopback port with
signature checks off (its checker mishandles the '/' of a delimited
listing; signing is tested with checks on in server/objstore), and plain
uploads to it."""

import os
import re
import subprocess
import threading
import urllib.request

MOTO = os.environ.get("STOKER_MOTO_SERVER", "")


def put_object(url, path, data=b""):
    """PUT `data` at /bucket[/key] of the server at `url` (checks off)."""
    req = urllib.request.Request(f"{url}/{path}", data=data, method="PUT",
                                 headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(req) as r:
        if r.status != 200:
            raise RuntimeError(f"PUT {path}: HTTP {r.status}")


def available():
    return bool(MOTO) and os.access(MOTO, os.X_OK)


class MotoServer:
    """moto_server on 127.0.0.1; `url` its endpoint. `cpus` (a set of core
    numbers) keeps it, and every thread it starts, on those cores."""

    def __init__(self, cpus=None):
        self.proc = subprocess.Popen(
            [MOTO, "-H", "127.0.0.1", "-p", "0"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        port = None
        for line in self.proc.stdout:  # Werkzeug announces its port.
            m = re.search(r"Running on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            self.proc.kill()
            raise RuntimeError("moto_server did not start")
        # It logs every request: read on, or it blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        self.url = f"http://127.0.0.1:{port}"

    def put(self, path, data=b""):
        """PUT `data` at /bucket[/key]."""
        put_object(self.url, path, data)

    def upload_folder(self, folder, bucket, prefix):
        """Every file under `folder` at bucket/prefix/<its relative path>."""
        self.put(bucket)
        for dirpath, _, names in os.walk(folder):
            for name in sorted(names):
                if name.startswith("."):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    self.put(f"{bucket}/{prefix}/{os.path.relpath(path, folder)}", f.read())

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
