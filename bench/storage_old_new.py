"""storage_bench of this tree and of an older build, in the same run.

    STOKER_OLD_TREE=/path/to/old/checkout bench/storage_old_new.py [ROUNDS]

Both trees' `bazel-bin/bench/storage_bench` read the demo data (every
sample from storage, 0 ms and 20 ms injected per open) in alternating
rounds of one; medians over ROUNDS (default 3). This tree's bench reads
train and val by `stokerctl read` processes of the daemon's user (admin)
and of uid 65534 (confined); an older tree whose bench does the same is
paired row by row. An older bench that reads with an in-process client as
the daemon's own user, one transform a run, needs a --transform flag
(older checkouts lack it, and two lines add it); each row is then against
it. Printed: each rate, new / old, and each row's 20 ms / 0 ms.
"""

import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DATA = "/tmp/stoker-demo-data"


def bench_of(tree):
    return os.path.join(tree, "bazel-bin", "bench", "storage_bench")


def same_format(tree):
    """Whether `tree`'s storage_bench reads train and val by stokerctl as
    this tree's does (it has no --transform flag), so its rows pair with
    this tree's row by row."""
    out = subprocess.run([bench_of(tree), "--helpfull"], capture_output=True, text=True)
    return "-transform" not in out.stdout + out.stderr


def run(tree, transform="train"):
    """One round of `tree`'s storage_bench: {(transform, reader): (0 ms, 20 ms)}."""
    args = [bench_of(tree), "--data", DATA, "--rounds", "1"]
    if transform:
        args.append(f"--transform={transform}")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    rows = {}
    old = re.findall(r"every read from storage, (\d+) ms:\s+([\d.]+) img/s", out)
    if old:  # The older format: one transform, in-process.
        rates = {int(ms): float(r) for ms, r in old}
        rows[(transform, "old main, in-process")] = (rates[0], rates[max(rates)])
    for line in out.splitlines():
        m = re.match(r"^  (train|val)\s+(.+?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
        if m and "/" not in m.group(2):
            rows[(m.group(1), m.group(2))] = (float(m.group(3)), float(m.group(4)))
    return rows


def main():
    old = os.environ.get("STOKER_OLD_TREE")
    if not old:
        sys.exit("storage_old_new: set STOKER_OLD_TREE to the older checkout")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    got = {}
    paired = same_format(old)
    passes = ((old, ""), (ROOT, "")) if paired else ((old, "train"), (old, "val"), (ROOT, ""))
    for r in range(rounds):
        for tree, transform in passes:
            for (t, reader), rates in run(tree, transform).items():
                if tree == old and paired:
                    reader = f"old {reader}"
                got.setdefault((t, reader), []).append(rates)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    med = {k: (statistics.median(v[0] for v in vs), statistics.median(v[1] for v in vs))
           for k, vs in got.items()}
    print(f"every read from storage, img/s ({os.cpu_count()} cores, medians of {rounds})")
    print(f"  {'':6} {'reader':<28} {'0 ms':>9} {'20 ms':>9} {'20/0':>7} {'new/old 0':>10} "
          f"{'new/old 20':>10}")
    for (t, reader), (fast, slow) in sorted(med.items()):
        ratio = ""
        base = med.get((t, f"old {reader}")) or med.get((t, "old main, in-process"))
        if base and not reader.startswith("old"):
            ratio = f"{fast / base[0]:10.3f} {slow / base[1]:10.3f}"
        print(f"  {t:6} {reader:<28} {fast:9.1f} {slow:9.1f} {slow / fast:7.3f} {ratio}")


if __name__ == "__main__":
    main()
