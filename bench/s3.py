"""An ImageFolder in an S3 API server against the same folder on local
disk, in one run on the same cores: real photographs (bench/pixels.py's
photo tiles cut from Debian's mate-backgrounds; its photo-like JPEGs where
that package is missing), each class folder there COPIES times (so a cold
epoch is long beside the session's start: 1,920 objects of 500x375 and
375x500 JPEGs), the train preset at 224, batch 64, each table with the
default settings (the pixel cache automatic: a cold epoch keeps the
pictures, so a later epoch's rate is the cached one) and then with
pixel_cache=None (decoding every epoch; CACHES=default,none picks them).
The server is moto_server on loopback ($STOKER_MOTO_SERVER, as `make test`
finds it), direct and behind bench's s3_proxy adding 20 and 50 ms per
request. A store is another machine: moto and the latency proxy (the network
between node and store, which costs a node no CPU) get a core to
themselves, and everything else (the load generator, the daemon, the
Loader) the other cores, so the local folder is read on those cores too.
First moto's own ceiling: GETs/s and MB/s of those objects, the best of
8 to 64 kept-alive connections, then again before and after each run
(their mean: moto's rate drifts), direct and through that run's path
(the proxy shares the store's core, so moto serves fewer GETs behind it;
the best of 32 and 64 connections, as a path of 20 or 50 ms needs that
many to keep moto busy; LATENCIES=0,20,50 picks the paths of both tables
(boto3's row needs 50), FLAT=0 lists
the folder class by class). Epoch 1 and later epochs
(EPOCHS after the first), images/s, medians over RUNS fresh daemons, the
later epochs also over the local folder's later ones; epoch 1 also split
at its first batch, as for the shards below.

Then the same photos as WebDataset shards (PER_SHARD pictures each, in a
seeded random order, a .jpg and a .cls per sample): local, in moto direct
and at 20 and 50 ms, named by their prefix and by a brace pattern, each
epoch 1 against the local shards' (the cold
epoch includes opening: listing, and reading each shard whole to index
it, streamed: the first batches are served as later shards are indexed),
then epoch 1 split at its first batch: the seconds to it, and the rate
after it against the local shards' after theirs; and the baseline teams
run, a DataLoader whose IterableDataset streams each shard with boto3
(get_object, tarfile), decodes with PIL and transforms with torchvision
(the same train crop at 224), at 50 ms, the best of 1, 2 and 4 workers
(prefetch_factor 4). boto3 is taken from moto_server's own interpreter.
PARTS=folder,shards,boto3 picks the tables (boto3: the baseline row of
the shards' table).

    RUNS=3 STOKER_MOTO_SERVER=... /usr/bin/python3 bench/s3.py
"""

import http.client
import io
import os
import random
import tarfile
import shutil
import statistics
import subprocess
import sys
import threading
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "client", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))

import stoker  # noqa: E402
import s3_server  # noqa: E402
from pixels import EPOCHS, RUNS, jpeg_data, passes, photo_data  # noqa: E402
from stokerd import BIN, Stokerd  # noqa: E402

PROXY = os.path.join(BIN, "bench", "s3_proxy")
COPIES = int(os.environ.get("COPIES", "4"))
FOLDER = f"/tmp/stoker-bench-s3-x{COPIES}"
PER_SHARD = int(os.environ.get("PER_SHARD", "64"))
SHARDS = f"{FOLDER}-shards{PER_SHARD}"
PARTS = os.environ.get("PARTS", "folder,shards,boto3").split(",")
# The folder's rows: their paths' latencies (ms), and how the daemon lists
# it (FLAT, its --object-store-flat-listing; unset: its default, flat while
# small; 0: class by class).
LATENCIES = [int(ms) for ms in os.environ.get("LATENCIES", "0,20,50").split(",")]
FLAT = os.environ.get("FLAT")
# The Loader's pixel cache in each table: its default, and None.
CACHES = os.environ.get("CACHES", "default,none").split(",")
CACHE = CACHES[0]


def ceiling_at(url, keys, connections, seconds):
    """GETs/s and MB/s of `keys` from `url` with `connections` threads, each
    on one kept-alive connection (reopened where the server closes it)."""
    done, size, errors = [0], [0], []
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    host = url.split("//", 1)[1]

    def worker(i):
        try:
            count(i)
        except Exception as e:  # A worker that failed fails the measurement.
            with lock:
                errors.append(e)

    def count(i):
        n = b = 0
        k = i
        conn = http.client.HTTPConnection(host)
        while time.monotonic() < stop:
            # moto takes any signature with its checks off, but no
            # anonymous read of a private bucket.
            conn.request("GET", "/" + keys[k % len(keys)], headers={
                "Authorization": "AWS4-HMAC-SHA256 Credential=AKIABENCH/20260101/us-east-1/s3/"
                                 "aws4_request, SignedHeaders=host, Signature=0"})
            r = conn.getresponse()
            b += len(r.read())
            if r.status != 200:
                raise RuntimeError(f"GET {keys[k % len(keys)]}: {r.status}")
            n += 1
            k += connections
        conn.close()
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
    if errors:
        raise errors[0]
    return done[0] / dt, size[0] / dt / 1e6


def ceiling(url, keys, seconds=3.0):
    """The best (GETs/s, MB/s, connections) of 8, 16, 32 and 64 connections:
    a Python server serves fewer GETs with more connections open."""
    best = None
    for connections in (8, 16, 32, 64):
        gets, mbs = ceiling_at(url, keys, connections, seconds)
        if best is None or gets > best[0]:
            best = (gets, mbs, connections)
    return best


def corpus():
    """The photo folder's classes COPIES times over, as hard links."""
    if os.path.exists(os.path.join(FOLDER, ".complete")):
        return FOLDER
    source = photo_data() or jpeg_data()
    shutil.rmtree(FOLDER, ignore_errors=True)
    for name in sorted(os.listdir(source)):
        if name.startswith("."):
            continue
        for k in range(COPIES):
            into = os.path.join(FOLDER, f"{name}_{k}")
            os.makedirs(into)
            for f in sorted(os.listdir(os.path.join(source, name))):
                try:
                    os.link(os.path.join(source, name, f), os.path.join(into, f))
                except OSError:  # Another file system.
                    shutil.copyfile(os.path.join(source, name, f), os.path.join(into, f))
    open(os.path.join(FOLDER, ".complete"), "w").close()
    return FOLDER


def shard_corpus(folder):
    """The folder's pictures as shards of PER_SHARD samples, in a seeded
    random order: the shard folder and its names."""
    if not os.path.exists(os.path.join(SHARDS, ".complete")):
        shutil.rmtree(SHARDS, ignore_errors=True)
        os.makedirs(SHARDS)
        items = []
        for label, cls in enumerate(sorted(c for c in os.listdir(folder) if c[0] != ".")):
            for name in sorted(os.listdir(os.path.join(folder, cls))):
                items.append((os.path.join(folder, cls, name), label))
        random.Random(0).shuffle(items)
        for s in range(0, len(items), PER_SHARD):
            with tarfile.open(os.path.join(SHARDS, f"train-{s // PER_SHARD:06d}.tar"), "w") as t:
                for i, (path, label) in enumerate(items[s:s + PER_SHARD], start=s):
                    with open(path, "rb") as f:  # Its bytes: the corpus's copies are links.
                        jpg = f.read()
                    for name, data in ((f"{i:08d}.jpg", jpg), (f"{i:08d}.cls",
                                                                 f"{label}\n".encode())):
                        info = tarfile.TarInfo(name)
                        info.size = len(data)
                        t.addfile(info, io.BytesIO(data))
        open(os.path.join(SHARDS, ".complete"), "w").close()
    return SHARDS, sorted(n for n in os.listdir(SHARDS) if n.endswith(".tar"))


def boto3_path():
    """The site-packages of moto_server's interpreter (boto3 is beside it)."""
    with open(s3_server.MOTO) as f:
        python = f.readline()[2:].strip()
    return subprocess.run([python, "-c", "import boto3, os; print(os.path.dirname("
                           "os.path.dirname(boto3.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def boto3_loader(endpoint, keys, workers):
    """A DataLoader streaming the shards with boto3, as teams write it."""
    import torch
    from PIL import Image
    from torchvision import transforms as T
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])

    class Shards(torch.utils.data.IterableDataset):
        def __iter__(self):
            import boto3
            info = torch.utils.data.get_worker_info()
            mine = keys[info.id::info.num_workers] if info else keys
            s3 = boto3.client("s3", endpoint_url=endpoint)
            for key in mine:
                body = s3.get_object(Bucket="photos", Key=key)["Body"]
                sample = {}
                with tarfile.open(fileobj=body, mode="r|") as tar:
                    for m in tar:
                        stem, ext = m.name.split(".", 1)
                        if sample and sample["key"] != stem:
                            yield self.decode(sample)
                            sample = {}
                        sample["key"] = stem
                        sample[ext] = tar.extractfile(m).read()
                if sample:
                    yield self.decode(sample)

        @staticmethod
        def decode(sample):
            image = Image.open(io.BytesIO(sample["jpg"])).convert("RGB")
            return tf(image), int(sample["cls"])

    return torch.utils.data.DataLoader(Shards(), batch_size=64, num_workers=workers,
                                       prefetch_factor=4 if workers else 2)


def one_epoch(it):
    t0, n = time.perf_counter(), 0
    for x, _ in it:
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


# The store's cores (moto's): the latency proxy runs there too, as the
# network between a node and its store costs the node no CPU.
STORE_CPUS = None


def start_proxy(moto, latency):
    """bench's proxy in front of moto adding `latency` ms: (process, endpoint)."""
    proxy = subprocess.Popen(
        [PROXY, f"--upstream_port={moto.url.rsplit(':', 1)[1]}", f"--latency_ms={latency}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if STORE_CPUS:
        os.sched_setaffinity(proxy.pid, STORE_CPUS)
    return proxy, proxy.stdout.readline().strip()


def stop_proxy(proxy):
    proxy.stdin.close()
    proxy.wait()


def with_proxy(moto, latency, run):
    """run(endpoint) with moto behind bench's proxy adding `latency` ms."""
    if not latency:
        return run(moto.url)
    proxy, endpoint = start_proxy(moto, latency)
    try:
        return run(endpoint)
    finally:
        stop_proxy(proxy)


def shard_table(moto, folder):
    shards, names = shard_corpus(folder)
    if not getattr(moto, "has_shards", False):  # Once: moto signs only its first puts.
        for name in names:
            with open(os.path.join(shards, name), "rb") as f:
                moto.put(f"photos/shards/{name}", f.read())
        moto.has_shards = True
    size = sum(os.path.getsize(os.path.join(shards, n)) for n in names)
    print(f"\nshards: {len(names)} of {PER_SHARD} pictures, {size / 1e6:,.1f} MB; images/s, "
          f"medians of {RUNS} runs; epoch 1 against the local shards' epoch 1")
    print(f"{'feed':32} {'epoch 1':>8} {'later':>8} {'x local':>8} {'1st batch':>10} "
          f"{'after it':>9} {'x local':>8} {'later x local':>14}")
    local = shard_runs(lambda: loader(shards), ())
    print(f"{'local shards':32} {local[0]:8,.0f} {local[1]:8,.0f} {'':>8} {local[2]:9.3f}s "
          f"{local[3]:9,.0f}", flush=True)
    pattern = f"s3://photos/shards/train-{{000000..{len(names) - 1:06d}}}.tar"
    for url, form in (("s3://photos/shards/", "s3 shards"), (pattern, "s3 shards by pattern")):
        for latency in LATENCIES:
            def run(endpoint):
                os.environ["AWS_ENDPOINT_URL"] = endpoint
                return shard_runs(lambda: loader(url), ("--object-store-endpoints", endpoint))
            r = with_proxy(moto, latency, run)
            name = f"{form}, {latency} ms" if latency else f"{form}, moto direct"
            print(f"{name:32} {r[0]:8,.0f} {r[1]:8,.0f} {r[0] / local[0]:8.2f} {r[2]:9.3f}s "
                  f"{r[3]:9,.0f} {r[3] / local[3]:8.2f} {r[1] / local[1]:14.2f}", flush=True)
            if latency == 50 and url != pattern:
                at_50 = r[0]
    if "boto3" not in PARTS or 50 not in LATENCIES:
        return
    sys.path.append(boto3_path())
    keys = [f"shards/{n}" for n in names]
    best = (0, 0)
    for workers in (1, 2, 4):
        rate = with_proxy(moto, 50, lambda endpoint: statistics.median(
            one_epoch(boto3_loader(endpoint, keys, workers)) for _ in range(RUNS)))
        best = max(best, (rate, workers))
    print(f"{'DataLoader + boto3, 50 ms':32} {best[0]:8,.0f} {'':>8} {best[0] / local[0]:8.2f}"
          f"   (best of 1, 2, 4 workers: {best[1]}); stoker at 50 ms = {at_50 / best[0]:.1f}x it",
          flush=True)


def shard_runs(make, flags):
    """Medians over RUNS fresh daemons started with `flags`: epoch 1 and later
    images/s, the seconds to epoch 1's first batch, and its images/s after it."""
    runs = []
    for _ in range(RUNS):
        first_batch = {}
        with Stokerd(*flags) as d:
            first, later, _ = passes(lambda: make()(d.sock), first_batch)
        runs.append((first, later, first_batch["seconds"], first_batch["rate"]))
    return [statistics.median(r[k] for r in runs) for k in range(4)]


def loader(data):
    cache = {"pixel_cache": None} if CACHE == "none" else {}
    return lambda sock: stoker.Loader(data, batch_size=64, transform="train", shuffle=True,
                                      image_size=224, socket=sock, **cache)


def main():
    global STORE_CPUS, CACHE
    warnings.simplefilter("ignore")
    if not s3_server.available():
        print("bench/s3.py: no moto_server (set STOKER_MOTO_SERVER); skipped")
        return
    folder = corpus()
    keys = []
    for dirpath, _, names in os.walk(folder):
        keys += [os.path.join("photos/train", os.path.relpath(os.path.join(dirpath, n), folder))
                 for n in names if not n.startswith(".")]
    usable = sorted(os.sched_getaffinity(0))
    store = {usable[0]}
    node = set(usable) - store
    if not node:
        print("bench/s3.py: one core, so the store shares it with the node")
        store = node = None
    else:
        os.sched_setaffinity(0, node)  # The daemons and the Loader inherit it.
        STORE_CPUS = store
    with s3_server.MotoServer(cpus=store) as moto:
        moto.upload_folder(folder, "photos", "train")
        gets, mbs, conns = ceiling(moto.url, sorted(keys))
        print(f"moto_server's ceiling, {len(keys)} objects: {gets:,.0f} GETs/s, {mbs:,.1f} MB/s "
              f"(the best of 8-64 kept-alive connections: {conns})", flush=True)
        os.environ.update({"AWS_ACCESS_KEY_ID": "AKIABENCH", "AWS_SECRET_ACCESS_KEY": "bench",
                           "AWS_DEFAULT_REGION": "us-east-1"})
        print(f"images/s, medians of {RUNS} runs; later = mean of epochs 2-{1 + EPOCHS}; "
              f"the node on {len(node or ()) or os.cpu_count()} of {os.cpu_count()} cores.")
        for cache in CACHES:
            CACHE = cache
            print("\n== the Loader's " + ("default settings (pixel cache automatic)"
                                          if cache == "default" else "pixel_cache=None"))
            if "shards" in PARTS:
                shard_table(moto, folder)
            if "folder" in PARTS:
                folder_table(moto, folder, keys, conns)


def folder_table(moto, folder, keys, conns):
    """The folder's table: local, then in moto at each of LATENCIES."""
    print(f"\nthe folder: before and after each s3 run, moto's ceiling again (their "
          f"mean), direct ({conns} connections) and through the run's path (the proxy, on "
          "the store's core: the best of 32 and 64 connections); then the medians of each "
          "run's epoch 1 over min(local, that ceiling), the seconds to its first batch "
          "(the opening included) and its rate after it over min(the local folder's "
          "after its first batch, the path's ceiling)")
    print(f"{'feed':28} {'epoch 1':>8} {'later':>8} {'x local':>8} {'direct':>8} "
          f"{'path':>8} {'x min(l, path)':>15} {'x min(l, direct)':>17} {'1st batch':>10} "
          f"{'after it x min(l, path)':>24} {'later x local':>14}")
    local = shard_runs(lambda: loader(folder), ())
    print(f"{'local folder':28} {local[0]:8,.0f} {local[1]:8,.0f} {'':>8} {'':>8} {'':>8} "
          f"{'':>15} {'':>17} {local[2]:9.3f}s", flush=True)
    for latency in LATENCIES:
        proxy = None
        endpoint = moto.url
        if latency:
            proxy, endpoint = start_proxy(moto, latency)
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        # (epoch 1, later, direct ceiling, path ceiling, to the 1st batch, after it)
        runs = []
        def ceilings():
            direct = ceiling_at(moto.url, sorted(keys), conns, 2.0)[0]
            return direct, direct if not latency else max(
                ceiling_at(endpoint, sorted(keys), n, 2.0)[0] for n in (32, 64))
        for _ in range(RUNS):
            before = ceilings()
            first_batch = {}
            listing = ("--object-store-flat-listing", FLAT) if FLAT else ()
            with Stokerd("--object-store-endpoints", endpoint, *listing) as d:
                first, later, _ = passes(lambda: loader("s3://photos/train/")(d.sock),
                                         first_batch)
            # moto's rate drifts: its ceiling during the run, as the mean
            # of one before and one after it.
            direct, path = [(b + a) / 2 for b, a in zip(before, ceilings())]
            runs.append((first, later, direct, path, first_batch["seconds"],
                         first_batch["rate"]))
        name = f"s3, {latency} ms per request" if latency else "s3, moto direct"
        name += ", by class" if FLAT == "0" else ""
        med = [statistics.median(r[k] for r in runs) for k in range(4)]
        over_path = statistics.median(r[0] / min(local[0], r[3]) for r in runs)
        over_direct = statistics.median(r[0] / min(local[0], r[2]) for r in runs)
        to_first = statistics.median(r[4] for r in runs)
        after = statistics.median(r[5] / min(local[3], r[3]) for r in runs)
        print(f"{name:28} {med[0]:8,.0f} {med[1]:8,.0f} {med[0] / local[0]:8.2f} "
              f"{med[2]:8,.0f} {med[3]:8,.0f} {over_path:15.2f} {over_direct:17.2f} "
              f"{to_first:9.3f}s {after:24.2f} {med[1] / local[1]:14.2f}", flush=True)
        print("  each run's x min(l, path): " +
              " ".join(f"{r[0] / min(local[0], r[3]):.2f}" for r in runs), flush=True)
        if proxy is not None:
            stop_proxy(proxy)


if __name__ == "__main__":
    main()
