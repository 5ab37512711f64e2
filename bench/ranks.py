"""One node, many trainers: N processes against one stokerd, against N
PyTorch DataLoaders, on the same photographs and cores.

Every configuration starts its N client processes, waits until each has
built its loader, then releases them together (a barrier: one start time
sent to all) for SECONDS (default 20). A process counts the images of each
batch with the time it arrived; the first WARM seconds (default 4) are
left out, and the window ends when the first process stops, so rates are
taken only while all run. Reported per configuration:

  img/s     aggregate images per second of the N processes in the window;
  spread    the fastest process's rate over the slowest's;
  PSS MiB   peak total proportional set size (/proc/*/smaps_rollup) of
            every process involved: clients, DataLoader workers, stokerd;
  loader    the same less N idle trainers (processes that imported torch
            and torchvision, measured alongside in the same run): what the
            data loading itself costs;
  reads     source files read (stokerd: its reader's count; DataLoader:
            files its workers opened) over the dataset's file count.

Workload: train at 224 (RandomResizedCrop + flip, uint8), batch 64, on the
corpus of bench/vs_torch.py (make_dataset over real photographs). Modes:
`ranks` (one job: rank r of N, each a shard) and `jobs` (N separate jobs
on the same dataset, other seeds: a hyperparameter sweep). The DataLoaders
run W (default 2) workers each, persistent. One stokerd per
configuration, one decode thread per core, decoded-output cache off.

Then NUMA on against off on this machine's real node(s) (single session,
RUNS (default 5) alternating runs, medians), and, where there are 2+ CPUs,
4 ranks on two hand-made nodes (--numa-topology), each rank's CPUs set to
its node's as a launcher would.

Run with `make bench` or: /usr/bin/python3 bench/ranks.py [N].
"""

import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stokerd import Stokerd  # noqa: E402
from vs_torch import CORES, DATA, ROOT, corpus, tree  # noqa: E402

SECONDS = float(os.environ.get("SECONDS_PER_RUN", "20"))
WARM = float(os.environ.get("WARM", "4"))
RUNS = int(os.environ.get("RUNS", "5"))
WORKERS = int(os.environ.get("WORKERS", "2"))
BATCH = 64

# A rank: builds its loader, says "ready", waits for the start time on
# stdin, then iterates epochs until the deadline, and prints the arrival
# time and size of every batch as JSON.
RANK = r"""
import json, os, sys, time
# where: the daemon's socket (stoker), or the worker count (torch).
kind, data, where, rank, world, mode, seconds, path, cpus = sys.argv[1:10]
rank, world, seconds = int(rank), int(world), float(seconds)
if cpus:
    os.sched_setaffinity(0, [int(c) for c in cpus.split(",")])
sys.path[:0] = path.split(":")
shard = mode == "ranks"
seed = 0 if shard else rank
if kind == "stoker":
    import stoker
    dl = stoker.Loader(data, batch_size=64, transform="train", image_size=224,
                       shuffle=True, seed=seed, rank=rank if shard else 0,
                       world_size=world if shard else 1, socket=where,
                       starvation_threshold=1.0)
    files = None
else:
    import io, multiprocessing, warnings, torch, torchvision
    from PIL import Image
    from torchvision import transforms as T
    warnings.filterwarnings("ignore", category=UserWarning)
    torch.set_num_threads(1)
    files = multiprocessing.Value("q", 0)  # Inherited by the forked workers.
    def load(p):
        with files.get_lock():
            files.value += 1
        with open(p, "rb") as f:
            return Image.open(io.BytesIO(f.read())).convert("RGB")
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                    T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(data, tf, loader=load)
    g = torch.Generator()
    g.manual_seed(seed)
    sampler = (torch.utils.data.DistributedSampler(ds, world, rank, seed=seed)
               if shard else torch.utils.data.RandomSampler(ds, generator=g))
    dl = torch.utils.data.DataLoader(ds, batch_size=64, sampler=sampler,
                                     num_workers=int(where), persistent_workers=True,
                                     prefetch_factor=2)
    iter(dl)  # Start the workers before the barrier.
print("ready", flush=True)
start = float(sys.stdin.readline())
time.sleep(max(0.0, start - time.time()))
deadline, arrivals, epoch = start + seconds, [], 0
while time.time() < deadline:
    if hasattr(dl, "set_epoch"):
        dl.set_epoch(epoch)
    elif hasattr(dl.sampler, "set_epoch"):
        dl.sampler.set_epoch(epoch)
    for x, _ in dl:
        arrivals.append((time.time(), x.shape[0]))
        if time.time() >= deadline:
            break
    epoch += 1
print(json.dumps({"arrivals": arrivals, "files": files.value if files else None}),
      flush=True)
"""


def pss_bytes(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


IDLE = "import time, torch, torchvision; print('ready', flush=True); time.sleep(3600)"


def idle_trainer_pss(n):
    """Total PSS of N processes that imported torch and do nothing."""
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", IDLE], stdout=subprocess.PIPE,
                              text=True) for _ in range(n)]
    for p in procs:
        p.stdout.readline()
    time.sleep(1)
    total = sum(pss_bytes(p.pid) for p in procs)
    for p in procs:
        p.kill()
        p.wait()
    return total


def run(kind, n, mode, daemon=None, cpus=None):
    """N processes behind a barrier; returns (img/s, spread, PSS, reads)."""
    path = os.path.join(ROOT, "client", "python")
    where = daemon.sock if daemon else str(WORKERS)
    procs = [subprocess.Popen(
        ["/usr/bin/python3", "-c", RANK, kind, DATA, where, str(r), str(n), mode,
         str(SECONDS), path, ",".join(map(str, cpus[r])) if cpus else ""],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for r in range(n)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{kind} rank failed to start")
    before = daemon.stats()["reader"] if daemon else {}
    start = time.time() + 0.5
    for p in procs:
        p.stdin.write(f"{start}\n")
        p.stdin.flush()
    roots = [p.pid for p in procs] + ([daemon.proc.pid] if daemon else [])
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.5):
            peak[0] = max(peak[0], sum(pss_bytes(q) for r in roots for q in tree(r)))
    sampler = threading.Thread(target=sample)
    sampler.start()
    results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    stop.set()
    sampler.join()
    if any(p.returncode for p in procs):
        raise RuntimeError(f"{kind} rank failed")
    lo = start + WARM
    hi = min(r["arrivals"][-1][0] for r in results)
    rates = [sum(k for t, k in r["arrivals"] if lo <= t <= hi) / (hi - lo) for r in results]
    if daemon:
        reads = int(daemon.stats()["reader"].get("source_reads", 0)) - int(
            before.get("source_reads", 0))
    else:
        reads = sum(r["files"] for r in results)
    return sum(rates), max(rates) / max(min(rates), 1e-9), peak[0], reads


def stoker_run(n, mode, *flags, cpus=None):
    with Stokerd("--decoded-cache-bytes", "0", *flags) as daemon:
        return run("stoker", n, mode, daemon, cpus)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    corpus()
    files = sum(len(fs) for _, _, fs in os.walk(DATA) if fs) - 1  # .complete
    subprocess.run(["cat"] + [os.path.join(dp, f) for dp, _, fs in os.walk(DATA)
                              for f in fs], stdout=subprocess.DEVNULL)
    rows = []
    idle = {k: idle_trainer_pss(k) for k in (1, n)}

    def row(name, result, k):
        rows.append((name, *result, result[2] - idle[k]))
        rate, spread, pss, reads = result
        print(f"  {name}: {rate:.1f} img/s, spread {spread:.2f}, PSS "
              f"{pss / 2**20:.0f} MiB, reads {reads}", flush=True)

    single = stoker_run(1, "jobs")
    row("stoker, 1 session, whole pool", single, 1)
    for mode in ("ranks", "jobs"):
        row(f"stoker, {n} {mode} on one daemon", stoker_run(n, mode), n)
        row(f"DataLoader x {n} ({WORKERS} workers each), {mode}",
            run("torch", n, mode), n)
    row(f"DataLoader x 1 ({WORKERS} workers)", run("torch", 1, "jobs"), 1)

    print(f"\n{CORES} cores, {files} files (photographs, 375-500 px), train 224, "
          f"batch {BATCH}, {SECONDS:.0f} s per run ({WARM:.0f} s warm-up left out); "
          f"an idle trainer (torch + torchvision imported) is "
          f"{idle[1] / 2**20:.0f} MiB PSS, {n} of them {idle[n] / 2**20:.0f} MiB")
    print(f"{'configuration':44s} {'img/s':>8s} {'x 1 session':>11s} {'spread':>7s} "
          f"{'PSS MiB':>8s} {'loader MiB':>10s} {'reads/files':>11s}")
    for name, rate, spread, pss, reads, loader in rows:
        print(f"{name:44s} {rate:8.1f} {rate / single[0]:11.2f} {spread:7.2f} "
              f"{pss / 2**20:8.0f} {loader / 2**20:10.0f} {reads / files:11.2f}")

    # NUMA on/off on the machine's own node(s): one session, alternating.
    on, off = [], []
    for _ in range(RUNS):
        off.append(stoker_run(1, "jobs", "--numa", "off")[0])
        on.append(stoker_run(1, "jobs", "--numa", "on")[0])
    print(f"\nNUMA on vs off, 1 session, medians of {RUNS}: on "
          f"{statistics.median(on):.1f} img/s, off {statistics.median(off):.1f} "
          f"img/s, ratio {statistics.median(on) / statistics.median(off):.3f} "
          f"(on {', '.join(f'{x:.0f}' for x in on)}; off "
          f"{', '.join(f'{x:.0f}' for x in off)})")
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) >= 2:
        half = len(allowed) // 2
        nodes = [allowed[:half], allowed[half:]]
        spec = ";".join(",".join(map(str, c)) for c in nodes)
        split = stoker_run(n, "ranks", "--numa-topology", spec,
                           cpus=[nodes[r % 2] for r in range(n)])
        print(f"{n} ranks on two hand-made nodes ({spec}), each rank on its node's "
              f"CPUs: {split[0]:.1f} img/s ({split[0] / single[0]:.2f} x 1 session), "
              f"spread {split[1]:.2f}")


if __name__ == "__main__":
    main()
