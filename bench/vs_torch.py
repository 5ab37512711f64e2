"""Stoker against the PyTorch DataLoader, in one run on the same files/cores.

For train and val at 224 (batch 64) it measures:
  (a) torch DataLoader + torchvision (PIL decode, RandomResizedCrop/flip or
      Resize+CenterCrop, ToTensor, Normalize), persistent workers, at the
      best num_workers of 1..4;
  (b) Stoker through `stokerctl read` and through stoker.Loader (stokerd
      with one decode thread per core, decoded-output cache off so every
      epoch decodes; for val also with it on, the default);
  (c) the naive ceiling: cores x single-thread full tjDecompress2 + resize
      (bench/decode_bench);
  (d) for train, Stoker again from the pixel cache (pictures kept at
      max_side 256 and 512, filled by the warm-up run: every measured epoch
      only crops and resizes), with its rate against the decoding path and
      the PSNR of val batches from such pictures against decode=full.
and prints images/s, CPU time per image (all processes, interpreter
start-up excluded), peak total RSS of all processes involved, and the
ratios. Each Stoker figure is the second of two identical runs (the first
warms L1). Run with `make bench`.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

from stokerd import Stokerd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.join(ROOT, "bazel-bin")
DATA = os.environ.get("STOKER_BENCH_CORPUS", "/tmp/stoker-bench-corpus")
CORES = os.cpu_count() or 1
EPOCHS = int(os.environ.get("EPOCHS", "2"))
BATCH = 64
CLK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def corpus():
    if os.path.exists(os.path.join(DATA, ".complete")):
        return
    print(f"generating corpus in {DATA}", flush=True)
    subprocess.run([os.path.join(BIN, "tests", "make_dataset"), "--out", DATA,
                    "--classes", "8", "--per_class", "80", "--min_side", "375",
                    "--max_side", "500", "--seed", "11"], check=True)
    open(os.path.join(DATA, ".complete"), "w").close()


def tree(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime
    except OSError:
        return 0.0


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except OSError:
        return 0


class PeakRss:
    """Samples the total RSS of process trees while they run."""

    def __init__(self, roots):
        self.roots, self.peak = roots, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            pids = [p for r in self.roots for p in tree(r)]
            self.peak = max(self.peak, sum(rss_bytes(p) for p in pids))
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.peak


def run_client(args, servers=()):
    """Runs a client process to completion. Returns its last line of JSON,
    the peak total RSS of it, its children and `servers`, and the CPU
    seconds they all used (the client's from wait4, which includes its
    joined children; the servers' from /proc)."""
    r, w = os.pipe()
    pid = os.posix_spawn(args[0], args, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, w, 1),
                                       (os.POSIX_SPAWN_CLOSE, r)])
    os.close(w)
    rss = PeakRss([pid, *servers])
    before = {s: cpu_seconds(s) for s in servers}
    with os.fdopen(r) as f:
        out = f.read()
    _, status, usage = os.wait4(pid, 0)
    peak = rss.finish()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{args[:3]} failed")
    result = json.loads(out.strip().splitlines()[-1])
    # Interpreter start-up and imports are not per-image work.
    cpu = usage.ru_utime + usage.ru_stime - result.get("setup_cpu", 0.0)
    cpu += sum(cpu_seconds(s) - before[s] for s in servers)
    return result, peak, cpu


# Both workers end with the same timed loop over `dl`; the CPU they spent
# before it (interpreter start-up, imports) is reported to be subtracted.
TIMED_LOOP = r"""
setup = time.process_time()
start, n = time.perf_counter(), 0
for _ in range(epochs):
    for x, y in dl:
        n += x.shape[0]
print(json.dumps({"images": n, "seconds": time.perf_counter() - start,
                  "setup_cpu": setup}))
"""

TORCH_WORKER = r"""
import json, sys, time, warnings, torch, torchvision
warnings.filterwarnings("ignore", category=UserWarning)  # "> suggested workers"
from torchvision import transforms as T
data, transform, workers, epochs, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
tf = (T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm])
      if transform == "train" else
      T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), norm]))
ds = torchvision.datasets.ImageFolder(data, tf)
dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=transform == "train",
                                 num_workers=workers, persistent_workers=True,
                                 prefetch_factor=2)
torch.set_num_threads(1)
""" + TIMED_LOOP

LOADER_WORKER = r"""
import json, sys, time
sys.path[:0] = sys.argv[5].split(":")
import stoker
data, transform, sock, epochs, side = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[6])
dl = stoker.Loader(data, batch_size=64, transform=transform, image_size=224,
                   shuffle=transform == "train", socket=sock, starvation_threshold=1.0,
                   **({"pixel_cache": stoker.PixelCache(side)} if side else {}))
""" + TIMED_LOOP


def torch_best(transform):
    best = None
    for workers in range(1, 5):
        out, peak, cpu = run_client(
            ["/usr/bin/python3", "-c", TORCH_WORKER, DATA, transform,
             str(workers), str(EPOCHS), str(BATCH)])
        rate = out["images"] / out["seconds"]
        print(f"  torch {transform} num_workers={workers}: {rate:.1f} img/s",
              flush=True)
        row = (rate, cpu / out["images"], peak, workers)
        if best is None or rate > best[0]:
            best = row
    return best


def stoker_rows(transform, decoded_cache=False, max_side=0):
    daemon = Stokerd("--decoded-cache-bytes", str(1 << 30 if decoded_cache else 0))
    sock = daemon.sock
    rows = {}
    try:
        ctl = [os.path.join(BIN, "client", "cpp", "stokerctl"), "--socket",
               sock, "read", "--dataset", DATA, "--transform", transform,
               "--size", "224", "--batch-size", str(BATCH), "--epochs",
               str(EPOCHS), *(["--max-side", str(max_side)] if max_side else [])]
        run_client(ctl, [daemon.proc.pid])  # Warm the page cache and L1.
        out, peak, cpu = run_client(ctl, [daemon.proc.pid])
        rows["stokerctl"] = (out["images_per_second"], cpu / out["samples"], peak)
        path = os.path.join(ROOT, "client", "python")
        out, peak, cpu = run_client(
            ["/usr/bin/python3", "-c", LOADER_WORKER, DATA, transform, sock,
             str(EPOCHS), path, str(max_side)], [daemon.proc.pid])
        rows["stoker.Loader"] = (out["images"] / out["seconds"],
                                 cpu / out["images"], peak)
    finally:
        daemon.close()
    return rows


PIXEL_SIDES = (256, 512)


def pixel_psnr(side):
    """PSNR of val batches (resize + center crop, a fixed geometry) from
    pictures kept at `side` against decoding every pixel."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "client", "python"))
    import stoker
    with Stokerd() as daemon:
        kw = dict(batch_size=BATCH, transform="val", image_size=224, shuffle=False,
                  decode="full", socket=daemon.sock, starvation_threshold=1.0)
        full = np.concatenate([x.numpy().copy() for x, _ in stoker.Loader(DATA, **kw)])
        kept = np.concatenate([x.numpy().copy() for x, _ in stoker.Loader(
            DATA, pixel_cache=stoker.PixelCache(side), **kw)])
    mse = float(np.mean((full.astype(np.float64) - kept) ** 2))
    return 10 * np.log10(255 ** 2 / mse) if mse else float("inf")  # Nothing scaled.


def ceiling(transform):
    out = subprocess.run([os.path.join(BIN, "bench", "decode_bench"), "--data",
                          DATA, "--transform", transform, "--threads",
                          str(CORES)], check=True, capture_output=True,
                         text=True).stdout
    ms = float(re.search(r"naive \(.*?\): ([0-9.]+) ms", out).group(1))
    return CORES * 1e3 / ms, ms / 1e3, out


def main():
    corpus()
    # Page cache warm for everyone.
    subprocess.run(["cat"] + [os.path.join(dp, f) for dp, _, fs in os.walk(DATA)
                              for f in fs], stdout=subprocess.DEVNULL)
    table = []
    for transform in ("train", "val"):
        t_rate, t_cpu, t_rss, t_workers = torch_best(transform)
        c_rate, c_cpu, c_text = ceiling(transform)
        print(c_text, flush=True)
        table.append((transform, f"torch DataLoader (num_workers={t_workers})",
                      t_rate, t_cpu, t_rss))
        for name, (rate, cpu, rss) in stoker_rows(transform).items():
            table.append((transform, name, rate, cpu, rss))
        if transform == "val":  # Deterministic: later epochs from the cache.
            for name, (rate, cpu, rss) in stoker_rows(transform, True).items():
                table.append((transform, name + " + decoded cache", rate, cpu, rss))
        else:  # Every epoch from the pixel cache (filled by the warm-up run).
            for side in PIXEL_SIDES:
                for name, (rate, cpu, rss) in stoker_rows(transform, max_side=side).items():
                    table.append((transform, f"{name} + pixel cache {side}", rate, cpu, rss))
        table.append((transform, f"naive ceiling ({CORES} x 1 thread)", c_rate,
                      c_cpu, 0))
        table.append(("ratio", transform, t_rate, c_rate, None))
    psnr = {side: pixel_psnr(side) for side in PIXEL_SIDES}
    print(f"\n{CORES} cores, {EPOCHS} epochs of {DATA} per run, batch {BATCH}, 224x224")
    print(f"{'transform':9s} {'pipeline':36s} {'img/s':>8s} {'CPU ms/img':>10s} "
          f"{'peak RSS MB':>11s} {'x torch':>8s} {'x ceiling':>9s}")
    for row in table:
        if row[0] == "ratio":
            continue
        transform, name, rate, cpu, rss = row
        ratios = next(r for r in table if r[0] == "ratio" and r[1] == transform)
        print(f"{transform:9s} {name:36s} {rate:8.1f} {cpu * 1e3:10.2f} "
              f"{rss / 2**20 if rss else float('nan'):11.0f} "
              f"{rate / ratios[2]:8.2f} {rate / ratios[3]:9.2f}")
    rate = {name: r for t, name, r, *_ in table if t == "train"}
    for side in PIXEL_SIDES:
        print(f"pixel cache {side}: " + ", ".join(
            f"{name} {rate[f'{name} + pixel cache {side}'] / rate[name]:.2f}x"
            for name in ("stokerctl", "stoker.Loader")) +
            f" the decoding path's train rate; val PSNR against decode=full "
            + (f"{psnr[side]:.1f} dB" if psnr[side] != float("inf")
               else "inf (identical: no picture is larger)"))


if __name__ == "__main__":
    main()
