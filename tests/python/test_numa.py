"""NUMA placement through the Python client: a daemon with two hand-made
nodes (--numa-topology) places Loaders by placement=Placement(node=), by the process's
CPU affinity (sent by libstoker), and rejects a node it does not have;
`stokerctl resize --node` resizes one node's pool."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, STOKERCTL, Daemon

sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import stoker  # noqa: E402

CPUS = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs to split")


@pytest.fixture()
def two_nodes():
    d = Daemon(threads=2, extra=["--numa-topology", f"{CPUS[0]};{CPUS[1]}"])
    yield d
    d.stop()


def stats(d):
    out = subprocess.run([STOKERCTL, "--socket", d.socket, "stats", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


# A child process confined to one CPU opens a Loader and waits.
CONFINED = r"""
import os, sys
os.sched_setaffinity(0, {int(sys.argv[2])})
sys.path.insert(0, sys.argv[3])
import stoker
loader = stoker.Loader(sys.argv[4], batch_size=4, transform="train", shuffle=True,
                   image_size=32, socket=sys.argv[1])
it = iter(loader)
next(it)
print("open", flush=True)
sys.stdin.readline()
"""


def test_loaders_are_placed_by_request_and_cpus(two_nodes, dataset):
    asked = stoker.Loader(dataset, batch_size=4, image_size=32,
                          socket=two_nodes.socket, placement=stoker.Placement(node=1),
                          transform="train", shuffle=True)
    it = iter(asked)
    next(it)
    child = subprocess.Popen(
        [sys.executable, "-c", CONFINED, two_nodes.socket, str(CPUS[1]),
         os.path.join(ROOT, "client", "python"), dataset],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "open"
        s = stats(two_nodes)
        assert s["numa"] == "2 nodes (--numa-topology)"
        places = sorted((x["numa_node"], x["placement"]) for x in s["sessions"])
        assert places == [(1, f"cpus {CPUS[1]}"), (1, "requested")]
        pools = {(p["pool"], p.get("node")): p for p in s["pools"]}
        assert pools[("decode", 0)]["cpus"] == str(CPUS[0])
        assert pools[("decode", 1)]["cpus"] == str(CPUS[1])
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        del it
    with pytest.raises(stoker.StokerError) as e:
        next(iter(stoker.Loader(dataset, batch_size=4, image_size=32,
                                socket=two_nodes.socket, placement=stoker.Placement(node=2),
                                transform="train")))
    assert e.value.code == "INVALID_ARGUMENT"
    assert "placement.node 2 is not a node of this daemon (0..1)" in str(e.value)


def test_resize_one_node(two_nodes):
    out = subprocess.run([STOKERCTL, "--socket", two_nodes.socket, "resize", "--pool",
                          "decode", "--threads", "3", "--node", "1"],
                         check=True, capture_output=True, text=True).stdout
    assert out.strip() == "decode pool of node 1: 1 -> 3 threads"
    pools = {(p["pool"], p.get("node")): p["threads"] for p in stats(two_nodes)["pools"]}
    assert pools[("decode", 0)] == 1 and pools[("decode", 1)] == 3
    bad = subprocess.run([STOKERCTL, "--socket", two_nodes.socket, "resize", "--pool",
                          "decode", "--threads", "3", "--node", "7"],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert "node 7 is not a node of this daemon (0..1)" in bad.stderr
