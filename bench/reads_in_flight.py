"""Peak RSS of a daemon reading a folder of large files (sparse, 1000 MiB
each: as large as --max-file-bytes lets a user name), against the bytes of
reads in flight it may hold (--max-read-bytes-in-flight). The first row lifts
the budget: what reads held before it existed (reader threads a user may
hold x file size). Samples fail to decode (zeros: no picture in them); what
is measured is what their reads hold.

usage: bench/reads_in_flight.py [--mib 1000] [--files 12]"""

import argparse
import os
import subprocess
import tempfile
import time
import shutil

from stokerd import BIN, Stokerd

CONFIGS = [
    ("8 reader threads, budget lifted (1T)", ["--reader-threads", "8",
                                              "--max-read-bytes-in-flight", "1T"]),
    ("8 reader threads, default budget (2G)", ["--reader-threads", "8"]),
    ("64 reader threads (default), default budget", []),
]


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1000)
    ap.add_argument("--files", type=int, default=12)
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="stoker-bench-big-")
    try:
        for i in range(args.files):
            cls = os.path.join(data, f"c{i % 2}")
            os.makedirs(cls, exist_ok=True)
            with open(os.path.join(cls, f"f{i:03d}.JPEG"), "wb") as f:
                f.truncate(args.mib << 20)
        print(f"| reads of {args.files} files of {args.mib} MiB | peak RSS MiB | seconds |")
        print("|---|---:|---:|")
        for label, flags in CONFIGS:
            with Stokerd("--l1-bytes", "0", *flags) as d:
                t = time.perf_counter()
                out = subprocess.run(
                    [os.path.join(BIN, "client", "cpp", "stokerctl"), "--socket", d.sock,
                     "read", "--dataset", data, "--batch-size", "4", "--size", "32",
                     "--on-error", "zeros", "--allow-errors", "--epochs", "1"],
                    capture_output=True, text=True)
                secs = time.perf_counter() - t
                if out.returncode != 0:
                    raise RuntimeError(out.stderr[-2000:])
                print(f"| {label} | {peak_rss_mib(d.proc.pid):.0f} | {secs:.1f} |", flush=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
