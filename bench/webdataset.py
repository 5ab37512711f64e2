"""WebDataset shards against the same pictures as a folder, in one run on
the same cores: the bench's 640 photo-like JPEGs (bench/pixels.py's
corpus) as an ImageFolder, and as 10 tar shards of 64 samples (jpg + cls,
written by Python's tarfile, as webdataset's ShardWriter writes them). The
train preset at 224, batch 64, decoding every epoch (pixel_cache=None) and
automatic; epoch 1 and later epochs (EPOCHS after the first), images/s,
medians over RUNS fresh daemons.

    RUNS=3 /usr/bin/python3 bench/webdataset.py
"""

import io
import os
import sys
import tarfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))

import stoker  # noqa: E402
from pixels import EPOCHS, RUNS, jpeg_data, medians  # noqa: E402

SHARDS = os.environ.get("STOKER_BENCH_SHARDS", "/tmp/stoker-bench-shards")


def shard_data(folder, per_shard=64):
    """The folder's pictures, class by class, as shards; the pattern."""
    items = []
    for label, cls in enumerate(sorted(os.listdir(folder))):
        if os.path.isdir(os.path.join(folder, cls)):
            items += [(os.path.join(folder, cls, n), label)
                      for n in sorted(os.listdir(os.path.join(folder, cls)))]
    count = (len(items) + per_shard - 1) // per_shard
    pattern = os.path.join(SHARDS, f"train-{{000000..{count - 1:06d}}}.tar")
    if os.path.exists(os.path.join(SHARDS, ".complete")):
        return pattern
    os.makedirs(SHARDS, exist_ok=True)
    for s in range(count):
        with tarfile.open(os.path.join(SHARDS, f"train-{s:06d}.tar"), "w") as tar:
            for i, (path, label) in enumerate(items[s * per_shard:(s + 1) * per_shard]):
                key = f"{s * per_shard + i:08d}"
                tar.add(path, arcname=f"{key}.jpg")
                cls = f"{label}".encode()
                info = tarfile.TarInfo(f"{key}.cls")
                info.size = len(cls)
                tar.addfile(info, io.BytesIO(cls))
    open(os.path.join(SHARDS, ".complete"), "w").close()
    return pattern


def rates(data, **kw):
    """Median (epoch 1, later epochs) images/s of a Loader over `data`."""
    first, later, _ = medians(lambda sock: stoker.Loader(
        data, batch_size=64, transform="train", shuffle=True, image_size=224, socket=sock,
        **kw))
    return first, later


def main():
    warnings.simplefilter("ignore")
    folder = jpeg_data()
    shards = shard_data(folder)
    print(f"images/s, medians of {RUNS} runs; later = mean of epochs 2-{1 + EPOCHS}; "
          f"{os.cpu_count()} cores")
    print(f"{'feed':44} {'epoch 1':>9} {'later':>9} {'epoch 1 x folder':>17}")
    for cache, kw in (("pixel_cache=None", {"pixel_cache": None}), ("automatic", {})):
        base = rates(folder, **kw)
        print(f"{'folder, ' + cache:44} {base[0]:9,.0f} {base[1]:9,.0f} {1:17.2f}", flush=True)
        r = rates(shards, **kw)
        print(f"{'shards, ' + cache:44} {r[0]:9,.0f} {r[1]:9,.0f} {r[0] / base[0]:17.2f}",
              flush=True)


if __name__ == "__main__":
    main()
