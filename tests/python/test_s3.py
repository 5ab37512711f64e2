"""An ImageFolder in a real S3 API server (moto_server, $STOKER_MOTO_SERVER,
which `make test` sets) read through the daemon: the same batches as the
same pictures in a local folder, with the trainer's credentials taken from
its environment; an endpoint the operator did not list, a daemon with no
object store, and a trainer with no credentials are refused, each saying
why. Listing classes uses a delimiter, which moto's signature checker
mishandles, so this server runs with checks off; signing is tested against
checks on in server/objstore/s3_client_test."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request

import pytest

import s3_server
import stoker
from conftest import BIN, STOKERCTL, Daemon

torch = pytest.importorskip("torch")

PROXY = os.path.join(BIN, "bench", "s3_proxy")

@pytest.fixture(scope="module")
def bucket(dataset):
    """The session dataset's classes under s3://photos/train/ of a moto_server."""
    if not s3_server.available():
        pytest.skip("moto_server not found: run through make test, or set STOKER_MOTO_SERVER")
    with s3_server.MotoServer() as moto:
        moto.upload_folder(dataset, "photos", "train")
        moto.put("photos/train/README.txt", b"not a class")
        yield moto.url


@pytest.fixture()
def trainer_env(bucket, monkeypatch, tmp_path):
    """A trainer whose environment names the endpoint and its key."""
    monkeypatch.setenv("HOME", str(tmp_path))  # No ~/.aws of the machine's.
    for v in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_REGION",
              "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", bucket)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATRAINER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "trainer-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return monkeypatch


def batches(ld):
    return [(x.clone(), y.clone()) for x, y in ld]


ARGS = dict(batch_size=4, transform="val", image_size=40, shuffle=False)


def test_an_image_folder_in_a_bucket_reads_as_the_local_one(bucket, dataset, trainer_env):
    d = Daemon(extra=["--object-store-endpoints", bucket])
    try:
        want = batches(stoker.Loader(dataset, socket=d.socket, **ARGS))
        ld = stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS)
        got = batches(ld)
        assert len(got) == len(want) and len(got) > 0
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy)
        stats = json.loads(subprocess.run(
            [STOKERCTL, "--socket", d.socket, "stats", "--json"],
            capture_output=True, text=True, check=True).stdout)
        after_first = int(stats["object_store"]["requests"])
        pictures = sum(len(y) for _, y in want)
        # One GET per picture, and the listings: the classes', and beside it
        # the folder's one page listed flat.
        assert after_first == pictures + 2
        # A second epoch: the same pictures (from the caches now).
        it = iter(ld)
        for (wx, wy) in want:
            x, y = next(it)
            assert torch.equal(x, wx) and torch.equal(y, wy)
            # While the session is open, its stats show the dataset, never
            # the trainer's credentials.
            stats = subprocess.run([STOKERCTL, "--socket", d.socket, "stats", "--json"],
                                   capture_output=True, text=True, check=True).stdout
            assert "s3://photos/train/" in stats
            assert "trainer-secret" not in stats and "AKIATRAINER" not in stats
        # The second epoch made no remote request; the session's counts per
        # epoch and /metrics say so too.
        remote = ld.stats()["remote"]
        size = sum(os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(dataset)
                   for f in fs)
        assert remote["epochs"][0] == {"requests": pictures, "bytes": size}, remote
        assert remote["epochs"][1] == {"requests": 0, "bytes": 0}, remote
        assert (remote["requests"], remote["bytes"]) == (pictures, size)
        stats = json.loads(stats)
        assert int(stats["object_store"]["requests"]) == after_first
        port = stats["metrics_port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        assert f"stoker_object_store_requests_total {after_first}" in metrics, metrics[-2000:]
        session = f'session="{ld._session.id}"'
        assert f"stoker_session_remote_requests_total{{{session}}} {pictures}" in metrics
        per_epoch = sorted((int(ago), int(n)) for ago, n in re.findall(
            r'stoker_session_epoch_remote_requests\{' + session + r',epochs_ago="(\d+)"\} (\d+)',
            metrics))
        # Oldest (epoch 0) last: one GET per picture, then none.
        assert len(per_epoch) >= 2 and per_epoch[-1] == (len(per_epoch) - 1, pictures)
        assert all(n == 0 for _, n in per_epoch[:-1]), per_epoch
    finally:
        d.stop()


def _stats(d):
    return json.loads(subprocess.run([STOKERCTL, "--socket", d.socket, "stats", "--json"],
                                     capture_output=True, text=True, check=True).stdout)


def _sent(d):
    """Requests the daemon sent, less repeats (a retry is not a request of
    its own)."""
    store = _stats(d)["object_store"]
    return int(store["requests"]) - int(store.get("retries", 0))


def test_the_next_session_takes_the_kept_listing(bucket, dataset, trainer_env, tmp_path):
    flags = ["--object-store-endpoints", bucket, "--l2-path", str(tmp_path / "l2")]
    d = Daemon(extra=flags)
    try:
        want = batches(stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS))
        pictures = sum(len(y) for _, y in want)
    finally:
        d.stop()  # Its queued L2 writes are written before it exits.
    # A daemon restarted on the same L2 finds the pictures and the listing.
    d = Daemon(extra=flags)
    try:
        l2 = [t for t in _stats(d)["tiers"] if t["tier"] == "l2"][0]
        assert int(l2.get("entries", 0)) == pictures + 1, l2
        before = _sent(d)
        got = batches(stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS))
        assert len(got) == len(want)
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy)
        # Its own proof for each picture (the cached bytes are served after
        # it) and for the listing: one request.
        assert _sent(d) - before == pictures + 1
        # Asked to list again: the classes, the folder's page listed flat,
        # and the pictures' proofs.
        before = _sent(d)
        again = batches(stoker.Loader({"s3": {"url": "s3://photos/train/", "refresh": True}},
                                      socket=d.socket, **ARGS))
        assert len(again) == len(want)
        assert _sent(d) - before == pictures + 2
    finally:
        d.stop()


def test_a_folder_past_its_first_window_streams_the_batches_of_the_kept_and_flat_listings(
        bucket, trainer_env, tmp_path):
    """20 pictures a class, listed class by class (as a folder too large
    to list flat is): a session's opening begins once each class's first 16
    are listed (one page of 16 keys each), the rest listed as it serves;
    its numbering, in windows, is that of the next session, which takes
    the kept listing whole, and that of a session listing it flat: the
    same batches in two shuffled epochs."""
    from conftest import _generated
    from test_resume import checksum_epochs
    folder = _generated("stoker-pywide-", "--classes", "3", "--per_class", "20",
                        "--min_side", "60", "--max_side", "90", "--seed", "9")
    flags = ["--object-store-endpoints", bucket, "--l2-path", str(tmp_path / "l2"),
             "--object-store-flat-listing", "0"]
    args = dict(batch_size=4, transform="train", shuffle=True, image_size=32, seed=3,
                pixel_cache=None)
    try:
        for dirpath, _, names in os.walk(folder):
            for name in names:
                with open(os.path.join(dirpath, name), "rb") as f:
                    s3_server.put_object(bucket, "photos/wide/" + os.path.relpath(
                        os.path.join(dirpath, name), folder), f.read())

        def read(flags):
            """Two epochs' checksums, and the requests they took."""
            d = Daemon(extra=flags)
            try:
                before = _sent(d)
                got = checksum_epochs(stoker.Loader("s3://photos/wide/", socket=d.socket,
                                                    **args), 2)
                return got, _sent(d) - before
            finally:
                d.stop()  # Its queued L2 writes (the listing) are written first.
        streamed, sent = read(flags)
        # The classes, each class's first 16 keys, then the rest of each; a
        # GET per picture (the second epoch from the caches).
        assert sent == 1 + 3 + 3 + 60
        kept, sent = read(flags)
        # The listing's proof, and each picture's (cached, proven first).
        assert sent == 1 + 60
        assert kept == streamed and streamed[1] == 2 * 60
        # Listed flat (the daemon's default for a folder this small): the
        # classes and one page, and the same batches.
        assert read(["--object-store-endpoints", bucket]) == (streamed, 2 + 60)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_refusals_say_why(bucket, trainer_env):
    # A daemon that reaches no object store.
    d = Daemon()
    try:
        with pytest.raises(stoker.StokerError, match="--object-store-endpoints"):
            batches(stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS))
    finally:
        d.stop()
    # An endpoint the operator did not list (the same server by another name).
    d = Daemon(extra=["--object-store-endpoints", bucket])
    try:
        trainer_env.setenv("AWS_ENDPOINT_URL", bucket.replace("127.0.0.1", "localhost"))
        with pytest.raises(stoker.StokerError, match="not one this daemon may reach"):
            batches(stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS))
        # No credentials anywhere.
        trainer_env.setenv("AWS_ENDPOINT_URL", bucket)
        trainer_env.delenv("AWS_ACCESS_KEY_ID")
        trainer_env.delenv("AWS_SECRET_ACCESS_KEY")
        with pytest.raises(stoker.StokerError, match="brought no object store credentials"):
            batches(stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS))
        # A bucket name S3 would refuse.
        trainer_env.setenv("AWS_ACCESS_KEY_ID", "AKIATRAINER")
        trainer_env.setenv("AWS_SECRET_ACCESS_KEY", "trainer-secret")
        with pytest.raises(stoker.StokerError, match="bucket name"):
            batches(stoker.Loader("s3://Photos_Bad/train/", socket=d.socket, **ARGS))
    finally:
        d.stop()


@pytest.fixture(scope="module")
def shards(bucket, dataset, tmp_path_factory):
    """The session dataset's pictures as local shards of 5, and the same
    shards under s3://photos/shards/: (local folder, shard names)."""
    from test_webdataset import pictures, write_shards
    local = tmp_path_factory.mktemp("shards")
    write_shards(str(local), pictures(dataset), per_shard=5)
    names = sorted(os.listdir(local))
    for name in names:
        with open(local / name, "rb") as f:
            s3_server.put_object(bucket, f"photos/shards/{name}", f.read())
    return local, names


def test_shards_in_a_bucket_read_as_the_local_shards(bucket, shards, trainer_env, tmp_path):
    local, names = shards
    flags = ["--object-store-endpoints", bucket, "--l2-path", str(tmp_path / "l2")]
    url = f"s3://photos/shards/train-{{000000..{len(names) - 1:06d}}}.tar"
    d = Daemon(extra=flags)
    try:
        want = batches(stoker.Loader(str(local), socket=d.socket, **ARGS))
        before = _sent(d)
        ld = stoker.Loader(url, socket=d.socket, **ARGS)
        got = batches(ld)
        assert len(got) == len(want) and len(got) > 0
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy)
        # The listing and one GET per shard (each under a block), read
        # whole while indexing it; its pictures were kept then, so the
        # epoch read none of them again.
        assert _sent(d) - before == 1 + len(names)
        again = batches(ld)
        assert all(torch.equal(x, wx) for (x, _), (wx, _) in zip(again, want))
        assert _sent(d) - before == 1 + len(names), "epoch 2 is read from the caches"
        # The session counts what opening read for its first epoch.
        shard_bytes = sum(os.path.getsize(local / name) for name in names)
        remote = ld.stats()["remote"]
        assert remote["epochs"][0] == {"requests": len(names), "bytes": shard_bytes}, remote
        assert remote["epochs"][1] == {"requests": 0, "bytes": 0}, remote
    finally:
        d.stop()  # Its queued L2 writes are written before it exits.
    # Restarted on the same L2: the kept indexes, and the pictures there;
    # each shard proven by one read of its own.
    d = Daemon(extra=flags)
    try:
        before = _sent(d)
        ld = stoker.Loader(url, socket=d.socket, **ARGS)
        got = batches(ld)
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy)
        # The listing and a HEAD per shard (its proof); no picture read,
        # and no shard but the first block of the first, asked for beside
        # the listing before its kept index was found (that shard, whole).
        assert _sent(d) - before == 1 + len(names) + 1
        assert ld.stats()["remote"]["epochs"][0] == {
            "requests": 1, "bytes": os.path.getsize(local / names[0])}
    finally:
        d.stop()


def test_caption_shards_in_a_bucket_yield_the_local_captions(bucket, dataset, trainer_env,
                                                             tmp_path):
    """Image-caption shards (.jpg, .txt, .json per key) under
    s3://photos/captions/: the batches of the same local shards, captions
    and metadata str per sample; each member was read with its shard as it
    was indexed: the captions cost no request over the pictures alone."""
    from test_webdataset import CAPTION_ARGS, CAPTION_FIELDS, caption_shards
    local, captions, metas = caption_shards(dataset, tmp_path, per_shard=4)
    names = sorted(os.listdir(local))
    for name in names:
        with open(local / name, "rb") as f:
            s3_server.put_object(bucket, f"photos/captions/{name}", f.read())
    d = Daemon(extra=["--object-store-endpoints", bucket, "--l2-path", str(tmp_path / "l2")])
    try:
        args = dict(CAPTION_ARGS, fields=CAPTION_FIELDS, socket=d.socket)
        want = list(stoker.Loader(str(local), **args))
        before = _sent(d)
        alone_args = dict(args, fields=CAPTION_FIELDS[:1])
        pictures = list(stoker.Loader("s3://photos/captions/", **alone_args))
        alone = _sent(d) - before
        before = _sent(d)
        got = list(stoker.Loader("s3://photos/captions/", **args))
        assert [c for b in got for c in b["caption"]] == captions
        assert [m for b in got for m in b["meta"]] == metas
        for b, w in zip(got, want, strict=True):
            assert torch.equal(b["image"], w["image"])
            assert (b["caption"], b["meta"]) == (w["caption"], w["meta"])
        assert all(torch.equal(p["image"], b["image"])
                   for p, b in zip(pictures, got, strict=True))
        # The listing and each shard, read again: a kept index holds the
        # members it was made for.
        assert alone >= 1 + len(names) and _sent(d) - before == alone
    finally:
        d.stop()


@pytest.mark.parametrize("url", ["s3://photos/train/", "s3://photos/shards/"])
def test_faults_and_a_daemon_restart_change_no_batch(url, bucket, dataset, shards, trainer_env):
    """Through a proxy answering its first 3 requests and 5 % of the others
    503 SlowDown and resetting 2 % (seeded), a daemon killed and restarted
    mid-epoch: the Loader goes on in a new session, sending its credentials
    again, and its two epochs are those of the same pictures read without
    faults: for the folder, from local disk; for the shards, from the store
    (shards in a store are shuffled in windows of 1, 2, 4 and 8 shards
    first in the first epoch, local ones in windows of 16)."""
    from test_resume import Restarter, checksum_epochs, start
    local = {"s3://photos/train/": dataset, "s3://photos/shards/": url}[url]
    proxy = subprocess.Popen(
        [PROXY, f"--upstream_port={bucket.rsplit(':', 1)[1]}", "--fail_first=3",
         "--slow_down=0.05", "--reset=0.02"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    folder = tempfile.mkdtemp(prefix="stoker-s3-resume-")
    try:
        endpoint = proxy.stdout.readline().strip()
        flags = ["--object-store-endpoints", endpoint]
        sock = os.path.join(folder, "s.sock")
        prefix = f"stoker-s3-resume{os.getpid()}."
        args = dict(batch_size=2, transform="train", shuffle=True, image_size=48, seed=21,
                    socket=sock, starvation_threshold=1.0, pixel_cache=None)

        # Its own daemon (the restarter sees one session), the store direct.
        reference = Daemon(extra=["--object-store-endpoints", bucket])
        trainer_env.setenv("AWS_ENDPOINT_URL", bucket)
        try:
            want = checksum_epochs(stoker.Loader(local, **dict(args, socket=reference.socket)), 2)
        finally:
            reference.stop()
        trainer_env.setenv("AWS_ENDPOINT_URL", endpoint)
        proc = start(sock, prefix, flags)
        restart = Restarter(sock, prefix, proc, extra=flags)
        ld = stoker.Loader(url, **args)
        got = checksum_epochs(ld, 2, restart)
        reconnects = ld._session.reconnects
        ld.close()
        restart.finish()
        assert got == want and got[1] > 0
        assert reconnects == 1
    finally:
        proxy.stdin.close()
        faults = proxy.stderr.read()
        proxy.wait()
        shutil.rmtree(folder, ignore_errors=True)
    # The proxy's tally: it did refuse requests.
    m = re.search(r"(\d+) requests, (\d+) slow-downs, (\d+) resets", faults)
    assert m and int(m.group(2)) >= 3, faults


def test_manifests_name_objects_and_shards(bucket, dataset, shards, trainer_env, tmp_path):
    """A manifest, local (read as the trainer) or in the bucket, names the
    objects a session reads, in its order and with its labels: the batches
    of the same manifest read locally by the `list` source. One of .tar
    keys names shards, in its order: the batches of those local shards."""
    lines = []
    classes = sorted(c for c in os.listdir(dataset) if os.path.isdir(os.path.join(dataset, c)))
    for label, c in enumerate(classes):
        lines += [f"{c}/{f}\t{2 * label + 1}" for f in sorted(os.listdir(os.path.join(dataset, c)))]
    text = "# not the listing's order\n" + "\n".join(reversed(lines)) + "\n"
    manifest = tmp_path / "lists" / "train.tsv"
    manifest.parent.mkdir()
    manifest.write_text(text)
    s3_server.put_object(bucket, "photos/lists/train.tsv", text.encode())
    local_shards, names = shards
    order = list(reversed(names))
    s3_server.put_object(bucket, "photos/lists/shards.txt",
                         "".join(f"shards/{n}\n" for n in order).encode())
    d = Daemon(extra=["--object-store-endpoints", bucket])
    try:
        want = batches(stoker.Loader({"list": {"path": manifest, "root": dataset}},
                                     socket=d.socket, **ARGS))
        assert len(want) > 1 and int(want[0][1][0]) == 2 * (len(classes) - 1) + 1
        for where in (manifest, "s3://photos/lists/train.tsv"):
            got = batches(stoker.Loader({"s3": {"url": "s3://photos/train/", "manifest": where}},
                                        socket=d.socket, **ARGS))
            assert len(got) == len(want), where
            for (x, y), (wx, wy) in zip(got, want):
                assert torch.equal(x, wx) and torch.equal(y, wy), where
        want = []
        for n in order:
            want += batches(stoker.Loader(str(local_shards / n), socket=d.socket,
                                          **dict(ARGS, batch_size=1)))
        got = batches(stoker.Loader(
            {"s3": {"url": "s3://photos/", "manifest": "s3://photos/lists/shards.txt"}},
            socket=d.socket, **dict(ARGS, batch_size=1)))
        assert len(got) == len(want) > 0
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy)
        # A manifest's key the bucket does not hold: NOT_FOUND naming it.
        s3_server.put_object(bucket, "photos/lists/bad.tsv", b"no/such.jpg\t0\n")
        with pytest.raises(stoker.StokerError) as e:
            batches(stoker.Loader({"s3": {"url": "s3://photos/train/",
                                          "manifest": "s3://photos/lists/bad.tsv"}},
                                  socket=d.socket, **ARGS))
        assert e.value.code == "NOT_FOUND" and "s3://photos/train/no/such.jpg" in e.value.message
    finally:
        d.stop()


def test_a_long_opening_shows_its_progress(bucket, shards, trainer_env, capsys, monkeypatch):
    """Behind a proxy taking 1.5 s per request, opening the shards takes
    seconds: the Loader shows the daemon's summary of it meanwhile (from
    GetStats)."""
    from stoker import _opening
    monkeypatch.setattr(_opening, "EVERY", 0.1)
    _, names = shards
    proxy = subprocess.Popen(
        [PROXY, f"--upstream_port={bucket.rsplit(':', 1)[1]}", "--latency_ms=1500"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        endpoint = proxy.stdout.readline().strip()
        trainer_env.setenv("AWS_ENDPOINT_URL", endpoint)
        d = Daemon(extra=["--object-store-endpoints", endpoint])
        try:
            ld = stoker.Loader("s3://photos/shards/", socket=d.socket, **ARGS)
            assert len(batches(ld)) > 0
            shown = capsys.readouterr().err.splitlines()
            lines = [l for l in shown if l.startswith("stoker: opening s3://photos/shards/: ")]
            assert lines, shown
            # The listing takes 1.5 s, then every shard as long: the
            # last lines count the shards.
            assert f"of {len(names)} shards" in lines[-1], lines
        finally:
            d.stop()
    finally:
        proxy.stdin.close()
        proxy.wait()


def test_a_streamed_opening_knows_its_length_and_a_later_shards_error_ends_the_pass(
        bucket, shards, trainer_env):
    """The Loader takes a streamed opening: len() waits for the indexing to
    end; a shard past the first windows that lies about a member's size is
    the pass's error, naming it, after the batches of the windows before."""
    local, names = shards
    assert len(names) >= 3, "shards 1 and 2 are the second window"
    for name in names:
        with open(local / name, "rb") as f:
            data = bytearray(f.read())
        if name == names[2]:  # Its first member runs past the shard's end.
            data[124:136] = b"%011o\0" % (1 << 30)
            data[148:156] = b" " * 8
            data[148:155] = b"%06o\0" % (sum(data[:512]) & 0o777777)
        s3_server.put_object(bucket, f"photos/bad/{name}", bytes(data))
    d = Daemon(extra=["--object-store-endpoints", bucket])
    try:
        ld = stoker.Loader("s3://photos/shards/", socket=d.socket, **ARGS)
        local_len = len(stoker.Loader(str(local), socket=d.socket, **ARGS))
        assert len(ld) == local_len  # Waits for the opening to end.
        assert len(batches(ld)) == local_len
        bad = stoker.Loader("s3://photos/bad/", socket=d.socket, **ARGS)
        got = 0
        with pytest.raises(stoker.StokerError) as e:
            for _ in bad:
                got += 1
        assert e.value.code == "DATA_LOSS", e.value
        assert f"s3://photos/bad/{names[2]}" in e.value.message, e.value
        assert got == 5 // ARGS["batch_size"], "the first window's batch, then the error"
    finally:
        d.stop()
