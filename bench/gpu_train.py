"""Training throughput on one GPU, fed five ways, in one run.

ResNet-18 and ResNet-50 (torchvision), bf16 autocast, channels_last, SGD,
batch 256 at 224 (RandomResizedCrop + flip), on the bench corpus
($STOKER_BENCH_CORPUS, default the photo-like JPEGs vs_torch.py makes):
  synthetic      the model alone on one batch kept on the GPU (the ceiling)
  DataLoader W   torchvision ImageFolder, PIL decode, W workers (each of
                 $DL_WORKERS, default cores/2, cores - 1 and cores), pinned
                 memory, samples drawn with replacement in epochs of 64
                 batches a worker: every worker works (the corpus alone
                 is a few batches an epoch)
  stoker CPU     stoker.Loader(device="cuda"): the daemon decodes
  stoker slabs   the same with slabs=True: batches in GPU memory the daemon
                 shares (SessionSpec.slabs), no copy in the trainer
  stoker GPU     stoker.Loader(client_decode=ClientDecode("cuda", cpu_share=0)): the
                 daemon hands JPEGs over, nvJPEG decodes on the GPU
  stoker hybrid  client_decode=ClientDecode("cuda") (cpu_share "auto")
  stoker split S client_decode=ClientDecode("cuda", cpu_share=S), for each S
                 in $SHARES (comma-separated; none by default)
For each: images/s over SECONDS after WARM steps, the ratio to synthetic,
and the GPU's utilisation sampled every 100 ms from NVML (nvidia-smi).

Where there is no GPU it says so and exits 0. `--smoke` runs every mode on
the CPU with a tiny model and a few steps, to check the script itself.
"""

import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))

import torch  # noqa: E402
import torchvision  # noqa: E402

import stoker  # noqa: E402
from stokerd import Stokerd  # noqa: E402
from vs_torch import DATA, corpus  # noqa: E402

SMOKE = "--smoke" in sys.argv
BATCH = 16 if SMOKE else int(os.environ.get("BATCH", "256"))
SIZE = 64 if SMOKE else 224
WARM = 2 if SMOKE else int(os.environ.get("WARM", "20"))
SECONDS = 2.0 if SMOKE else float(os.environ.get("SECONDS", "30"))
MODELS = ["resnet18"] if SMOKE else os.environ.get("MODELS", "resnet18,resnet50").split(",")
SHARES = [float(s) for s in os.environ.get("SHARES", "").split(",") if s]
CORES = os.cpu_count() or 2
DL_WORKERS = [1] if SMOKE else sorted({int(w) for w in os.environ.get(
    "DL_WORKERS", f"{max(1, CORES // 2)},{max(1, CORES - 1)},{CORES}").split(",") if w})
# Batches each DataLoader worker makes an epoch.
DL_BATCHES_PER_WORKER = 2 if SMOKE else 64


class Utilisation:
    """Mean GPU utilisation (%) from nvidia-smi while it runs; None without."""

    def __init__(self, index):
        self.samples, self.proc = [], None
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                 "-i", str(index), "-lms", "100"], stdout=subprocess.PIPE, text=True,
                stderr=subprocess.DEVNULL)
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.strip().isdigit():
                self.samples.append(int(line))

    def stop(self):
        if self.proc is None:
            return None
        self.proc.terminate()
        return statistics.mean(self.samples) if self.samples else None


def train(model_name, batches, device):
    """(images/s, utilisation) of training on `batches` (an iterator of
    uint8 NHWC images and int64 labels) for SECONDS after WARM steps."""
    model = getattr(torchvision.models, model_name)(num_classes=1000).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor([123.7, 116.3, 103.5], device=device).view(1, 3, 1, 1)
    std = torch.tensor([58.4, 57.1, 57.4], device=device).view(1, 3, 1, 1)
    cuda = device.type == "cuda"

    def step(images, labels):
        x = images.to(device, non_blocking=True).permute(0, 3, 1, 2).float()
        x = ((x - mean) / std).contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), labels.to(device, non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    it = iter(batches)
    for _ in range(WARM):
        step(*next(it))
    if cuda:
        torch.cuda.synchronize(device)
    util = Utilisation(device.index or 0) if cuda else None
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < SECONDS:
        images, labels = next(it)
        step(images, labels)
        n += images.shape[0]
    if cuda:
        torch.cuda.synchronize(device)
    rate = n / (time.perf_counter() - t0)
    return rate, util.stop() if util else None


def forever(make):
    while True:
        yield from make()


def synthetic(device):
    images = torch.randint(0, 256, (BATCH, SIZE, SIZE, 3), dtype=torch.uint8, device=device)
    labels = torch.randint(0, 1000, (BATCH,), device=device)
    while True:
        yield images, labels


def hwc(x):
    return x.permute(1, 2, 0)


def dataloader(device, workers):
    """DataLoader's best practice: persistent workers, pinned memory, and
    epochs long enough that each of them works (drawn with replacement)."""
    t = torchvision.transforms
    ds = torchvision.datasets.ImageFolder(DATA, t.Compose([
        t.RandomResizedCrop(SIZE), t.RandomHorizontalFlip(), t.PILToTensor(), hwc]))
    sampler = torch.utils.data.RandomSampler(
        ds, replacement=True, num_samples=BATCH * workers * DL_BATCHES_PER_WORKER)
    dl = torch.utils.data.DataLoader(ds, BATCH, sampler=sampler, num_workers=workers,
                                     pin_memory=device.type == "cuda", drop_last=True,
                                     persistent_workers=True, prefetch_factor=4)
    return forever(lambda: iter(dl))


def stoker_loader(sock, device, **kw):
    loader = stoker.Loader(DATA, BATCH, transform="train", shuffle=True, image_size=SIZE,
                           socket=sock, drop_last=True,
                           device=device if device.type == "cuda" else None, **kw)
    return forever(lambda: iter(loader)), loader


def main():
    if not SMOKE and not torch.cuda.is_available():
        print("gpu_train: skipped: no CUDA GPU here (torch.cuda.is_available() is False); "
              "run it on a GPU node, or with --smoke to check the script on the CPU")
        return
    device = torch.device("cpu" if SMOKE else "cuda")
    decode_device = "cpu" if SMOKE else "cuda"
    corpus()
    name = "CPU (smoke run)" if SMOKE else torch.cuda.get_device_name(device)
    print(f"{name}, {os.cpu_count()} cores, batch {BATCH} at {SIZE}, bf16, "
          f"{SECONDS:g} s per run after {WARM} steps, corpus {DATA}", flush=True)
    print(f"{'model':9} {'feed':15} {'img/s':>8} {'x synth':>8} {'GPU %':>6}  notes")
    with Stokerd() as d:
        for model_name in MODELS:
            ceiling = None
            feeds = [("synthetic", lambda: (synthetic(device), None))]
            feeds += [(f"DataLoader {w}", lambda w=w: (dataloader(device, w), None))
                      for w in DL_WORKERS]
            feeds += [("stoker CPU", lambda: stoker_loader(d.sock, device))]
            if not SMOKE:  # Batches in GPU slabs: no copy in the trainer.
                feeds += [("stoker slabs", lambda: stoker_loader(d.sock, device, slabs=True))]
            feeds += [
                      ("stoker GPU", lambda: stoker_loader(
                          d.sock, device,
                          client_decode=stoker.ClientDecode(decode_device, cpu_share=0))),
                      ("stoker hybrid", lambda: stoker_loader(
                          d.sock, device, client_decode=stoker.ClientDecode(decode_device)))]
            feeds += [(f"stoker split {s:g}", lambda s=s: stoker_loader(
                d.sock, device, client_decode=stoker.ClientDecode(decode_device, cpu_share=s)))
                for s in SHARES]
            for feed, make in feeds:
                batches, loader = make()
                rate, util = train(model_name, batches, device)
                ceiling = ceiling or rate
                notes = ""
                if loader is not None and "client_decode" in loader.stats():
                    cd = loader.stats()["client_decode"]
                    per = 1e6 / max(1, cd["samples_client_decoded"])
                    notes = (f"share {cd['cpu_share']:.2f} (client weight "
                             f"{cd['client_weight']:.3f}), client {cd['client_rate']:.0f}/s, "
                             f"daemon {cd['daemon_rate']:.0f}/s; client decode "
                             f"{cd['decode_seconds'] * per:.0f} + render "
                             f"{cd['render_seconds'] * per:.0f} us/img; waited for daemon "
                             f"{cd['wait_daemon_seconds']:.1f} s, client "
                             f"{cd['wait_client_seconds']:.1f} s")
                if loader is not None:
                    loader.close()
                print(f"{model_name:9} {feed:15} {rate:8.1f} {rate / ceiling:8.2f} "
                      f"{'-' if util is None else f'{util:.0f}':>6}  {notes}", flush=True)


if __name__ == "__main__":
    main()
