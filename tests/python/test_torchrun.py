"""torchrun's own elastic restart: one torchrun job of four ranks over two
daemons (two simulated nodes of two ranks each). A rank dies mid-epoch;
torchrun stops and restarts every worker, and they resume from the state
rank 0 saved, reading on in the same global steps as a run that was never
interrupted. The ranks take their rank and world size from torchrun's
environment (RANK, WORLD_SIZE), as the Loader does by default."""

import importlib.util
import json
import os
import signal
import subprocess
import sys

import pytest

import stoker
from test_many_nodes import photos, sockets, start, stop  # noqa: F401 (a fixture)
from world import STEP, global_steps, run_world

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torchrun comes with torch, which this Python lacks")

WORKER = r"""
import ctypes, json, os, signal, sys
import stoker
out, data, socks = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
# Ends with its agent (PR_SET_PDEATHSIG), whenever the agent goes.
agent = os.getppid()
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
if os.getppid() != agent:
    sys.exit(4)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
ld = stoker.Loader(data, batch_size=%(step)d // world, transform="val", image_size=16,
                   shuffle=True, seed=5, socket=socks[rank * len(socks) // world], pixel_cache=None)
state_file = os.path.join(out, "state.json")
if attempt == 1:
    with open(state_file) as f:
        ld.load_state_dict(json.load(f))
ld.set_epoch(1)
batches = []
for b in ld.batches():
    batches.append([int(i) for i in b.indices])
    if attempt == 0 and len(batches) == 5:
        break
mine = os.path.join(out, f"{attempt}-{rank}.json")
with open(mine + ".part", "w") as f:
    json.dump({"epochs": [batches], "rank": rank, "world": world}, f)
os.rename(mine + ".part", mine)
if attempt == 0:
    if rank == 0:
        with open(state_file + ".part", "w") as f:
            json.dump(ld.state_dict(), f)
        os.rename(state_file + ".part", state_file)
    # Each rank has reported (a byte in the FIFO): rank 0 dies, and torchrun
    # stops the others. They wait for that, their sessions open, batches in
    # their rings.
    fifo = os.path.join(out, "reported")
    if rank == 0:
        fd = os.open(fifo, os.O_RDWR)  # Never at end of file: waits for bytes.
        got = 0
        while got < world - 1:
            got += len(os.read(fd, world))
        sys.exit(3)
    fd = os.open(fifo, os.O_WRONLY)
    os.write(fd, b"r")
    os.close(fd)
    while True:
        signal.pause()
ld.close()
""" % {"step": STEP}


def test_torchrun_restarts_a_failed_world_and_it_resumes_in_the_same_steps(photos, tmp_path):
    daemons = start(2)
    try:
        whole = global_steps(run_world(sockets(daemons), 4, photos))
        script = tmp_path / "worker.py"
        script.write_text(WORKER)
        os.mkfifo(tmp_path / "reported")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(stoker.__file__))] +
            [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK"):
            env.pop(v, None)
        log = tmp_path / "torchrun.log"
        with open(log, "w") as out:
            agent = subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc_per_node=4", "--max_restarts=1", "--monitor_interval=0.2",
                 # Not the default 0 (no redirection): torch 1.13's parser
                 # loses it under Python 3.11. 2: stderr also to a log file.
                 "--redirects=2", "--tee=2", f"--log_dir={tmp_path / 'logs'}",
                 str(script), str(tmp_path), photos, json.dumps(sockets(daemons))],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                agent.wait(timeout=300)
            finally:  # The agent stops its workers; then whatever it left.
                if agent.poll() is None:
                    agent.terminate()
                    try:
                        agent.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        pass
                try:
                    os.killpg(agent.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # None left.
                agent.wait()
        assert agent.returncode == 0, log.read_text()
    finally:
        stop(daemons)

    def reports(attempt):
        outs = [json.loads((tmp_path / f"{attempt}-{r}.json").read_text()) for r in range(4)]
        assert [o["world"] for o in outs] == [4] * 4
        return outs

    state = json.loads((tmp_path / "state.json").read_text())
    assert state["epoch"] == 1 and state["consumed"] == 5 * STEP
    assert global_steps(reports(0)) + global_steps(reports(1)) == whole
