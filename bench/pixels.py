"""Epoch two from the pixel cache: the automatic cache against decoding each
epoch and against the PyTorch DataLoader, in one run on the same cores.

  ddpm      The diffusion recipe as docs/pipelines.md writes it: 2,000 PNGs
            of 48x48 in 4 class folders (smooth structure plus noise),
            resize(40, 40), flip, normalize, float32 CHW, batch 128. The
            Loader with no pixel option (automatic), with pixel_cache=None
            (decode every epoch), and torchvision's ImageFolder DataLoader
            (Resize, RandomHorizontalFlip, ToTensor, Normalize; 2 workers,
            persistent).
  jpeg      The train preset at 224 (batch 64) on the bench's photo-like
            JPEGs (bench/vs_torch.py's corpus, 640 files of 375-500 px):
            decode="full" (kept whole) and the default decode (per crop:
            kept per DCT scale), epoch 1 against later epochs, and both
            against the default decode with pixel_cache=None.
  photos    The same train path on real photographs: Debian's
            mate-backgrounds cut into 480 ImageNet-sized tiles (500x375 and
            375x500, JPEG quality 90, ".JPEG" as ImageNet names them) in 8
            class folders.
  no-fit    ddpm again on a daemon whose --pixel-cache-bytes is 64K: the
            automatic Loader against pixel_cache=None.

Rates are images/s: epoch 1, and later epochs (EPOCHS passes after the
first), medians over RUNS fresh daemons (and DataLoaders).

    RUNS=3 /usr/bin/python3 bench/pixels.py [ddpm] [no-fit] [jpeg] [photos]
"""

import os
import statistics
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))

import numpy as np  # noqa: E402

import stoker  # noqa: E402
from stokerd import BIN, Stokerd  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
EPOCHS = int(os.environ.get("EPOCHS", "3"))
DDPM = os.environ.get("STOKER_BENCH_DDPM", "/tmp/stoker-bench-ddpm")
CORPUS = os.environ.get("STOKER_BENCH_CORPUS", "/tmp/stoker-bench-corpus")
PHOTOS = os.environ.get("STOKER_BENCH_PHOTOS", "/tmp/stoker-bench-photos")


def ddpm_data():
    if os.path.exists(os.path.join(DDPM, ".complete")):
        return DDPM
    from PIL import Image
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:48, 0:48] / 48.0
    for c in range(4):
        os.makedirs(os.path.join(DDPM, f"class_{c}"), exist_ok=True)
        for i in range(500):
            f = rng.uniform(1, 6, 3)
            base = np.stack([np.sin(f[k] * x + rng.uniform(0, 6)) * np.cos(f[k] * y)
                             for k in range(3)], -1)
            img = np.clip(127 + 90 * base + rng.normal(0, 12, base.shape), 0, 255)
            Image.fromarray(img.astype(np.uint8)).save(
                os.path.join(DDPM, f"class_{c}", f"{i}.png"))
    open(os.path.join(DDPM, ".complete"), "w").close()
    return DDPM


def jpeg_data():
    if not os.path.exists(os.path.join(CORPUS, ".complete")):
        subprocess.run([os.path.join(BIN, "tests", "make_dataset"), "--out", CORPUS,
                        "--classes", "8", "--per_class", "80", "--min_side", "375",
                        "--max_side", "500", "--seed", "11"], check=True)
        open(os.path.join(CORPUS, ".complete"), "w").close()
    return CORPUS


def photo_data():
    """The photo tiles in 8 class folders; None without mate-backgrounds."""
    if os.path.exists(os.path.join(PHOTOS, ".complete")):
        return PHOTOS
    from layouts import photo_tiles
    tiles = photo_tiles(40)
    if not tiles:
        return None
    for i, tile in enumerate(tiles):
        folder = os.path.join(PHOTOS, f"class_{i % 8}")
        os.makedirs(folder, exist_ok=True)
        tile.save(os.path.join(folder, f"{i}.JPEG"), quality=90)
    open(os.path.join(PHOTOS, ".complete"), "w").close()
    return PHOTOS


def jpeg_rows(name, data):
    """The train path at 224 on `data`: pixel_cache=None, then kept."""
    none = medians(lambda sock: stoker.Loader(
        data, batch_size=64, transform="train", shuffle=True, image_size=224, socket=sock,
        pixel_cache=None))
    row(f"{name}: default decode, pixel_cache=None", none, none[0])
    for decode in ("full", "auto"):
        r = medians(lambda sock, d=decode: stoker.Loader(
            data, batch_size=64, transform="train", shuffle=True, image_size=224,
            socket=sock, decode=d))
        row(f"{name}: decode={decode}, later/epoch 1", r, r[0])
        print(f"  {name} decode={decode}, automatic over pixel_cache=None: epoch 1 "
              f"{r[0] / none[0]:.2f}x, later {r[1] / none[1]:.2f}x", flush=True)


def passes(make, first_batch=None):
    """(epoch 1, later epochs) images/s of the iterable `make()` gives.
    `first_batch`, a dict, gets epoch 1's "seconds" to its first batch (the
    opening included, as the Loader opens on its first iteration) and its
    "rate" after that batch (images/s)."""
    it = make()
    rates = []
    for e in range(1 + EPOCHS):
        if hasattr(it, "set_epoch"):
            it.set_epoch(e)
        t0, n, t1, n1 = time.perf_counter(), 0, None, 0
        for b in it:
            x = b[0] if isinstance(b, (list, tuple)) else b["image"]
            n += x.shape[0]
            if t1 is None:
                t1, n1 = time.perf_counter(), n
        t2 = time.perf_counter()
        rates.append(n / (t2 - t0))
        if e == 0 and first_batch is not None and t1 is not None:
            first_batch.update(seconds=t1 - t0, rate=(n - n1) / (t2 - t1) if t2 > t1 else 0.0)
    mode = None
    if isinstance(it, stoker.Loader):
        mode = it.stats()["pixel_cache"]["mode"]
        it.close()
    return rates[0], statistics.mean(rates[1:]), mode


def medians(make, flags=()):
    firsts, laters, modes = [], [], set()
    for _ in range(RUNS):
        if flags is None:
            r1, r2, mode = passes(lambda: make(None))
        else:
            with Stokerd(*flags) as d:
                r1, r2, mode = passes(lambda: make(d.sock))
        firsts.append(r1)
        laters.append(r2)
        modes.add(mode)
    return statistics.median(firsts), statistics.median(laters), "/".join(
        sorted(m for m in modes if m))


def ddpm_loader(data, **kw):
    return lambda sock: stoker.Loader(
        data, batch_size=128, socket=sock, shuffle=True,
        fields=[stoker.image(40, 40, dtype="float32", chw=True)],
        pipeline=[stoker.resize(width=40, height=40), stoker.flip(),
                  stoker.normalize([0.5], [0.5])], **kw)


def torch_loader(data):
    import torch
    import torchvision
    from torchvision import transforms as T
    tf = T.Compose([T.Resize((40, 40)), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    ds = torchvision.datasets.ImageFolder(data, transform=tf)
    return lambda _: torch.utils.data.DataLoader(ds, batch_size=128, shuffle=True,
                                                 num_workers=2, persistent_workers=True)


def row(name, r, base=None):
    ratio = f"{r[1] / base:8.2f}" if base else f"{'':8}"
    print(f"{name:52} {r[0]:10,.0f} {r[1]:10,.0f} {ratio}  {r[2]}", flush=True)


def main(parts):
    warnings.simplefilter("ignore")  # Starvation hints: this measures starving on purpose.
    print(f"images/s, medians of {RUNS} runs; later = mean of epochs 2-{1 + EPOCHS}; "
          f"{os.cpu_count()} cores")
    print(f"{'feed':52} {'epoch 1':>10} {'later':>10} {'x base':>8}  pixel mode")
    if "ddpm" in parts or "no-fit" in parts:
        ddpm = ddpm_data()
    if "ddpm" in parts:
        dl = medians(torch_loader(ddpm), flags=None)
        row("ddpm: torch DataLoader (2 workers) [base]", dl)
        row("ddpm: stoker, pixel_cache=None", medians(ddpm_loader(ddpm, pixel_cache=None)),
            dl[1])
        auto = medians(ddpm_loader(ddpm))
        row("ddpm: stoker, automatic (default)", auto, dl[1])
        print(f"  ddpm later epochs, automatic over DataLoader: {auto[1] / dl[1]:.1f}x")
    if "no-fit" in parts:
        small = ("--pixel-cache-bytes", "64K")
        none_small = medians(ddpm_loader(ddpm, pixel_cache=None), small)
        row("no-fit: stoker, pixel_cache=None [base]", none_small)
        row("no-fit: stoker, automatic", medians(ddpm_loader(ddpm), small), none_small[1])
    if "jpeg" in parts:
        jpeg_rows("jpeg train 224", jpeg_data())
    if "photos" in parts:
        photos = photo_data()
        if photos is None:
            print("photos: skipped: /usr/share/backgrounds/mate missing "
                  "(apt-get install mate-backgrounds)")
        else:
            jpeg_rows("photos train 224", photos)


if __name__ == "__main__":
    main(set(sys.argv[1:]) or {"ddpm", "no-fit", "jpeg", "photos"})
