"""Client decode (Loader client_decode=) against the daemon's own decode.

Corpus: Debian's mate-backgrounds photographs cut into 500x375 and 375x500
tiles (ImageNet-sized), each re-encoded as 4:4:4, 4:2:2, 4:2:0, gray,
progressive, CMYK JPEG and PNG: one class folder per layout.

Prints, for train and val at 224:
  * per layout, the client's pixels against the daemon's decode="full"
    (mean absolute difference, largest difference, PSNR), on the CPU and,
    where a GPU is present, on it (nvJPEG);
  * images/s of the same epochs with the daemon decoding everything, the
    client decoding everything it can, a fixed half split, and the
    automatic split (with the share it settled on): medians of RUNS runs.
On a machine without a GPU the client decodes on the CPU, where it competes
with the daemon for the same cores: those rates say nothing of a GPU's.
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))

import torch  # noqa: E402

import stoker  # noqa: E402
from layouts import DAEMON_ONLY, LAYOUTS, PHOTOS, photo_tiles, write_folder  # noqa: E402
from stokerd import Stokerd  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
BATCH = 64


def corpus(root):
    tiles = photo_tiles(4)
    write_folder(root, tiles)
    return len(tiles)


def epoch(loader):
    out = []
    for images, labels in loader:
        out.append((images.to("cpu", copy=True), labels.to("cpu", copy=True)))
    return out


def tolerance(root, sock, transform, device):
    kw = dict(batch_size=BATCH, image_size=224, socket=sock, seed=5, decode="full",
              transform=transform, shuffle=True)
    ref = epoch(stoker.Loader(root, **kw))
    got = epoch(stoker.Loader(root, client_decode=stoker.ClientDecode(device, 0), **kw))
    by_layout = {}
    for (a, la), (b, _) in zip(ref, got):
        for i, label in enumerate(la.tolist()):
            by_layout.setdefault(label, []).append((a[i].double() - b[i].double()).flatten())
    rows = []
    for label in sorted(by_layout):
        d = torch.cat(by_layout[label])
        mse = (d * d).mean().item()
        psnr = float("inf") if mse == 0 else 10 * torch.log10(torch.tensor(255.0 ** 2 / mse)).item()
        rows.append((LAYOUTS[label], d.abs().mean().item(), d.abs().max().item(), psnr))
    return rows


def rate(root, sock, **kw):
    loader = stoker.Loader(root, batch_size=BATCH, image_size=224, socket=sock, seed=5,
                           transform="train", shuffle=True, **kw)
    epoch(loader)  # Warm: L1 filled, the automatic split settled.
    runs = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        n = sum(len(labels) for _, labels in epoch(loader))
        runs.append(n / (time.perf_counter() - t0))
    share = loader.stats().get("client_decode", {}).get("cpu_share")
    loader.close()
    return statistics.median(runs), runs, share


def main():
    if not os.path.isdir(PHOTOS):
        print(f"client_decode: skipped: {PHOTOS} missing (apt-get install mate-backgrounds)")
        return
    root = tempfile.mkdtemp(prefix="stoker-bench-layouts-")
    try:
        tiles = corpus(root)
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        print(f"{tiles} tiles per layout from {PHOTOS}, train/val 224, batch {BATCH}; "
              f"client decode on {', '.join(devices)}"
              + ("" if torch.cuda.is_available() else " (no GPU here)"))
        with Stokerd() as d:
            print(f"{'device':6} {'transform':9} {'layout':12} {'mean |d|':>9} {'max':>5} {'PSNR dB':>8}")
            for device in devices:
                for transform in ("train", "val"):
                    for layout, mean, top, psnr in tolerance(root, d.sock, transform, device):
                        who = " (the daemon's)" if layout in DAEMON_ONLY else ""
                        print(f"{device:6} {transform:9} {layout:12} {mean:9.4f} {top:5.0f} "
                              f"{psnr:8.1f}{who}")
            print(f"\ntrain 224 images/s, medians of {RUNS} epochs of {tiles * len(LAYOUTS)} "
                  f"({os.cpu_count()} cores, daemon threads {os.cpu_count()})")
            base, runs, _ = rate(root, d.sock)
            print(f"  daemon decodes all            {base:8.1f}  {[round(r) for r in runs]}")
            for device in devices:
                for label, share in (("client decodes all it can", 0.0), ("fixed split 0.5", 0.5),
                                     ("automatic split", "auto")):
                    r, runs, got = rate(root, d.sock,
                                        client_decode=stoker.ClientDecode(device, share))
                    print(f"  {device:4} {label:25} {r:8.1f}  {[round(x) for x in runs]}  "
                          f"{r / base:.2f}x  share {got:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
