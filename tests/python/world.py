"""A world of trainers on one machine, for tests/python/test_many_nodes.py
and bench/many_nodes.py: each rank a process of its own (this interpreter)
reading a stoker.Loader from the daemon of its node, a node's ranks
consecutive as torchrun numbers them. Each rank reports its batches'
dataset indices per epoch, its state after each pass (or where it
stopped), each pass's seconds, how well the daemon says each epoch mixes
(Loader.stats()'s "order" at its first batch) and its session's remote
reads per epoch; or,
told to crash, its batches and state at its stop, after which it waits,
its session open with batches in its ring, to be killed."""

import json
import os
import subprocess
import sys

import stoker

STEP = 24  # The global batch: 1, 2, 3, 4, 6, 8 and 12 ranks divide it.

TRAINER = r"""
import json, sys, time
import stoker
a = json.loads(sys.argv[1])
ld = stoker.Loader(a["data"], batch_size=a["batch"], transform=a["transform"],
                   image_size=a["size"], shuffle=True, seed=5, rank=a["rank"],
                   world_size=a["world"],
                   socket=a["socket"], exchange=a["exchange"], pixel_cache=None,
                   **({} if a["partitions"] is None else {"partitions": a["partitions"]}))
if a["state"] is not None:
    ld.load_state_dict(a["state"])
out = {"epochs": [], "states": [], "seconds": [], "orders": []}
for epoch in range(a["first"], a["first"] + a["epochs"]):
    ld.set_epoch(epoch)
    batches = []
    t0 = time.perf_counter()
    for b in ld.batches():
        batches.append([int(i) for i in b.indices])
        if len(batches) == 1:  # While the session reads this epoch; not timed.
            asked = time.perf_counter()
            out["orders"].append(ld.stats().get("order"))
            t0 += time.perf_counter() - asked
        if len(batches) == a["stop"] and a["crash"]:
            print(json.dumps({"epochs": [batches], "states": [ld.state_dict()]}), flush=True)
            sys.stdin.read()  # Until killed: its stdin stays open.
        if len(batches) == a["stop"]:
            break
    out["seconds"].append(time.perf_counter() - t0)
    out["epochs"].append(batches)
    out["states"].append(ld.state_dict())
remote = ld.stats().get("remote")
out["remote"] = remote["epochs"] if remote else None
ld.close()
print(json.dumps(out))
"""


def spawn(sockets, world, data, first=1, epochs=1, stop=-1, state=None, exchange=None,
          partitions=None, step=STEP, transform="val", size=16, crash=False):
    """`world` trainer processes reading `data` in global steps of `step`,
    rank r on the daemon at sockets[r * len(sockets) // world], by rank.
    `crash`: each reports at its `stop`-th batch, then waits to be killed."""
    # The trainers import the stoker this process did.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(stoker.__file__))] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    procs = []
    for rank in range(world):
        socket = sockets[rank * len(sockets) // world]
        args = dict(data=data, batch=step // world, rank=rank, world=world, socket=socket,
                    exchange=exchange, partitions=partitions, state=state, first=first,
                    epochs=epochs, stop=stop, transform=transform, size=size, crash=crash)
        procs.append(subprocess.Popen([sys.executable, "-c", TRAINER, json.dumps(args)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env))
    return procs


def run_world(sockets, world, data, crash=False, **kw):
    """spawn()'s trainers, their reports by rank. `crash`: each reports at
    its `stop`-th batch and is then killed (SIGKILL) with the others,
    mid-pass."""
    procs = spawn(sockets, world, data, crash=crash, **kw)
    try:
        outs = []
        for p in procs:
            if crash:
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError(f"a trainer failed: {p.communicate()[1]}")
                outs.append(json.loads(line))
                continue
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"a trainer failed: {err}")
            outs.append(json.loads(out))
        return outs
    finally:  # Killed: crashed on purpose, or left behind by another's failure.
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


def global_steps(outs, epoch=0):
    """Each global step of a pass: every rank's batch s, as one set."""
    counts = {len(o["epochs"][epoch]) for o in outs}
    assert len(counts) == 1, counts  # Every rank reads as many batches.
    return [set().union(*(o["epochs"][epoch][s] for o in outs)) for s in range(counts.pop())]


def global_order(outs, epoch=0):
    """The pass's samples in global order: position s * step + k * W + r is
    rank r's k-th sample of step s."""
    order = []
    for s in range(len(outs[0]["epochs"][epoch])):
        batches = [o["epochs"][epoch][s] for o in outs]
        for k in range(max(len(b) for b in batches)):
            order += [b[k] for b in batches if k < len(b)]
    return order
