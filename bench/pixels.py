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
            decode="full" (kept) and the default decode (per crop: not
            kept), epoch 1 against later epochs.
  no-fit    ddpm again on a daemon whose --pixel-cache-bytes is 64K: the
            automatic Loader against pixel_cache=None.

Rates are images/s: epoch 1, and later epochs (EPOCHS passes after the
first), medians over RUNS fresh daemons (and DataLoaders).

    RUNS=3 /usr/bin/python3 bench/pixels.py
"""

import os
import statistics
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))

import numpy as np  # noqa: E402

import stoker  # noqa: E402
from stokerd import BIN, Stokerd  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
EPOCHS = int(os.environ.get("EPOCHS", "3"))
DDPM = os.environ.get("STOKER_BENCH_DDPM", "/tmp/stoker-bench-ddpm")
CORPUS = os.environ.get("STOKER_BENCH_CORPUS", "/tmp/stoker-bench-corpus")


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


def passes(make):
    """(epoch 1, later epochs) images/s of the iterable `make()` gives."""
    it = make()
    rates = []
    for e in range(1 + EPOCHS):
        if hasattr(it, "set_epoch"):
            it.set_epoch(e)
        t0, n = time.perf_counter(), 0
        for b in it:
            x = b[0] if isinstance(b, (list, tuple)) else b["image"]
            n += x.shape[0]
        rates.append(n / (time.perf_counter() - t0))
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
        data, batch_size=128, socket=sock,
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
    print(f"{name:44} {r[0]:10,.0f} {r[1]:10,.0f} {ratio}  {r[2]}", flush=True)


def main():
    warnings.simplefilter("ignore")  # Starvation hints: this measures starving on purpose.
    print(f"images/s, medians of {RUNS} runs; later = mean of epochs 2-{1 + EPOCHS}; "
          f"{os.cpu_count()} cores")
    print(f"{'feed':44} {'epoch 1':>10} {'later':>10} {'x base':>8}  pixel mode")
    ddpm = ddpm_data()
    dl = medians(torch_loader(ddpm), flags=None)
    row("ddpm: torch DataLoader (2 workers) [base]", dl)
    row("ddpm: stoker, pixel_cache=None", medians(ddpm_loader(ddpm, pixel_cache=None)), dl[1])
    auto = medians(ddpm_loader(ddpm))
    row("ddpm: stoker, automatic (default)", auto, dl[1])
    print(f"  ddpm later epochs, automatic over DataLoader: {auto[1] / dl[1]:.1f}x")
    small = ("--pixel-cache-bytes", "64K")
    none_small = medians(ddpm_loader(ddpm, pixel_cache=None), small)
    row("no-fit: stoker, pixel_cache=None [base]", none_small)
    row("no-fit: stoker, automatic", medians(ddpm_loader(ddpm), small), none_small[1])
    jpeg = jpeg_data()
    for decode in ("full", "auto"):
        r = medians(lambda sock, d=decode: stoker.Loader(
            jpeg, batch_size=64, image_size=224, socket=sock, decode=d))
        row(f"jpeg train 224, decode={decode}: later/epoch 1", r, r[0])


if __name__ == "__main__":
    main()
