"""What decoding large pictures holds: a daemon with 8 decode threads reads
a folder of large photographs (Debian's mate nature backgrounds scaled to
4800x3200, 46 MB of pixels each: a camera's or a scan's size), as JPEG
and as PNG, train preset at 224, one epoch without the pixel cache (every
picture decoded); its peak RSS (VmHWM) and its
RSS once the session has closed; by default, and with the bytes read and
decoded in flight cut to 256M each (128M a user). With STOKER_OLD_TREE, the same with an older
build's daemon and stokerctl, in the same run.

usage: [STOKER_OLD_TREE=/path/to/old/checkout] bench/large_pictures.py [--files 24]"""

import argparse
import glob
import os
import shutil
import subprocess
import tempfile
import time

from PIL import Image

from stokerd import ROOT, Stokerd

PHOTOS = "/usr/share/backgrounds/mate/nature"


def status_mib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")


def make_folder(root, ext, files):
    photos = sorted(glob.glob(os.path.join(PHOTOS, "*.jpg")))
    if not photos:
        raise SystemExit(f"large_pictures: no photographs in {PHOTOS} (mate-backgrounds)")
    for i in range(files):
        cls = os.path.join(root, f"c{i % 2}")
        os.makedirs(cls, exist_ok=True)
        im = Image.open(photos[i % len(photos)]).convert("RGB").resize((4800, 3200))
        path = os.path.join(cls, f"p{i:03d}.{ext}")
        if ext == "JPEG":
            im.save(path, quality=90)
        else:
            im.save(path, compress_level=1)


def run(tree, data, flags):
    with Stokerd("--threads", "8", "--reader-threads", "8", "--l1-bytes", "0", *flags,
                 tree=tree) as d:
        t = time.perf_counter()
        out = subprocess.run(
            [os.path.join(tree, "bazel-bin", "client", "cpp", "stokerctl"), "--socket", d.sock,
             "read", "--dataset", data, "--batch-size", "8", "--size", "224",
             "--epochs", "1", "--no-pixel-cache"], capture_output=True, text=True)
        secs = time.perf_counter() - t
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-2000:])
        deadline = time.monotonic() + 30
        while d.stats().get("sessions") and time.monotonic() < deadline:
            time.sleep(0.05)  # The session closes after the client's last batch.
        return (status_mib(d.proc.pid, "VmHWM:"), status_mib(d.proc.pid, "VmRSS:"), secs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=24)
    args = ap.parse_args()
    trees = [("this tree", ROOT, []),
             ("this tree, 256M in flight", ROOT,
              ["--max-read-bytes-in-flight", "256M", "--max-file-bytes", "128M",
               "--max-decode-bytes-in-flight", "256M", "--max-decode-bytes", "128M"])]
    if os.environ.get("STOKER_OLD_TREE"):
        trees.append(("old", os.environ["STOKER_OLD_TREE"], []))
    print(f"| {args.files} pictures of 4800x3200 | daemon | peak RSS MiB | RSS after MiB "
          "| seconds |")
    print("|---|---|---:|---:|---:|")
    for ext in ("JPEG", "png"):
        data = tempfile.mkdtemp(prefix="stoker-bench-large-")
        try:
            make_folder(data, ext, args.files)
            for name, tree, flags in trees:
                peak, after, secs = run(tree, data, flags)
                print(f"| {ext} | {name} | {peak:.0f} | {after:.0f} | {secs:.1f} |", flush=True)
        finally:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
