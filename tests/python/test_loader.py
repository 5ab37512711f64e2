"""The Python Loader against a real stokerd: data equality with the C++
path, zero-copy, slot lifetime, resume, errors."""

import json
import shutil
import signal
import subprocess
import time
import warnings

import pytest

# These compare tensors; an interpreter without numpy/torch runs the rest of
# the suite (the memoryview path is covered in test_dist and test_embedded).
np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

import stoker
from stoker._native import lib
from conftest import STOKERCTL


def loader(daemon, dataset, **kw):
    args = dict(batch_size=5, transform="val", image_size=48, shuffle=False,
                socket=daemon.socket)
    args.update(kw)
    return stoker.Loader(dataset, **args)


def test_two_epochs_match_the_cpp_client(daemon, dataset):
    out = subprocess.run(
        [STOKERCTL, "--socket", daemon.socket, "read", "--dataset", dataset,
         "--batch-size", "5", "--transform", "train", "--size", "48",
         "--seed", "3", "--epochs", "2"], check=True, capture_output=True,
        text=True)
    cpp = json.loads(out.stdout)
    ld = loader(daemon, dataset, transform="train", shuffle=True, seed=3)
    assert len(ld) == 5  # ceil(24 / 5)
    checksum, samples, labels_by_index = lib.Checksum(), 0, {}
    for epoch in range(2):
        for b in ld.batches():
            assert b.epoch == epoch
            checksum.update(b.images)
            checksum.update(b.labels)
            checksum.update(b.status)
            samples += b.samples
            for i, lab in zip(b.indices, b.labels):
                labels_by_index[int(i)] = int(lab)
    assert checksum.hex == cpp["checksum"]
    assert samples == cpp["samples"] == 48
    # Sorted class folders: indices 0-7 are class 0, 8-15 class 1, ...
    assert labels_by_index == {i: i // 8 for i in range(24)}


def test_iteration_yields_uint8_nhwc_views_on_the_ring(daemon, dataset):
    ld = loader(daemon, dataset, ring_slots=4)
    pointers = set()
    for images, labels in ld:
        assert images.dtype == torch.uint8 and labels.dtype == torch.int64
        assert images.shape[1:] == (48, 48, 3)
        pointers.add(images.data_ptr())
    base_batch = next(iter(ld.batches()))
    base, size = base_batch.mapping_base, base_batch.mapping_size
    del base_batch
    # Every batch lay inside the mapped ring, cycling over its 4 slots: no
    # per-batch buffer was allocated.
    assert all(base <= p < base + size for p in pointers)
    assert len(pointers) <= 4


def test_held_batches_are_not_overwritten(daemon, dataset):
    ld = loader(daemon, dataset, ring_slots=6)
    it = iter(ld)
    held = [next(it)[0] for _ in range(3)]
    copies = [h.clone() for h in held]
    view = held[1][2:4]  # A view of a view keeps the slot too.
    del held[1]
    read = 0
    for _ in range(4):  # 20 more batches across epochs.
        for images, _ in ld:
            read += 1
            if read == 20:
                break
        if read == 20:
            break
    assert read == 20
    assert torch.equal(held[0], copies[0])
    assert torch.equal(held[1], copies[2])
    assert torch.equal(view, copies[1][2:4])


def test_resume_from_state_dict_gives_the_same_remaining_batches(daemon, dataset):
    a = loader(daemon, dataset, transform="train", shuffle=True, seed=9)
    for _ in a:
        pass
    it = iter(a)
    for _ in range(2):
        next(it)
    state = a.state_dict()
    assert state["epoch"] == 1 and state["consumed"] == 10
    rest_a = [(x.clone(), y.clone()) for x, y in it]
    b = loader(daemon, dataset, transform="train", shuffle=True, seed=9)
    b.load_state_dict(state)
    rest_b = [(x.clone(), y.clone()) for x, y in b]
    assert len(rest_a) == len(rest_b) == 3
    for (xa, ya), (xb, yb) in zip(rest_a, rest_b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    with pytest.raises(ValueError, match="seed"):
        loader(daemon, dataset, seed=1).load_state_dict(state)
    # The same seed but another pipeline: refused once the daemon names its order.
    other = loader(daemon, dataset, transform="val", shuffle=True, seed=9)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="another order"):
        next(iter(other))


def _steps(loaders, count=None):
    """Global steps of loaders read in lockstep (one per rank): per step the
    (index, image checksum) pairs of every rank's batch, as a set."""
    its = [ld.batches() for ld in loaders]
    steps = []
    while count is None or len(steps) < count:
        step = set()
        for it in its:
            b = next(it, None)
            if b is None:
                return steps
            for i, image in zip(b.indices, b.images):
                step.add((int(i), bytes(np.ascontiguousarray(image))))
        steps.append(step)
    return steps


def test_a_run_resumed_at_another_world_size_reads_the_same_steps(daemon, small_photos):
    # Global steps of 12 samples: 4 ranks of 3, or 6 ranks of 2, in epoch 1.
    def world(size, epoch=1):
        lds = [stoker.Loader(small_photos, batch_size=12 // size, transform="train",
                             image_size=16, seed=7, rank=r, world_size=size,
                             socket=daemon.socket, shuffle=True) for r in range(size)]
        for ld in lds:
            ld.set_epoch(epoch)
        return lds
    whole = _steps(world(4))
    assert len(whole) == 10 and len(set().union(*whole)) == 120
    stopped = world(4)
    first = _steps(stopped, 4)
    states = [ld.state_dict() for ld in stopped]
    assert all(s == states[0] for s in states)  # The same on every rank.
    assert states[0]["consumed"] == 48 and states[0]["epoch"] == 1
    for ld in stopped:
        ld.close()
    resumed = world(6, epoch=0)
    for ld in resumed:
        _load_as_a_checkpoint_does(ld, states[0])
    rest = _steps(resumed)
    assert first + rest == whole
    # The next epoch at the new world size reads from its start.
    assert len(_steps(resumed)) == 10
    for ld in resumed:
        ld.close()
    # Another exchange is another order: refused at the first batch.
    other = stoker.Loader(small_photos, batch_size=2, transform="train", image_size=16,
                          seed=7, rank=0, world_size=6, socket=daemon.socket, exchange=0,
                          shuffle=True)
    _load_as_a_checkpoint_does(other, states[0])
    with pytest.raises(ValueError, match="another order"):
        next(iter(other))


def _load_as_a_checkpoint_does(ld, saved):
    """Loads `saved` as torch.distributed.checkpoint loads a Stateful:
    into the keys of the new Loader's own state_dict(), which must be the
    saved state's (a key the new one lacks would be dropped: the order
    key's check with it)."""
    into = ld.state_dict()
    assert set(into) == set(saved) and into["order_key"] is None
    ld.load_state_dict({k: saved[k] for k in into})


def test_a_world_size_off_the_partitions_is_named_once(daemon, small_photos):
    # 120 samples: 6 partitions of 20. 3 ranks divide them; 4 do not.
    def first_batches(world):
        ld = stoker.Loader(small_photos, batch_size=2, transform="val", image_size=16,
                           rank=0, world_size=world, socket=daemon.socket, shuffle=True)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(2):
                next(iter(ld.batches()))
                ld.set_epoch(ld._epoch + 1)
        ld.close()
        return [str(w.message) for w in seen if "partitions" in str(w.message)]
    assert first_batches(3) == []
    said = first_batches(4)
    assert len(said) == 1 and "world_size 4 does not divide the order's 6 partitions" in said[0]


def test_a_state_taken_at_the_end_of_a_resumed_epoch_goes_on_into_the_next(
        daemon, small_photos):
    def make():
        return stoker.Loader(small_photos, batch_size=2, transform="val", image_size=16,
                             seed=3, rank=0, world_size=7, socket=daemon.socket, shuffle=True)
    ld = make()
    ld.load_state_dict({"epoch": 2, "consumed": 100, "seed": 3, "shuffle": True,
                        "drop_last": False})
    ld.set_epoch(2)  # The usual loop: the loaded epoch keeps its position.
    states = []
    for b in ld.batches():
        assert b.epoch == 2
        states.append(ld.state_dict())
    # 20 samples left over 7 ranks: 3 for rank 0, in batches of 2 and 1.
    assert [s["consumed"] for s in states] == [114, 120]
    assert states[-1]["samples"] == 120
    again = make()
    again.load_state_dict(states[-1])
    assert list(again.batches()) == []  # Nothing left of epoch 2.
    assert next(iter(again.batches())).epoch == 3
    # Another dataset's state: refused when the session names its size.
    other = make()
    other.load_state_dict(dict(states[-1], samples=121))
    with pytest.raises(ValueError, match="121 samples"):
        len(other)


def test_a_state_saved_before_consumed_resumes_at_its_count_and_says_so(daemon, dataset):
    ld = loader(daemon, dataset, shuffle=True, seed=9)
    with pytest.warns(UserWarning, match="same count of samples"):
        ld.load_state_dict({"epoch": 1, "batch": 2, "seed": 9, "batch_size": 5,
                            "rank": 0, "world_size": 1, "shuffle": True})
    assert ld.state_dict()["consumed"] == 10
    assert len(list(ld.batches())) == 3
    with pytest.raises(TypeError, match="batch_size"):
        ld.load_state_dict({"epoch": 1, "batch": 2, "batch_size": "5"})


def test_a_first_epoch_resumed_part_way_keeps_its_order_of_a_buckets_folder(daemon, dataset):
    # A world's default is the canonical first epoch; a state within the
    # first epoch keeps what it read, and one without it (older) read the
    # windows, and says the samples differ.
    def first(world, state=None):
        ld = loader(daemon, dataset, shuffle=True, seed=9, rank=0, world_size=world)
        if state is not None:
            ld.load_state_dict(dict(state, seed=9, shuffle=True))
        return ld.state_dict()["canonical_first_epoch"]

    assert (first(1), first(2)) == (False, True)
    assert first(1, {"epoch": 0, "consumed": 20, "canonical_first_epoch": True}) is True
    assert first(2, {"epoch": 0, "consumed": 20, "canonical_first_epoch": False}) is False
    # Nothing of the first epoch read, or a later epoch: this world's own.
    assert first(2, {"epoch": 0, "consumed": 0, "canonical_first_epoch": False}) is True
    assert first(2, {"epoch": 1, "consumed": 20, "canonical_first_epoch": False}) is True
    with pytest.warns(UserWarning, match="first epoch had another order"):
        assert first(2, {"epoch": 0, "consumed": 20}) is False
    with pytest.raises(TypeError, match="canonical_first_epoch"):
        first(1, {"epoch": 1, "consumed": 0, "canonical_first_epoch": 1})
    # A session opened before a state is loaded is not read on with the
    # other first epoch.
    state = {"epoch": 0, "consumed": 20, "seed": 9, "shuffle": True}
    for again, reused in ((True, True), (False, False)):
        ld = loader(daemon, dataset, shuffle=True, seed=9, rank=0, world_size=2)
        ld.load_state_dict(dict(state, canonical_first_epoch=True))
        len(ld)  # Opens the session.
        opened = ld._session
        ld.load_state_dict(dict(state, canonical_first_epoch=again))
        next(iter(ld.batches()))
        assert (ld._session is opened) == reused, again
        ld.close()


def test_set_epoch_selects_the_permutation(daemon, dataset):
    def labels_of(epoch):
        ld = loader(daemon, dataset, shuffle=True, seed=4)
        ld.set_epoch(epoch)
        return [int(i) for b in ld.batches() for i in b.indices]
    assert labels_of(3) == labels_of(3)
    assert labels_of(3) != labels_of(4)


def test_batches_are_named_fields(daemon, dataset):
    b = next(iter(loader(daemon, dataset).batches()))
    assert [(n, d, s) for n, d, s, _ in b.field_specs()] == [
        ("image", "uint8", (5, 48, 48, 3)), ("label", "int32", (5,))]
    fields = b.fields
    assert list(fields) == ["image", "label"]
    assert fields["image"].ctypes.data == b.images.ctypes.data
    assert list(fields["label"]) == list(b.labels) == [0] * 5
    with pytest.raises(KeyError, match="mask"):
        b.field("mask")


def test_spec_enums_by_short_name_and_errors_name_the_choices(daemon, dataset):
    client = lib.Client(daemon.socket)
    spec = {"dataset": {"folder": {"path": dataset}}, "batch_size": 4,
            "transform": "VAL", "image_size": 16, "dtype": "Float16"}
    s = client.open_session(spec)
    assert s.next().field_specs()[0][1:3] == ("float16", (4, 3, 16, 16))
    s.close()
    spec["on_error"] = "ignore"
    with pytest.raises(stoker.StokerError, match="on_error must be one of "
                       "replace, raise, zeros, got 'ignore'"):
        client.open_session(spec)


def test_numpy_interface(daemon, dataset):
    b = next(iter(loader(daemon, dataset).batches()))
    assert isinstance(b.images, np.ndarray) and b.images.dtype == np.uint8
    assert b.images.ctypes.data == b.data_ptr
    assert list(b.status) == [0] * b.samples


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size="8"), TypeError, "batch_size"),
    (dict(batch_size=True), TypeError, "batch_size"),
    (dict(transform="center"), ValueError, "transform"),
    (dict(image_size=-1), ValueError, "image_size"),
    (dict(rank=2, world_size=2), ValueError, "rank"),
    (dict(shuffle="yes"), TypeError, "shuffle"),
    (dict(dtype="float64"), ValueError, "dtype"),
    (dict(ring_slots=1000), ValueError, "ring_slots"),
    (dict(device="tpu"), ValueError, "device"),
    (dict(timeout=-1), ValueError, "timeout"),
    (dict(partitions=70000), ValueError, "partitions 70000 must be in 1..65536"),
    (dict(exchange=1.5), ValueError, "exchange 1.5 must be in 0..1"),
    (dict(exchange="0.1"), TypeError, "exchange"),
])
def test_bad_arguments_raise_before_any_rpc(dataset, kwargs, error, words):
    args = dict(batch_size=4, transform="train", socket="/nonexistent/stoker.sock")
    args.update(kwargs)
    with pytest.raises(error, match=words):
        stoker.Loader(dataset, **args)
    with pytest.raises(TypeError, match="dataset"):
        stoker.Loader(42, batch_size=4, transform="train", shuffle=True)


def test_datasets_are_named_by_the_library(daemon, dataset, tmp_path, monkeypatch):
    """A path is recognised by content then suffix in any case, a dict names
    one source, and relative paths are made absolute on this side; the
    Loader restates none of it."""
    h5py = pytest.importorskip("h5py")
    with open(tmp_path / "rows.NPY", "wb") as f:
        np.save(f, np.arange(24, dtype=np.float32).reshape(6, 4))
    monkeypatch.chdir(tmp_path)
    ld = stoker.Loader("rows.NPY", batch_size=4, shuffle=False, socket=daemon.socket,
                       fields=[stoker.array([4], "x")])
    assert ld._source == {"root_token": "", "npy": {
        "path": str(tmp_path / "rows.NPY"), "labels": ""}}
    assert [b["x"][:, 0].tolist() for b in ld] == [[0, 4, 8, 12], [16, 20]]
    assert lib.dataset_json(dataset)["folder"]["path"] == dataset
    assert lib.dataset_json(str(tmp_path / "m.tsv"))["folder"]  # missing: a folder
    (tmp_path / "m.tsv").write_text("a.jpg\t0\n")
    assert lib.dataset_json("m.tsv", "imgs")["list"] == {
        "path": str(tmp_path / "m.tsv"), "root": str(tmp_path / "imgs")}
    # NIfTI: a folder of volumes, a volume by content or name, a manifest
    # by its first file.
    (tmp_path / "vols").mkdir()
    (tmp_path / "vols" / "case1.NII.GZ").write_bytes(b"\x1f\x8b")
    (tmp_path / "scan").write_bytes(b"\x1f\x8b")
    (tmp_path / "pairs.tsv").write_text("# image, label\ncase1.nii.gz\tseg1.nii.gz\t1\n")
    for path in ("vols", "scan", "vols/case1.NII.GZ", "pairs.tsv"):
        assert lib.dataset_json(path)["nifti"]["path"] == str(tmp_path / path)
    # A folder of arrays whose names do not say (by NumPy's magic): npy,
    # each file a sample, read by the daemon by content too.
    (tmp_path / "parts").mkdir()
    for k in range(3):
        with open(tmp_path / "parts" / f"part{k}", "wb") as f:
            np.save(f, np.full((2, 3), k, np.float32))
    (tmp_path / "parts" / "README").write_text("three parts")
    ld = stoker.Loader("parts", batch_size=3, shuffle=False, socket=daemon.socket,
                       fields=[stoker.array([2, 3], "x")])
    assert ld._source["npy"]["path"] == str(tmp_path / "parts")
    assert [b["x"][:, 0, 0].tolist() for b in ld] == [[0, 1, 2]]
    ld.close()
    with h5py.File(tmp_path / "f.H5", "w") as f:
        f["x"] = np.zeros((2, 2), np.float32)
    (tmp_path / "store").mkdir()
    with h5py.File(tmp_path / "store" / "part0.H5", "w") as f:
        f["x"] = np.zeros((2, 2), np.float32)
    kinds = stoker.source_kinds()  # The schema's: "folder, ..., s3 or raw".
    one_of = ", ".join(kinds[:-1]) + " or " + kinds[-1]
    for bad, words in (("f.H5", "name the HDF5 dataset"), ("store", "holds HDF5 files"),
                       ({"tar": {"path": "x"}}, "one source: " + one_of),
                       ({"npy": {"path": "a"}, "hdf5": {"path": "b"}}, "one source"),
                       ({"folder": {"pth": "a"}}, "pth")):
        with pytest.raises(ValueError, match=words):
            stoker.Loader(bad, batch_size=4, socket=daemon.socket, transform="train", shuffle=True)
    with pytest.raises(ValueError, match="root applies to a manifest"):
        stoker.Loader(dataset, batch_size=4, transform="train", socket=daemon.socket,
                      root=str(tmp_path))


def test_the_daemons_rules_are_checked_when_the_loader_is_made(dataset, tmp_path):
    """The library applies the daemon's own checker: its words, with no
    daemon there, and nothing restated in Python."""
    gone = str(tmp_path / "no-daemon.sock")
    for kw, words in ((dict(batch_size=0), "batch_size 0 must be in 1..65536"),
                      (dict(image_size=5000), "image_size 5000 must be in 1..4096"),
                      (dict(rank=2, world_size=2), "rank 2 must be less than world_size 2"),
                      (dict(transform="test"), "transform must be one of val, train, got 'test'"),
                      (dict(decode="fast"), "decode must be one of auto, full, crop, scale_crop"),
                      (dict(dtype="int64"), "dtype of the preset's image must be uint8"),
                      (dict(mean=[0.5, 0.5]), "mean and std must each have 3 values"),
                      (dict(dtype="float32", mean=[123.7, 116.3, 103.5],
                            std=[58.4, 57.1, 57.4]), r"on the 0\.\.1 scale of pixels / 255"),
                      (dict(priority=17), "priority 17 must be in 1..16"),
                      (dict(ring_slots=300), "ring_slots 300 must be in 2..256"),
                      (dict(pipeline=[stoker.flip()]), "pipeline needs fields"),
                      (dict(fields=[stoker.image(8, 8)], image_size=8),
                       "fields/pipeline replace the preset"),
                      (dict(fields=[stoker.image(8, 8)], pipeline=[stoker.flip(fields=["mask"])]),
                       r"pipeline\[0\] \(flip\): no field named 'mask'")):
        preset = {} if "fields" in kw else {"transform": "train"}
        args = {"batch_size": 4, "socket": gone, **preset, **kw}
        with pytest.raises(ValueError, match=words):
            stoker.Loader(dataset, **args)
    # Python's own: types and the option objects.
    with pytest.raises(TypeError, match="batch_size must be an int"):
        stoker.Loader(dataset, batch_size="4", socket=gone, transform="train", shuffle=True)
    with pytest.raises(TypeError, match="placement must be None or a stoker.Placement"):
        stoker.Loader(dataset, batch_size=4, transform="train", socket=gone, placement=1)
    with pytest.raises(TypeError, match=r"numa_node= is now placement=stoker\.Placement"):
        stoker.Loader(dataset, batch_size=4, transform="train", socket=gone, numa_node=1)
    # The same checker straight from the library, on a whole spec.
    lib.check_spec({"dataset": {"folder": {"path": dataset}}, "batch_size": 4,
                    "transform": "val", "image_size": 32})
    with pytest.raises(stoker.StokerError) as e:
        lib.check_spec({"dataset": {"folder": {"path": dataset}}, "batch_size": 4})
    assert (e.value.code, e.value.message) == (
        "INVALID_ARGUMENT", "transform must be val or train (or give fields and a pipeline)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present")
def test_cuda_without_cuda_is_a_clear_error(dataset):
    with pytest.raises(ValueError, match="CUDA is not available"):
        stoker.Loader(dataset, batch_size=4, device="cuda", transform="train", shuffle=True)


def test_daemon_errors_carry_code_and_message(daemon, tmp_path):
    with pytest.raises(stoker.StokerError) as e:
        len(stoker.Loader(str(tmp_path / "missing"), batch_size=4,
                          socket=daemon.socket, transform="train", shuffle=True))
    assert e.value.code == "NOT_FOUND"
    assert str(tmp_path / "missing") in e.value.message
    with pytest.raises(stoker.StokerError) as e:
        len(stoker.Loader(str(tmp_path), batch_size=4, transform="train",
                          socket=daemon.socket))
    assert e.value.code == "FAILED_PRECONDITION"


def test_daemon_death_mid_epoch_raises_promptly(private_daemon, dataset):
    ld = loader(private_daemon, dataset, batch_size=2, resume_timeout=1)
    it = iter(ld)
    next(it)
    private_daemon.proc.send_signal(signal.SIGKILL)
    private_daemon.proc.wait()
    start = time.monotonic()
    with pytest.raises(stoker.StokerError) as e:
        for _ in range(100):  # Ready batches may still come first.
            next(it)
    assert e.value.code == "UNAVAILABLE"
    assert "reconnecting to" in e.value.message  # It tried, then gave up.
    assert time.monotonic() - start < 10


def test_starvation_warning_and_stats(private_daemon, large_dataset):
    # One decode thread, big images, a loop that does nothing: data-bound.
    ld = loader(private_daemon, large_dataset, batch_size=2, image_size=64,
                decode="full")
    start = time.monotonic()
    with pytest.warns(stoker.StarvationWarning, match="waited"):
        for _ in ld:
            pass
    per_batch = (time.monotonic() - start) / 8  # The decode pace, this machine, now.
    s = ld.stats()
    assert s["batches"] == 8 and s["images"] == 16
    assert s["wait_fraction"] > 0.5
    # A slow loop (consumer-bound, 3x the decode pace): prefetch hides
    # decode, no warning.
    ld.set_epoch(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", stoker.StarvationWarning)
        for _ in ld:
            time.sleep(max(0.25, 3 * per_batch))
    assert ld.stats()["last_epoch"]["wait_fraction"] < 0.1


def test_float_outputs_are_normalized_nchw(daemon, dataset):
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    u8 = next(iter(loader(daemon, dataset)))[0]
    f32 = next(iter(loader(daemon, dataset, dtype="float32")))[0]
    f16 = next(iter(loader(daemon, dataset, dtype=torch.float16, mean=mean,
                           std=std)))[0]
    assert f32.dtype == torch.float32 and f16.dtype == torch.float16
    assert f32.shape == (5, 3, 48, 48)
    want = (u8.permute(0, 3, 1, 2).float() / 255
            - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.allclose(f32, want, atol=1e-5)
    assert torch.allclose(f16.float(), want, atol=2e-3)
    with pytest.raises(ValueError, match="std"):
        loader(daemon, dataset, dtype="float32", std=[1, 0, 1])


@pytest.fixture()
def damaged_dataset(dataset, tmp_path):
    """The shared dataset plus two files that are no JPEGs."""
    root = tmp_path / "d"
    shutil.copytree(dataset, root)
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    (classes[0] / "zz_truncated.jpg").write_bytes(b"\xff\xd8\xff\xe0garbage")
    (classes[1] / "zz_empty.jpg").write_bytes(b"")
    return str(root)


def test_on_error_policies(daemon, damaged_dataset):
    def run(policy):
        ld = loader(daemon, damaged_dataset, batch_size=4, on_error=policy)
        out, status = [], []
        for b in ld.batches():
            out.append(np.array(b.images))
            status += [int(s) for s in b.status]
        return ld, np.concatenate(out), status

    # replace (the default): no blank image, each failure named once.
    with pytest.warns(stoker.SampleErrorWarning) as caught:
        ld, images, status = run("replace")
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "2 sample(s) of epoch 0" in text and "replaced" in text
    assert "zz_truncated.jpg" in text and "zz_empty.jpg" in text
    assert sorted(s for s in status if s) == [3, 3]
    assert all(images[k].any() for k in range(len(status)))
    # The same stand-ins every time.
    with pytest.warns(stoker.SampleErrorWarning):
        _, again, _ = run("replace")
    assert np.array_equal(images, again)
    # zeros: blank images with read/decode status.
    with pytest.warns(stoker.SampleErrorWarning, match="zero images"):
        _, images, status = run("zeros")
    assert sorted(s for s in status if s) == [1, 2]
    assert sum(not images[k].any() for k in range(len(status))) == 2
    # raise: StokerError naming the file.
    with pytest.raises(stoker.StokerError) as e:
        run("raise")
    assert e.value.code == "DATA_LOSS" and "zz_" in e.value.message
    with pytest.raises(ValueError):
        loader(daemon, damaged_dataset, on_error="ignore")


def test_stokerctl_read_fails_on_failed_samples_unless_allowed(daemon,
                                                               damaged_dataset):
    base = [STOKERCTL, "--socket", daemon.socket, "read", "--dataset",
            damaged_dataset, "--batch-size", "4", "--size", "32"]
    out = subprocess.run(base, capture_output=True, text=True)
    assert out.returncode == 1
    assert json.loads(out.stdout)["errors"] == 2
    assert "--allow-errors" in out.stderr
    out = subprocess.run(base + ["--allow-errors"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    out = subprocess.run(base + ["--on-error", "raise"], capture_output=True,
                         text=True)
    assert out.returncode == 1 and "DATA_LOSS" in out.stderr and "zz_" in out.stderr


def test_bfloat16_images_are_torchs_rounding_of_float32(daemon, dataset):
    f32 = next(iter(loader(daemon, dataset, dtype="float32")))[0]
    bf16 = next(iter(loader(daemon, dataset, dtype=torch.bfloat16)))[0]
    assert bf16.dtype == torch.bfloat16 and bf16.shape == f32.shape
    assert torch.equal(bf16.view(torch.int16), f32.to(torch.bfloat16).view(torch.int16))


def test_the_presets_side_is_the_schemas_default(daemon, dataset):
    """image_size unset: the daemon's default (the one stokerctl --help
    prints), not one the Python package writes."""
    import re
    from conftest import STOKERCTL
    helptext = subprocess.run([STOKERCTL, "read", "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    side = int(re.search(r"output side in pixels \([^)]*default (\d+)\)", helptext).group(1))
    ld = stoker.Loader(dataset, 2, transform="val", shuffle=False, socket=daemon.socket)
    assert ld.image_size is None
    images, _ = next(iter(ld))
    assert tuple(images.shape) == (2, side, side, 3)
