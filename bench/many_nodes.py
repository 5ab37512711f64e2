"""Many nodes on one machine, a remote dataset four times one node's L2:
NODES daemons (8; each its own socket, L2 folder of a quarter of the
dataset and rings; L1 and the decoded cache off, so what a node holds is
its L2), one trainer process per node (world size NODES), all reading the
ImageFolder of real photographs bench/s3.py uses (COPIES times each
class: 1,920 objects, 51 MB) from moto_server on loopback, val at 64 px in
global steps of 24, for EPOCHS epochs. Per epoch:
- the remote MB each node read (the mean and the largest);
- the most a node read from the store over a share (the dataset's bytes
  over the nodes), and over its own share (what it read in epoch 0, which
  exchanges nothing);
- the most requests a node made (one a sample);
- the aggregate images/s (the dataset over the slowest rank's pass);
- the shuffle's spread (the mean gap between consecutive indices of the
  global order over the dataset's size: 1/3 for a uniform permutation);
- per step: the partitions a global step's samples come from, as the
  daemons report it (Loader.stats()'s "order"; none for a first epoch
  read in windows).
PARTITIONS canonical partitions (24: 80 samples each). Affinity on:
exchange 0 and 0.05 (the default); off: exchange 1, where from the second
epoch each partition's samples are read in another partition's place (a
new permutation of the partitions each epoch), as if ranks drew from the
whole dataset.

    STOKER_MOTO_SERVER=... /usr/bin/python3 bench/many_nodes.py
"""

import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
sys.path.insert(0, os.path.dirname(__file__))

import s3_server  # noqa: E402
from s3 import corpus  # noqa: E402
from stokerd import Stokerd  # noqa: E402
from world import global_order, run_world  # noqa: E402

NODES = int(os.environ.get("NODES", "8"))
EPOCHS = int(os.environ.get("EPOCHS", "5"))
# 80 samples a partition, so that the exchange 0.05 is 4 of each (at the
# default 120, 16 a partition would round it up to 1 of 16).
PARTITIONS = int(os.environ.get("PARTITIONS", "24"))


def run(url, endpoint, l2_bytes, share, exchange):
    """One world: per epoch (mean MB, largest MB, the most a node read
    remote over `share` bytes, the most over its own share, the most
    requests a node made, images/s, spread, partitions per step)."""
    folders = [tempfile.mkdtemp(prefix="stoker-bench-node-") for _ in range(NODES)]
    daemons = []
    try:
        for f in folders:
            daemons.append(Stokerd("--object-store-endpoints", endpoint, "--l2-path", f,
                                   "--l2-max-bytes", str(l2_bytes), "--l1-bytes", "0",
                                   "--decoded-cache-bytes", "0", "--pixel-cache-bytes", "0",
                                   "--threads", "1").__enter__())
        outs = run_world([d.sock for d in daemons], NODES, url, first=0, epochs=EPOCHS,
                         exchange=exchange, partitions=PARTITIONS, transform="val", size=64)
    finally:
        for d in daemons:
            d.__exit__(None, None, None)
        for f in folders:
            shutil.rmtree(f, ignore_errors=True)
    rows = []
    for e in range(EPOCHS):
        mb = [o["remote"][str(e)]["bytes"] / 1e6 for o in outs]
        of_share = [o["remote"][str(e)]["bytes"] / share for o in outs]
        # Epoch 0 exchanges nothing: what a node read then is its own share.
        of_own = [o["remote"][str(e)]["bytes"] / max(o["remote"]["0"]["bytes"], 1) for o in outs]
        requests = [o["remote"][str(e)]["requests"] for o in outs]
        order = global_order(outs, e)
        n = len(order)
        spread = statistics.mean(abs(a - b) for a, b in zip(order, order[1:])) / n
        # The daemons' own word on the epoch's mixing (None for a first
        # epoch read in windows).
        said = outs[0]["orders"][e]
        rows.append((statistics.mean(mb), max(mb), max(of_share), max(of_own), max(requests),
                     n / max(o["seconds"][e] for o in outs), spread,
                     said["partitions_per_step"] if said else float("nan")))
    return rows


def main():
    if not s3_server.available():
        print("bench/many_nodes.py: no moto_server (set STOKER_MOTO_SERVER); skipped")
        return
    folder = corpus()
    total = sum(os.path.getsize(os.path.join(base, f))
                for base, _, names in os.walk(folder) for f in names if not f.startswith("."))
    os.environ.update({"AWS_ACCESS_KEY_ID": "AKIABENCH", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    with s3_server.MotoServer() as moto:
        moto.upload_folder(folder, "photos", "train")
        os.environ["AWS_ENDPOINT_URL"] = moto.url
        print(f"{NODES} nodes of one rank, {total / 1e6:,.1f} MB of photos in moto_server, "
              f"L2 {total / 4e6:,.1f} MB a node (a quarter of the dataset); a node's share is "
              f"{total / NODES / 1e6:,.1f} MB")
        print(f"{'exchange':10} {'epoch':>5} {'MB/node':>8} {'largest':>8} {'of share':>8} "
              f"{'of own':>8} {'requests':>8} {'images/s':>9} {'spread':>7} {'per step':>8}")
        for exchange, name in ((0.0, "0"), (0.05, "0.05"), (1.0, "1 (off)")):
            for e, (mean, most, share, own, requests, rate, spread, per_step) in enumerate(
                    run("s3://photos/train/", moto.url, total // 4, total / NODES, exchange)):
                print(f"{name:10} {e:5} {mean:8.2f} {most:8.2f} {share:8.1%} {own:8.1%} "
                      f"{requests:8} {rate:9,.0f} {spread:7.3f} {per_step:8.2f}", flush=True)


if __name__ == "__main__":
    main()
