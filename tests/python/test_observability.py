"""A real Prometheus server scraping stokerd, and `stokerctl top` in tmux."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

import stoker
from stoker._native import lib
from conftest import STOKERCTL


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.fixture()
def prometheus(daemon):
    metrics_port = lib.Client(daemon.socket).stats()["metrics_port"]
    assert metrics_port > 0
    folder = tempfile.mkdtemp(prefix="stoker-prom-")
    config = os.path.join(folder, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: stokerd\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n")
    port = free_port()
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}",
         f"--storage.tsdb.path={folder}/data",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1)
            break
        except OSError:
            assert proc.poll() is None, "prometheus exited"
            assert time.monotonic() < deadline, "prometheus did not start"
            time.sleep(0.2)
    yield port
    proc.terminate()
    proc.wait(timeout=20)
    shutil.rmtree(folder, ignore_errors=True)


def test_prometheus_scrapes_stoker_series(daemon, dataset, prometheus):
    ld = stoker.Loader(dataset, batch_size=4, transform="val", image_size=32,
                       socket=daemon.socket, shuffle=True)
    it = iter(ld)
    for _ in range(3):
        next(it)  # Keep the session open while Prometheus scrapes.
    deadline = time.monotonic() + 30
    while True:
        decoded = query(prometheus, "stoker_samples_decoded_total")
        slots = query(prometheus, "stoker_session_ring_slots")
        if decoded and float(decoded[0]["value"][1]) >= 12 and slots:
            break
        assert time.monotonic() < deadline, (decoded, slots)
        time.sleep(0.5)
    assert float(slots[0]["value"][1]) == 4  # The default ring.
    threads = query(prometheus, 'stoker_pool_threads{pool="decode"}')
    assert float(threads[0]["value"][1]) == 2
    hist = query(prometheus, "stoker_decode_seconds_count")
    assert float(hist[0]["value"][1]) > 0
    up = query(prometheus, 'up{job="stokerd"}')
    assert float(up[0]["value"][1]) == 1
    ld.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_top_in_tmux_shows_the_session_and_quits_on_q(daemon, dataset):
    ld = stoker.Loader(dataset, batch_size=4, transform="val", image_size=32,
                       socket=daemon.socket, shuffle=True)
    it = iter(ld)
    next(it)
    name = f"stoker-top-{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "80", "-y",
                    "24", f"{STOKERCTL} --socket {daemon.socket} top"], check=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", name],
                                    capture_output=True, text=True).stdout
            if "SESSION" in screen and "decode" in screen and "pyds" in screen:
                break
            assert time.monotonic() < deadline, screen
            time.sleep(0.3)
        print("\n" + screen)
        assert all(len(line) <= 80 for line in screen.splitlines())
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=True)
        deadline = time.monotonic() + 5
        while subprocess.run(["tmux", "has-session", "-t", name],
                             capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "top did not quit on q"
            time.sleep(0.1)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        ld.close()


def test_deploy_configs_are_valid_and_name_real_series(daemon, dataset):
    root = os.path.join(os.path.dirname(__file__), "..", "..", "deploy")
    check = subprocess.run(["promtool", "check", "config",
                            os.path.join(root, "prometheus", "prometheus.yml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    ld = stoker.Loader(dataset, batch_size=4, transform="val", image_size=32,
                       socket=daemon.socket, shuffle=True)
    next(iter(ld))  # A live session, so per-session series exist.
    port = lib.Client(daemon.socket).stats()["metrics_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        exposed = {line.split("{")[0].split(" ")[0]
                   for line in r.read().decode().splitlines()
                   if line.startswith("stoker_")}
    import re
    referenced = set()
    for path in [os.path.join(root, "grafana", "stoker-dashboard.json"),
                 os.path.join(root, "prometheus", "stoker_rules.yml")]:
        with open(path) as f:
            referenced |= set(re.findall(r"\bstoker_[a-z_0-9]+", f.read()))
    missing = sorted(n for n in referenced if n not in exposed)
    assert not missing, f"dashboard/rules name series stokerd does not expose: {missing}"
    assert len(referenced) >= 12
    ld.close()


def test_the_daemon_says_how_well_the_epoch_mixes(daemon, small_photos):
    # 2 ranks in global steps of 12 over 6 partitions of 20, no exchange:
    # every step holds two of each partition.
    lds = [stoker.Loader(small_photos, batch_size=6, transform="val", image_size=16, seed=3,
                         rank=r, world_size=2, exchange=0, socket=daemon.socket, shuffle=True)
           for r in range(2)]
    for ld in lds:
        ld.set_epoch(2)
    its = [ld.batches() for ld in lds]
    for it in its:  # One global step.
        next(it)
    order = lds[0].stats()["order"]
    assert order["epoch"] == 2 and order["partitions"] == 6 and order["global_step"] == 12
    assert order["partitions_per_step"] == 6.0
    assert 0.25 < order["spread"] < 0.42
    assert order["exchanged"] == 0 and order["exchange_by_bytes"] is False
    port = lib.Client(daemon.socket).stats()["metrics_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    line = f'stoker_session_order_partitions_per_step{{session="{lds[0]._session.id}"}}'
    assert f"{line} 6" in text.splitlines(), text
    for ld in lds:
        ld.close()
    # Unshuffled: nothing to say.
    plain = stoker.Loader(small_photos, batch_size=6, transform="val", image_size=16,
                          shuffle=False, socket=daemon.socket)
    next(iter(plain))
    stats = plain.stats()
    assert "pixel_cache" in stats and "order" not in stats  # Its session, without.
    plain.close()
