"""Feature stores in every element type, read at the same bytes per second.

The store as h5py users write it: 2 files x [50,000, 384] (smooth rows
plus noise, scaled to each integer type's range), gzip with shuffle in
h5py's own chunks, labels beside; and the same rows as one .npy with a
labels .npy. For each stored type (float32, float16, int16, int8, uint8):
  own      read into a field of the stored type (int8, which the ring has
           not, into int16)
  float32  read into a float32 field (what a trainer casts to)
rows/s and stored MB/s of epoch 1 (read and decompressed) and epochs 2-4
(from the daemon's cache), medians over RUNS fresh daemons, and each type's
stored bytes per second over float32's in the same run (for a float32
field the bytes delivered are float32's: its rows/s ratio is that column
times float32's element size over the stored one's).
STOKER_OLD_TREE=<checkout> runs that tree's build beside this one's.

    RUNS=3 /usr/bin/python3 bench/dtypes.py
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import stoker  # noqa: E402
from stokerd import Stokerd  # noqa: E402

DATA = os.environ.get("STOKER_BENCH_DTYPES", "/tmp/stoker-bench-dtypes")
RUNS = int(os.environ.get("RUNS", "3"))
FILES, ROWS, COLS, BATCH = 2, 50_000, 384, 8192
LATER = 3  # Passes timed after the first.
OLD = os.environ.get("STOKER_OLD_TREE")
TYPES = os.environ.get("TYPES", "float32,float16,int16,int8,uint8").split(",")
RING = {"int8": "int16"}  # Stored types the ring has not: the field's type.


def rows_of(rng, dtype):
    t = np.arange(COLS, dtype=np.float32)
    x = np.sin(t * 0.05 + rng.uniform(0, 6, (ROWS, 1))) + rng.standard_normal((ROWS, COLS)) * 0.1
    if np.dtype(dtype).kind == "f":
        return x.astype(dtype)
    info = np.iinfo(dtype)
    mid, half = (int(info.max) + int(info.min)) / 2, (int(info.max) - int(info.min)) / 2.5
    return np.clip(np.rint(mid + x * half), info.min, info.max).astype(dtype)


def write(dtype):
    folder = os.path.join(DATA, dtype)
    done = os.path.join(folder, ".complete")
    if os.path.exists(done):
        return folder
    os.makedirs(os.path.join(folder, "h5"), exist_ok=True)
    rng = np.random.default_rng(3)
    parts, labels = [], []
    for k in range(FILES):
        x, y = rows_of(rng, dtype), rng.integers(0, 100, ROWS)
        with h5py.File(os.path.join(folder, "h5", f"part{k}.H5"), "w") as f:
            f.create_dataset("x", data=x, compression="gzip", shuffle=True)
            f["y"] = y
        parts.append(x)
        labels.append(y)
    np.save(os.path.join(folder, "x.npy"), np.concatenate(parts))
    np.save(os.path.join(folder, "y.npy"), np.concatenate(labels))
    open(done, "w").close()
    return folder


def passes(source, field_dtype, tree):
    """(epoch 1 rows/s, later epochs' rows/s): medians over RUNS fresh
    daemons of the first pass and of the LATER passes after it."""
    first, later = [], []
    for _ in range(RUNS):
        with Stokerd(**({"tree": tree} if tree else {})) as d:
            ld = stoker.Loader(source, batch_size=BATCH, socket=d.sock, drop_last=False,
                               fields=[stoker.array((COLS,), "x", dtype=field_dtype),
                                       stoker.label()], pipeline=[], shuffle=True)
            for out, count in ((first, 1), (later, LATER)):
                t0, n = time.perf_counter(), 0
                for _ in range(count):
                    for b in ld:
                        n += b["x"].shape[0]
                out.append(n / (time.perf_counter() - t0))
            ld.close()
    return statistics.median(first), statistics.median(later)


def main():
    print(f"{FILES} x [{ROWS}, {COLS}] per type, batch {BATCH}, medians of {RUNS} "
          f"daemons' epoch 1 and epochs 2-{1 + LATER}, {os.cpu_count()} cores; MB/s of "
          "stored bytes")
    print(f"{'build':5} {'store':7} {'form':5} {'field':8} {'epoch 1 rows/s':>15} {'MB/s':>7} "
          f"{'x f32':>6} {'epoch 2+ rows/s':>15} {'MB/s':>7} {'x f32':>6}")
    base = {}
    for dtype in TYPES:
        folder = write(dtype)
        item = np.dtype(dtype).itemsize
        for form, source in (("hdf5", {"hdf5": {"path": os.path.join(folder, "h5"),
                                                "dataset": "x", "labels": "y"}}),
                             ("npy", {"npy": {"path": os.path.join(folder, "x.npy"),
                                              "labels": os.path.join(folder, "y.npy")}})):
            for into in ("own", "float32"):
                field = RING.get(dtype, dtype) if into == "own" else "float32"
                if into == "float32" and dtype == "float32":
                    continue
                for build, tree in (("new", None),) + ((("old", OLD),) if OLD else ()):
                    r1, r2 = passes(source, field, tree)
                    mb = [r * COLS * item / 1e6 for r in (r1, r2)]
                    if dtype == "float32":
                        base[(build, form)] = mb
                    ref = base.get((build, form), mb)
                    print(f"{build:5} {dtype:7} {form:5} {field:8} {r1:15,.0f} {mb[0]:7.0f} "
                          f"{mb[0] / ref[0]:6.2f} {r2:15,.0f} {mb[1]:7.0f} "
                          f"{mb[1] / ref[1]:6.2f}", flush=True)


if __name__ == "__main__":
    main()
