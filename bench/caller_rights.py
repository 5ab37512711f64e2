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

With STOKER_OLD_TREE set to another checkout with its daemon and client
built (an older main), the ordinary user's reader also runs against that
daemon with that client, in the same rounds, and new / old is printed.

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
                       batch_size=8192, shuffle=True, socket=sock,
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
                       batch_size=2, shuffle=True, socket=sock, ring_slots=8,
                       fields=[stoker.array(tuple(patch), "patch")],
                       pipeline=[stoker.random_patch(tuple(patch))])
    t = time.perf_counter()
    n = sum(b.samples for b in ld.batches())
    print(json.dumps({"rate": n / (time.perf_counter() - t)}))
"""


def read(uid, daemon, case, data, lib, tree=ROOT):
    """The rate `uid`'s reader measured (with libstoker.so at `lib` and the
    Python package of `tree`)."""
    cmd = [sys.executable, "-c", READ, case, daemon.sock, data, str(RUNS),
           json.dumps(list(PATCH)), str(PER_VOLUME)]
    if uid != os.geteuid():
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "client", "python"), STOKER_LIB=lib)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"reader (uid {uid}) failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"]


def open_daemon(tree=ROOT):
    """A fresh daemon (of `tree`) every user may reach (its folder and
    sockets open)."""
    d = Stokerd("--socket-mode", "0666", tree=tree)
    os.chmod(d.dir, 0o755)
    return d


def main():
    if os.geteuid() != 0:
        print("caller_rights: needs root to read as another user; skipped")
        return
    make_store()
    make_scans()
    # Each tree's library where uid 65534 can load it (bazel-bin is root's).
    libdir = tempfile.mkdtemp(prefix="stoker-bench-lib-")
    os.chmod(libdir, 0o755)
    old = os.environ.get("STOKER_OLD_TREE")
    trees = {"new": ROOT, **({"old": os.path.abspath(old)} if old else {})}
    libs = {}
    for name, tree in trees.items():
        os.makedirs(os.path.join(libdir, name))
        os.chmod(os.path.join(libdir, name), 0o755)
        libs[name] = shutil.copy(os.path.join(tree, "bazel-bin", "client", "c", "libstoker.so"),
                                 os.path.join(libdir, name))
    try:
        report(libs, trees)
    finally:
        shutil.rmtree(libdir, ignore_errors=True)


def report(libs, trees):
    # (label, uid, tree): this tree's daemon read by an admin and by an
    # ordinary user; an older tree's by the ordinary user.
    readers = [("admin (the daemon's opens)", os.geteuid(), "new"),
               ("confined (uid 65534)", NOBODY, "new")]
    if "old" in trees:
        readers.append(("old main, uid 65534", NOBODY, "old"))
    rates = {}
    for _ in range(RUNS):  # Rounds alternate the readers.
        for tree in trees:
            with open_daemon(trees[tree]) as d:  # Its files stay in the page cache.
                for name, uid, t in readers:
                    if t == tree:
                        rates.setdefault(("store", name), []).append(
                            read(uid, d, "store", STORE, libs[t], trees[t]))
        for name, uid, t in readers:
            with open_daemon(trees[t]) as d:  # Its volume cache starts empty.
                rates.setdefault(("compressed", name), []).append(
                    read(uid, d, "compressed", SCANS, libs[t], trees[t]))
    print(f"caller's rights on array data ({os.cpu_count()} cores, medians of {RUNS} rounds)")
    labels = {"store": "feature store, 4 x part*.H5 gzip, rows/s (batch 8192)",
              "compressed": "gzip *.H5 volumes, epoch 1, patches/s (batch 2)"}
    for case in ("store", "compressed"):
        print(f"  {labels[case]}")
        median = {name: statistics.median(rates[(case, name)]) for name, _, _ in readers}
        for name, _, _ in readers:
            print(f"    {name:<28} {median[name]:12.1f}")
        print(f"    {'confined / admin':<28} {median[readers[1][0]] / median[readers[0][0]]:12.3f}")
        if len(readers) > 2:
            print(f"    {'new / old (uid 65534)':<28} "
                  f"{median[readers[1][0]] / median[readers[2][0]]:12.3f}")


if __name__ == "__main__":
    main()
