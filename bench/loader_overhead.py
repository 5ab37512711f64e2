"""What the Python Loader costs over the C++ client on the same data.

Starts one stokerd, then alternates `stokerctl read` and a stoker.Loader
pass over the same spec (2 epochs each), several rounds, and prints the
median images/s of each and their ratio. (stokerctl also hashes every
pixel for its checksum; the Loader only hands out views.) Run with
`make bench`.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(ROOT, "client", "python")]
sys.path.append(os.path.join(ROOT, "tests", "python"))
import stoker  # noqa: E402
from conftest import Daemon, MAKE_DATASET, STOKERCTL  # noqa: E402

DATA = os.environ.get("STOKER_BENCH_DATA", "/tmp/stoker-demo-data")
ROUNDS = int(os.environ.get("ROUNDS", "5"))


def main():
    if not os.path.isdir(DATA):
        print(f"generating {DATA}", flush=True)
        subprocess.run([MAKE_DATASET, "--out", DATA, "--classes", "4",
                        "--per_class", "100"], check=True)
    # Decoded-output cache off: every val epoch decodes, as train does.
    d = Daemon(threads=int(os.environ.get("THREADS", "2")),
               extra=["--decoded-cache-bytes", "0"])
    try:
        for transform in ("val", "train"):
            cpp, py = [], []
            for _ in range(ROUNDS):
                out = subprocess.run(
                    [STOKERCTL, "--socket", d.socket, "read", "--dataset", DATA,
                     "--batch-size", "32", "--size", "224", "--epochs", "2",
                     "--transform", transform], check=True,
                    capture_output=True, text=True).stdout
                cpp.append(json.loads(out)["images_per_second"])
                ld = stoker.Loader(DATA, batch_size=32, transform=transform,
                                   shuffle=transform == "train",
                                   image_size=224, socket=d.socket,
                                   starvation_threshold=1.0)
                start, n = time.perf_counter(), 0
                for _ in range(2):
                    for images, labels in ld:
                        n += images.shape[0]
                py.append(n / (time.perf_counter() - start))
                ld.close()
            c, p = statistics.median(cpp), statistics.median(py)
            print(f"{transform:5s} stokerctl {c:8.1f} img/s  Loader {p:8.1f} img/s  "
                  f"Loader/stokerctl {p / c:.3f}  (medians of {ROUNDS}; "
                  f"runs {[round(x) for x in cpp]} / {[round(x) for x in py]})",
                  flush=True)
    finally:
        d.stop()


if __name__ == "__main__":
    main()
