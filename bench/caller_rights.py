"""What the caller's own opens cost on array data, in one run on the same
files, daemon build and cores: each case read by a trainer of the daemon's
own user (an admin: the daemon opens the files itself, as it did for every
caller before trainers opened their own) and by an ordinary user (uid
65534: every file opened by its own side, with its rights, and handed
over).

  store:      the feature store of bench/any_sample.py (a'): 4 x part*.H5
              [50k, 128] float32 gzip + labels, rows, batch 8192; rows/s,
              the median of RUNS passes of 10 epochs after a warm-up, one
              Loader.
  compressed: the gzip volumes of (b'): 4 x 0.47 GiB *.H5, 72x136x136
              patches, 25 a volume, batch 2; patches/s of epoch 1 on a
              fresh daemon (every volume inflated), the median of RUNS
              fresh daemons each.

Needs root (to run the second reader as uid 65534) and Debian's python3
with numpy and h5py; data under $STOKER_BENCH_ARRAYS as any_sample.py makes
it. Run with `make bench` or directly.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from any_sample import PATCH, PER_VOLUME, RUNS, SCANS, STORE, make_scans, make_store  # noqa: E402
from stokerd import Stokerd  # noqa: E402

NOBODY = 65534

# Run by each reader: prints one JSON object.
READ = r"""
import json, statistics, sys, time
import stoker
case, sock, data, runs, patch, per_volume = (sys.argv[1], sys.argv[2], sys.argv[3],
                                             int(sys.argv[4]), json.loads(sys.argv[5]),
                                             int(sys.argv[6]))
if case == "store":
    ld = stoker.Loader({"hdf5": {"path": data, "dataset": "x", "labels": "y"}},
                       batch_size=8192, socket=sock,
                       fields=[stoker.array((128,), "x"), stoker.label()], pipeline=[])
    times = []
    for k in range(runs + 1):  # A pass: 10 epochs (2M rows), not one 30 ms epoch.
        t = time.perf_counter()
        rows = sum(b.samples for _ in range(10) for b in ld.batches())
        if k > 0:
            times.append(time.perf_counter() - t)
    print(json.dumps({"rate": rows / statistics.median(times)}))
else:
    ld = stoker.Loader({"hdf5": {"path": data, "dataset": "vol"},
                        "samples_per_volume": per_volume},
                       batch_size=2, socket=sock, ring_slots=8,
                       fields=[stoker.array(tuple(patch), "patch")],
                       pipeline=[stoker.random_patch(tuple(patch))])
    t = time.perf_counter()
    n = sum(b.samples for b in ld.batches())
    print(json.dumps({"rate": n / (time.perf_counter() - t)}))
"""


def read(uid, daemon, case, data, lib):
    """The rate `uid`'s reader measured (with libstoker.so at `lib`)."""
    cmd = [sys.executable, "-c", READ, case, daemon.sock, data, str(RUNS),
           json.dumps(list(PATCH)), str(PER_VOLUME)]
    if uid != os.geteuid():
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python"), STOKER_LIB=lib)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"reader (uid {uid}) failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"]


def open_daemon():
    """A fresh daemon every user may reach (its folder and sockets open)."""
    d = Stokerd("--socket-mode", "0666")
    os.chmod(d.dir, 0o755)
    return d


def main():
    if os.geteuid() != 0:
        print("caller_rights: needs root to read as another user; skipped")
        return
    make_store()
    make_scans()
    # This tree's library where uid 65534 can load it (bazel-bin is root's).
    libdir = tempfile.mkdtemp(prefix="stoker-bench-lib-")
    os.chmod(libdir, 0o755)
    lib = shutil.copy(os.path.join(ROOT, "bazel-bin", "client", "c", "libstoker.so"), libdir)
    try:
        report(lib)
    finally:
        shutil.rmtree(libdir, ignore_errors=True)


def report(lib):
    readers = (("admin (the daemon's opens)", os.geteuid()), ("confined (uid 65534)", NOBODY))
    rates = {}
    for _ in range(RUNS):  # Rounds alternate the readers.
        with open_daemon() as d:  # One daemon: its files stay in the page cache.
            for name, uid in readers:
                rates.setdefault(("store", name), []).append(read(uid, d, "store", STORE, lib))
        for name, uid in readers:
            with open_daemon() as d:  # Its volume cache starts empty.
                rates.setdefault(("compressed", name), []).append(
                    read(uid, d, "compressed", SCANS, lib))
    print(f"caller's rights on array data ({os.cpu_count()} cores, medians of {RUNS} rounds)")
    labels = {"store": "feature store, 4 x part*.H5 gzip, rows/s (batch 8192)",
              "compressed": "gzip *.H5 volumes, epoch 1, patches/s (batch 2)"}
    for case in ("store", "compressed"):
        print(f"  {labels[case]}")
        median = {name: statistics.median(rates[(case, name)]) for name, _ in readers}
        for name, _ in readers:
            print(f"    {name:<28} {median[name]:12.1f}")
        print(f"    {'confined / admin':<28} {median[readers[1][0]] / median[readers[0][0]]:12.3f}")


if __name__ == "__main__":
    main()
