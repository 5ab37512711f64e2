"""Batches in GPU memory (the spec's slabs) through the real daemon: every
batch's slab, as torch sees it on the GPU, against the ring's bytes; two
trainer processes' sessions at once on one GPU; the daemon's GPU memory
(nvidia-smi) before and with them; batches per second each; on a GPU,
stoker.Loader(slabs=True)'s batches against the same Loader's without.

  python3 bench/gpu_slabs.py          on a GPU machine (bench/gpu_checks.sh)
  python3 bench/gpu_slabs.py --host   anywhere: the same with host slabs

Prints one line per trainer and the memory, and exits 1 on any batch whose
slab differs from its ring slot."""

import os
import multiprocessing
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))

import numpy as np  # noqa: E402

from stoker._native import lib  # noqa: E402
from stokerd import Stokerd  # noqa: E402
from vs_torch import DATA, corpus  # noqa: E402

HOST = "--host" in sys.argv
BATCHES = int(os.environ.get("BATCHES", "200"))
TRAINERS = int(os.environ.get("TRAINERS", "2"))


def gpu_bus_id():
    out = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()[0]


def daemon_gpu_mib(pid):
    """The daemon's GPU memory, MiB (nvidia-smi; None where it cannot say)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        p, mib = (x.strip() for x in line.split(","))
        if p == str(pid):
            return int(mib)
    return 0


def trainer(socket, spec, result):
    import torch
    sys.path.insert(0, os.path.dirname(__file__))
    session = lib.Client(socket).open_session(spec)
    bad, t0 = 0, time.monotonic()
    for _ in range(BATCHES):
        b = session.next(timeout=60)
        slab = b.slab_fields()
        for name, ring in b.fields.items():
            got = slab[name]
            if HOST:
                bad += not np.array_equal(got, ring)
            else:
                bad += not torch.equal(got, torch.from_numpy(np.array(ring)).to(got.device))
        del slab
        b.release()
    result.put((BATCHES / (time.monotonic() - t0), bad))
    session.close()


def loader_differences(socket):
    """Batches of stoker.Loader(device="cuda", slabs=True) that differ from
    the same Loader's without slabs (val: the same batches)."""
    import stoker
    import torch
    kw = dict(batch_size=64, transform="val", image_size=224, socket=socket, device="cuda")
    plain, slabbed = stoker.Loader(DATA, **kw), stoker.Loader(DATA, slabs=True, **kw)
    bad = n = 0
    for (a, la), (b, lb) in zip(plain, slabbed):
        bad += not (torch.equal(a, b) and torch.equal(la, lb))
        n += 1
    print(f"Loader(slabs=True): {n} batches, {bad} differing from Loader(device=\"cuda\")")
    return bad + (n == 0)


def main():
    corpus()
    spec = {"dataset": {"folder": {"path": DATA}}, "batch_size": 64, "transform": "TRAIN",
            "image_size": 224, "shuffle": True, "slabs": {"memory": "host" if HOST else "cuda"}}
    if not HOST:
        import torch
        if not torch.cuda.is_available():
            print("gpu_slabs: skipped: no CUDA GPU here (--host runs host slabs)")
            return 0
        spec["placement"] = {"gpu_bus_id": gpu_bus_id()}
    with Stokerd() as d:
        before = daemon_gpu_mib(d.proc.pid)
        spawn = multiprocessing.get_context("spawn")  # CUDA does not survive fork.
        queue = spawn.Queue()
        procs = [spawn.Process(target=trainer, args=(d.sock, dict(spec, seed=t), queue))
                 for t in range(TRAINERS)]
        for p in procs:
            p.start()
        time.sleep(5)
        during = daemon_gpu_mib(d.proc.pid)
        results = [queue.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        loader_bad = 0 if HOST else loader_differences(d.sock)
    bad = sum(r[1] for r in results) + loader_bad
    for i, (rate, corrupt) in enumerate(results):
        print(f"trainer {i}: {BATCHES} batches of 64 at 224, {rate:.1f} batches/s, "
              f"{corrupt} differing from the ring")
    print(f"slabs {'host' if HOST else 'cuda'}; daemon GPU memory MiB: before {before}, "
          f"with {TRAINERS} sessions {during}")
    return 1 if bad or len(results) != TRAINERS else 0


if __name__ == "__main__":
    sys.exit(main())
