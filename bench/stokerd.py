"""A private stokerd for the benchmarks: this tree's build (or the tree at
`tree`: another checkout's build, to compare) on a socket in a fresh
temporary folder, one decode thread per core, /metrics off, extra flags as
given. $STOKERD names another daemon binary to run (a release bundle's). Use it as a context manager (or call close()): it stops
the daemon and removes the folder."""

import json
import os
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.join(ROOT, "bazel-bin")


class Stokerd:
    def __init__(self, *flags, tree=ROOT):
        self.dir = tempfile.mkdtemp(prefix="stoker-bench-")
        self.sock = os.path.join(self.dir, "s.sock")
        self.proc = subprocess.Popen(
            [os.environ.get("STOKERD") or os.path.join(tree, "bazel-bin", "server", "stokerd"),
             "--socket", self.sock,
             "--threads", str(os.cpu_count() or 1), "--metrics-address", "", *flags,
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None:
                raise RuntimeError(f"stokerd exited with {self.proc.returncode}")
            time.sleep(0.02)

    def stats(self):
        """`stokerctl stats --json`, parsed."""
        out = subprocess.run([os.path.join(BIN, "client", "cpp", "stokerctl"),
                              "--socket", self.sock, "stats", "--json"],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
