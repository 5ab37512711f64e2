"""An ImageFolder in an S3 API server against the same folder on local
disk, in one run on the same cores: the bench's 640 photo-like JPEGs
(bench/pixels.py's corpus), the train preset at 224, batch 64, decoding
every epoch (pixel_cache=None, so later epochs show what the caches give).
The server is moto_server on loopback ($STOKER_MOTO_SERVER, as `make test`
finds it), direct and behind bench's s3_proxy adding 20 and 50 ms per
request. First moto's own ceiling: GETs/s and MB/s of those objects with
32 connections. Epoch 1 and later epochs (EPOCHS after the first),
images/s, medians over RUNS fresh daemons.

    RUNS=3 STOKER_MOTO_SERVER=... /usr/bin/python3 bench/s3.py
"""

import os
import subprocess
import sys
import threading
import time
import urllib.request
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))

import stoker  # noqa: E402
import s3_server  # noqa: E402
from pixels import EPOCHS, RUNS, jpeg_data, medians  # noqa: E402
from stokerd import BIN  # noqa: E402

PROXY = os.path.join(BIN, "bench", "s3_proxy")


def ceiling(url, keys, connections=32, seconds=5.0):
    """GETs/s and MB/s of `keys` from `url` with `connections` threads."""
    done, size = [0], [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(i):
        n = b = 0
        k = i
        while time.monotonic() < stop:
            # moto takes any signature with its checks off, but no
            # anonymous read of a private bucket.
            req = urllib.request.Request(f"{url}/{keys[k % len(keys)]}", headers={
                "Authorization": "AWS4-HMAC-SHA256 Credential=AKIABENCH/20260101/us-east-1/s3/"
                                 "aws4_request, SignedHeaders=host, Signature=0"})
            with urllib.request.urlopen(req) as r:
                b += len(r.read())
            n += 1
            k += connections
        with lock:
            done[0] += n
            size[0] += b

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.monotonic() - t0
    return done[0] / dt, size[0] / dt / 1e6


def loader(data):
    return lambda sock: stoker.Loader(data, batch_size=64, image_size=224, socket=sock,
                                      pixel_cache=None)


def main():
    warnings.simplefilter("ignore")
    if not s3_server.available():
        print("bench/s3.py: no moto_server (set STOKER_MOTO_SERVER); skipped")
        return
    folder = jpeg_data()
    keys = []
    for dirpath, _, names in os.walk(folder):
        keys += [os.path.join("photos/train", os.path.relpath(os.path.join(dirpath, n), folder))
                 for n in names if n.endswith(".jpg")]
    with s3_server.MotoServer() as moto:
        moto.upload_folder(folder, "photos", "train")
        gets, mbs = ceiling(moto.url, sorted(keys))
        print(f"moto_server's ceiling, {len(keys)} objects, 32 connections: "
              f"{gets:,.0f} GETs/s, {mbs:,.1f} MB/s", flush=True)
        os.environ.update({"AWS_ACCESS_KEY_ID": "AKIABENCH", "AWS_SECRET_ACCESS_KEY": "bench",
                           "AWS_DEFAULT_REGION": "us-east-1"})
        print(f"images/s, medians of {RUNS} runs; later = mean of epochs 2-{1 + EPOCHS}; "
              f"{os.cpu_count()} cores")
        print(f"{'feed':52} {'epoch 1':>10} {'later':>10} {'x local':>8}")
        local = medians(loader(folder))
        print(f"{'local folder':52} {local[0]:10,.0f} {local[1]:10,.0f}", flush=True)
        for latency in (0, 20, 50):
            proxy = None
            endpoint = moto.url
            if latency:
                proxy = subprocess.Popen(
                    [PROXY, f"--upstream_port={moto.url.rsplit(':', 1)[1]}",
                     f"--latency_ms={latency}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    text=True)
                endpoint = proxy.stdout.readline().strip()
            os.environ["AWS_ENDPOINT_URL"] = endpoint
            r = medians(loader("s3://photos/train/"),
                        flags=("--object-store-endpoints", endpoint))
            name = f"s3, {latency} ms per request" if latency else "s3, moto direct"
            print(f"{name:52} {r[0]:10,.0f} {r[1]:10,.0f} {r[0] / local[0]:8.2f}", flush=True)
            if proxy is not None:
                proxy.stdin.close()
                proxy.wait()


if __name__ == "__main__":
    main()
