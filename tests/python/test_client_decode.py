"""Client decode (Loader decode_device=): the batches a client renders from
the JPEG bytes and geometry the daemon hands over match the daemon's own
within rounding, for every JPEG layout, with the same labels and order; the
split between daemon and client keeps the batches deterministic."""

import os
import shutil
import tempfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")

import stoker  # noqa: E402
from stoker.client_decode import HybridSplit  # noqa: E402

from layouts import DAEMON_ONLY, LAYOUTS, write_folder  # noqa: E402

# This process decodes every JPEG it can (on its CPU: no GPU needed).
CLIENT_ONLY = stoker.ClientDecode("cpu", cpu_share=0)


@pytest.fixture(scope="module")
def layouts(dataset):
    """3 photos per layout, re-encoded from the suite's photo-like JPEGs."""
    root = tempfile.mkdtemp(prefix="stoker-layouts-")
    photos = sorted(os.path.join(d, f) for d, _, fs in os.walk(dataset) for f in fs)
    write_folder(root, [Image.open(p).convert("RGB") for p in photos[:3]])
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _loader(root, daemon, **kw):
    args = dict(batch_size=5, shuffle=True, image_size=64, socket=daemon.socket, seed=7,
                decode="full", **({} if "fields" in kw else {"transform": "train"}))
    args.update(kw)
    return stoker.Loader(root, **args)


def _epochs(loader, n=2):
    out = []
    for _ in range(n):
        out += [(x.clone(), y.clone()) for x, y in loader]
    return out


def _psnr(a, b):
    mse = ((a.double() - b.double()) ** 2).mean().item()
    return float("inf") if mse == 0 else 10 * torch.log10(torch.tensor(255.0 ** 2 / mse)).item()


@pytest.mark.parametrize("transform", ["train", "val"])
def test_every_layout_matches_the_daemons_pixels(layouts, daemon, transform):
    ref = _epochs(_loader(layouts, daemon, transform=transform))
    client = _loader(layouts, daemon, transform=transform, client_decode=CLIENT_ONLY)
    got = _epochs(client)
    assert len(got) == len(ref) == 2 * 5  # 21 samples: 5 batches an epoch.
    per_layout = {k: ([], []) for k in range(len(LAYOUTS))}
    for (a, la), (b, lb) in zip(ref, got):
        assert torch.equal(la, lb)
        assert b.dtype == torch.uint8 and b.shape == a.shape
        for i, label in enumerate(la.tolist()):
            per_layout[label][0].append(a[i])
            per_layout[label][1].append(b[i])
    for k, layout in enumerate(LAYOUTS):
        a, b = torch.stack(per_layout[k][0]), torch.stack(per_layout[k][1])
        diff = (a.int() - b.int()).abs()
        if layout in DAEMON_ONLY:
            assert torch.equal(a, b), layout
        else:  # Float weights against PIL's fixed-point ones.
            assert diff.max().item() <= 1, layout
            assert diff.double().mean().item() < 0.01, layout
            assert _psnr(a, b) > 60, layout
    stats = client.stats()["client_decode"]
    assert stats["samples_client_decoded"] == 2 * 5 * 3  # 5 layouts x 3, 2 epochs.
    assert stats["cpu_share"] == 0.0 and stats["fixed"]


def test_float_output_and_custom_pipelines(layouts, daemon):
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    ref = _epochs(_loader(layouts, daemon, dtype="float32", mean=mean, std=std), 1)
    got = _epochs(_loader(layouts, daemon, dtype="float32", mean=mean, std=std,
                          client_decode=CLIENT_ONLY), 1)
    for (a, _), (b, _) in zip(ref, got):
        assert b.dtype == torch.float32 and b.shape == a.shape and a.shape[1:] == (3, 64, 64)
        assert (a - b).abs().max().item() <= 1 / (255 * 0.2) + 1e-5
    # bfloat16: the client's float32 values rounded as torch rounds them.
    bf = _epochs(_loader(layouts, daemon, dtype="bfloat16", mean=mean, std=std,
                         client_decode=CLIENT_ONLY), 1)
    for (a, _), (b, _) in zip(got, bf):
        assert b.dtype == torch.bfloat16
        assert torch.equal(b.view(torch.int16), a.to(torch.bfloat16).view(torch.int16))
    # Letterbox padding, bicubic, channels first.
    fields = [stoker.image(48, 48, chw=True), stoker.label()]
    pipeline = [stoker.letterbox(48, fill=114, interpolation="bicubic"), stoker.flip()]
    kw = dict(fields=fields, pipeline=pipeline, image_size=None)
    ref = [b["image"].clone() for b in _loader(layouts, daemon, **kw)]
    got = [b["image"].clone() for b in _loader(layouts, daemon, client_decode=CLIENT_ONLY, **kw)]
    a, b = torch.cat(ref), torch.cat(got)
    assert a.shape == b.shape == (21, 3, 48, 48)
    assert (a == 114).sum().item() > 0  # Padded rows or columns.
    diff = (a.int() - b.int()).abs()
    assert diff.double().mean().item() < 0.05
    assert _psnr(a, b) > 45


def test_a_fixed_split_is_deterministic(layouts, daemon):
    ref = _epochs(_loader(layouts, daemon))
    first = _loader(layouts, daemon, client_decode=stoker.ClientDecode("cpu", 0.4))
    runs = [_epochs(first),
            _epochs(_loader(layouts, daemon, client_decode=stoker.ClientDecode("cpu", 0.4)))]
    for (a, la), (b, lb), (c, lc) in zip(ref, *runs):
        assert torch.equal(la, lb) and torch.equal(lb, lc)
        assert torch.equal(b, c)  # The same samples decoded on each side.
        assert (a.int() - b.int()).abs().max().item() <= 1
    stats = first.stats()["client_decode"]
    # 2 of each batch of 5 are the daemon's (round(0.4 x 5)), the last
    # batch of 1 too; CMYK and PNG always.
    assert 0 < stats["samples_client_decoded"] < 2 * 15


def test_the_automatic_split_follows_measured_rates(layouts, daemon):
    loader = _loader(layouts, daemon, client_decode=stoker.ClientDecode("cpu"), batch_size=3)
    _epochs(loader, 3)
    stats = loader.stats()["client_decode"]
    assert not stats["fixed"]
    assert stats["client_rate"] > 0 and stats["daemon_rate"] > 0
    # The share balances the rates it was last set from (not the first
    # guess, 0.5), the client's weighed by where the loop waited, and the
    # ring header says so.
    daemon_rate, client_rate = stats["balanced_rates"]
    assert 0 < stats["client_weight"] <= 1
    floor = HybridSplit.WEIGHT_STEP ** HybridSplit.FLOOR
    if stats["client_weight"] == pytest.approx(floor):  # All the daemon's.
        assert stats["cpu_share"] == 1.0
    else:
        assert stats["cpu_share"] == pytest.approx(daemon_rate / (daemon_rate + client_rate))
        assert 0 < stats["cpu_share"] < 1
    assert loader._session.daemon_decode()[3] == pytest.approx(stats["cpu_share"], abs=1e-4)


class _FakeSession:
    """daemon_decode()'s counters for HybridSplit: 100 samples per second
    of decode time on 2 threads, a batch of 10 each call."""

    def __init__(self):
        self.samples, self.share = 0, None

    def daemon_decode(self):
        self.samples += 10
        return (self.samples, self.samples * 10_000_000, 2, self.share)

    def set_cpu_share(self, share):
        self.share = share


def _wait_for(split, side, seconds):
    split.waits[side] += seconds
    split.observe(10, 0.05)  # The client: 200 samples/s.
    split.observe(10, 0.05)


def test_the_split_moves_away_from_the_side_the_loop_waits_for():
    split = HybridSplit(_FakeSession())
    _wait_for(split, "client", 0)  # No waits: the rates alone.
    assert split.share == pytest.approx(200 / (200 + 200))
    shares = []
    for _ in range(8):  # The loop waits for the client: the daemon takes more.
        _wait_for(split, "client", 100)
        shares.append(split.share)
    assert shares == sorted(shares) and 0.98 < shares[-1] < 1
    assert split.session.share == shares[-1]
    assert split.client_weight == pytest.approx(HybridSplit.WEIGHT_STEP ** 8)
    for _ in range(4):  # At the floor, all the daemon's.
        _wait_for(split, "client", 100)
    assert split.client_weight == pytest.approx(HybridSplit.WEIGHT_STEP ** HybridSplit.FLOOR)
    assert split.share == 1.0 and split.session.share == 1.0
    for _ in range(HybridSplit.LEAVE_FLOOR - 1):  # One wait is not enough to leave it.
        _wait_for(split, "daemon", 100)
        assert split.share == 1.0
    _wait_for(split, "client", 100)  # And a wait for the client starts the count again.
    for _ in range(HybridSplit.LEAVE_FLOOR - 1):
        _wait_for(split, "daemon", 100)
    assert split.share == 1.0
    _wait_for(split, "daemon", 100)  # LEAVE_FLOOR in a row: it leaves.
    assert split.client_weight == pytest.approx(HybridSplit.WEIGHT_STEP ** (HybridSplit.FLOOR - 1))
    assert split.share < 1.0
    for _ in range(2):  # Off the floor, each wait for the daemon counts.
        _wait_for(split, "daemon", 100)
    assert split.client_weight == pytest.approx(HybridSplit.WEIGHT_STEP ** (HybridSplit.FLOOR - 3))
    assert split.share < shares[-1]
    for _ in range(40):  # Never more than the rates alone.
        _wait_for(split, "daemon", 100)
    assert split.client_weight == 1.0 and split.share == pytest.approx(0.5)
    _wait_for(split, "client", 0)  # Waits within the slack change nothing.
    assert split.client_weight == 1.0


def test_encoded_fields_are_the_files(layouts, daemon):
    loader = _loader(layouts, daemon, fields=[stoker.encoded(1 << 20, name="raw"),
                                              stoker.label()], pipeline=None,
                     image_size=None, shuffle=False)
    sizes = []
    for batch in loader:
        raw = batch["raw"]
        assert raw.dtype == torch.uint8 and raw.shape[1] == 4 + (1 << 20)
        for row in raw:
            n = int(row[:4].contiguous().view(torch.int32))
            sizes.append(n)
            assert bytes(row[4:6].tolist()) in (b"\xff\xd8", b"\x89P")  # JPEG, PNG
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(layouts) for f in fs)
    assert sizes == [os.path.getsize(f) for f in files]


def test_bad_arguments_are_refused(layouts, daemon):
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch.cuda.is_available"):
            _loader(layouts, daemon, client_decode=stoker.ClientDecode("cuda"))
    # The daemon's rules, in its words, before a session is opened.
    with pytest.raises(ValueError, match="client_decode and pixel_cache exclude each other"):
        _loader(layouts, daemon, client_decode=stoker.ClientDecode("cpu"),
                pixel_cache=stoker.PixelCache())
    with pytest.raises(ValueError, match=r"client_decode.cpu_share 1.5 must be in 0..1"):
        _loader(layouts, daemon, client_decode=stoker.ClientDecode("cpu", cpu_share=1.5))
    with pytest.raises(ValueError, match=r"client_decode\.max_bytes 10 must be in 1024\.\."):
        _loader(layouts, daemon, client_decode=stoker.ClientDecode("cpu", max_bytes=10))
    # The client's own.
    with pytest.raises(ValueError, match="ClientDecode.device 'tpu' is not a torch device"):
        _loader(layouts, daemon, client_decode=stoker.ClientDecode("tpu"))
    with pytest.raises(TypeError, match="ClientDecode.cpu_share must be a number"):
        stoker.ClientDecode("cpu", cpu_share="half")
    with pytest.raises(TypeError, match="client_decode must be None or a stoker.ClientDecode"):
        _loader(layouts, daemon, client_decode="cpu")
    with pytest.raises(TypeError, match=r"decode_device= is now client_decode="):
        _loader(layouts, daemon, decode_device="cpu")
    with pytest.raises(TypeError, match=r"decode_max_bytes= is now client_decode="):
        _loader(layouts, daemon, decode_max_bytes=1 << 20)


def test_files_over_decode_max_bytes_stay_the_daemons(layouts, daemon):
    sizes = sorted(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(layouts)
                   for f in fs if f.endswith(".jpg") and not d.endswith("cmyk"))
    limit = sizes[len(sizes) // 2]  # About half the JPEGs are larger.
    loader = _loader(layouts, daemon, client_decode=stoker.ClientDecode(
        "cpu", cpu_share=0, max_bytes=max(1024, limit)))
    _epochs(loader, 1)
    handed = loader.stats()["client_decode"]["samples_client_decoded"]
    fits = sum(1 for s in sizes if s <= max(1024, limit))
    assert handed == fits and 0 < handed < len(sizes)


def test_stats_and_metrics_report_the_split(layouts, daemon):
    import subprocess
    import urllib.request
    from conftest import STOKERCTL
    from stoker._native import lib
    loader = _loader(layouts, daemon, client_decode=stoker.ClientDecode("cpu", cpu_share=0.25))
    batches = iter(loader)
    next(batches)  # The session is open and has handed samples over.
    out = subprocess.run([STOKERCTL, "--socket", daemon.socket, "stats"],
                         capture_output=True, text=True, check=True).stdout
    assert "client decode: the daemon decodes 25% of each batch" in out
    mine = [s for s in lib.Client(daemon.socket).stats()["sessions"]
            if s["session_id"] == loader._session.id][0]
    assert mine["cpu_share"] == 0.25 and int(mine["samples_client_decoded"]) > 0
    port = lib.Client(daemon.socket).stats()["metrics_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert f'stoker_session_cpu_share{{session="{loader._session.id}"}} 0.25' in text
    assert "stoker_session_samples_client_decoded_total" in text
    loader.close()


def test_pictures_rendered_in_chunks_equal_one_stack(layouts, daemon):
    whole = _loader(layouts, daemon, client_decode=CLIENT_ONLY)
    parts = _loader(layouts, daemon, client_decode=CLIENT_ONLY)
    len(parts)  # Opens the session and its decoder.
    parts._decoder.renderers[0].budget = 1  # One picture per stack.
    for (a, la), (b, lb) in zip(whole, parts):
        assert torch.equal(la, lb) and torch.equal(a, b)


def test_state_dict_counts_the_batches_handed_out(layouts, daemon):
    full = [(x.clone(), y.clone()) for x, y in _loader(layouts, daemon, client_decode=CLIENT_ONLY)]
    loader = _loader(layouts, daemon, client_decode=CLIENT_ONLY)
    for k, _ in enumerate(loader):
        if k == 1:
            break  # The next batch was already being decoded.
    state = loader.state_dict()
    assert (state["epoch"], state["consumed"]) == (0, 2 * loader.batch_size)
    resumed = _loader(layouts, daemon, client_decode=CLIENT_ONLY)
    resumed.load_state_dict(state)
    rest = [(x.clone(), y.clone()) for x, y in resumed]
    assert len(rest) == len(full) - 2
    for (a, la), (b, lb) in zip(full[2:], rest):
        assert torch.equal(la, lb) and torch.equal(a, b)
    # Resumed with the daemon decoding: the same order (the order key
    # leaves the client's decoding out), pixels within rounding.
    daemons = _loader(layouts, daemon)
    daemons.load_state_dict(state)
    rest = [(x.clone(), y.clone()) for x, y in daemons]
    assert len(rest) == len(full) - 2
    for (a, la), (b, lb) in zip(full[2:], rest):
        assert torch.equal(la, lb) and _psnr(a, b) > 30


def test_a_daemon_restart_changes_nothing(layouts):
    import signal
    from test_resume import start
    folder = tempfile.mkdtemp(prefix="stoker-cd-resume-")
    sock = os.path.join(folder, "s.sock")
    prefix = f"stoker-cdresume{os.getpid()}."
    procs = []
    try:
        procs.append(start(sock, prefix))
        kw = dict(batch_size=3, transform="train", shuffle=True, image_size=48, seed=9,
                  socket=sock, decode="full",
                  client_decode=stoker.ClientDecode("cpu", 0.4))
        want = _epochs(stoker.Loader(layouts, **kw), 3)
        loader = stoker.Loader(layouts, **kw)
        len(loader)  # Open the session, then ask for all on the daemon.
        loader._session.set_cpu_share(1.0)
        got = []
        for _ in range(3):
            for x, y in loader:
                got.append((x.clone(), y.clone()))
                if len(got) == 4:  # Mid-epoch: kill -9 and a new daemon.
                    procs[0].send_signal(signal.SIGKILL)
                    procs[0].wait()
                    procs.append(start(sock, prefix))
        reconnects = loader._session.reconnects
        share = loader._session.daemon_decode()[3]
        loader.close()
        assert reconnects == 1
        assert share == 1.0  # Set again on the new daemon's ring.
        assert len(got) == len(want) == 21
        for (a, la), (b, lb) in zip(want, got):
            assert torch.equal(la, lb)
            assert (a.int() - b.int()).abs().max().item() <= 1  # Either side's pixels.
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=20)
        shutil.rmtree(folder, ignore_errors=True)


def test_damaged_jpegs(layouts, daemon, tmp_path):
    good = open(os.path.join(layouts, "2_420", "0.jpg"), "rb").read()
    bad = bytearray(good)
    sos = bad.find(b"\xff\xda")
    bad[sos + 6] = 0x33  # The first component's Huffman tables: undefined.
    for name, folder in (("damaged", "a"), ("raise", "a")):
        os.makedirs(tmp_path / name / folder)
        shutil.copy(os.path.join(layouts, "2_420", "1.jpg"), tmp_path / name / folder)
        (tmp_path / name / folder / "huff.jpg").write_bytes(bytes(bad))
    # Cut short: the daemon decodes it (no end-of-image marker), fails and
    # replaces it; a header-valid file the client cannot decode is zeros.
    (tmp_path / "damaged" / "a" / "cut.jpg").write_bytes(good[:len(good) // 2])
    loader = _loader(str(tmp_path / "damaged"), daemon, client_decode=CLIENT_ONLY,
                     batch_size=3, shuffle=False)
    with pytest.warns(stoker.SampleErrorWarning) as caught:
        (images, labels), = list(loader)
    words = [str(w.message) for w in caught]
    assert any("cut.jpg" in w and "replaced" in w for w in words), words
    assert any("huff.jpg" in w and "decoded in this process" in w for w in words), words
    assert images.shape[0] == 3
    zero = [int(images[i].max()) == 0 for i in range(3)]
    assert zero == [False, False, True]  # Sorted: 1.jpg, cut.jpg (replaced), huff.jpg.
    raising = _loader(str(tmp_path / "raise"), daemon, client_decode=CLIENT_ONLY,
                      on_error="raise", shuffle=False)
    with pytest.raises(stoker.StokerError, match="DATA_LOSS.*huff.jpg"):
        list(raising)


def test_close_mid_epoch_waits_for_the_decode_in_flight(layouts, daemon):
    """The next batch is being decoded (on a GPU, copied out of the pinned
    ring) while this one trains: closing the Loader stops that work before
    the ring goes, and the abandoned iterator ends."""
    import threading

    def decoders():
        return [t for t in threading.enumerate() if t.name.startswith("stoker-decode")]

    # Only this Loader's threads: an earlier test's may still be ending.
    before = set(decoders())
    loader = _loader(layouts, daemon, client_decode=CLIENT_ONLY)
    batches = iter(loader)
    images, _ = next(batches)
    mine = [t for t in decoders() if t not in before]
    assert len(mine) == 1
    loader.close()
    assert not mine[0].is_alive()
    with pytest.raises(stoker.StokerError, match="stopped before its end"):
        next(batches)
    assert images.shape[0] == 5  # What was handed out stays readable.
    # A new iterator starts the epoch again, in a new session.
    again = []
    for x, _ in loader:
        assert len(loader) == 5  # Mid-pass: the pass goes on.
        again.append(x.clone())
    assert len(again) == 5 and torch.equal(again[0], images)
    assert not [t for t in decoders() if t not in before]
