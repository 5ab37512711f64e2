"""NumPy and HDF5 sources through a real stokerd: fields bit-identical to a
numpy/h5py reference in the same plan order, patches of volumes, dtype
conversion and normalize, bad inputs named."""

import json
import os
import subprocess
import time

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")

import stoker
from conftest import STOKERCTL


def loader(daemon, source, fields, pipeline=(), **kw):
    args = dict(batch_size=64, shuffle=True, seed=7, socket=daemon.socket,
                fields=fields, pipeline=list(pipeline))
    args.update(kw)
    return stoker.Loader(source, **args)


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    d = tmp_path_factory.mktemp("feats")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 24)).astype(np.float32)
    y = rng.integers(0, 50, 1000)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    np.save(d / "x64.npy", x.astype(np.float64))
    with h5py.File(d / "f.h5", "w") as f:
        f["x"] = x
        f["y"] = y
        f["i16"] = (x * 100).astype(np.int16)
    return d, x, y


def test_token_records_of_a_raw_file_are_its_windows(daemon, tmp_path):
    """nanoGPT's train.bin (uint16 tokens, np.memmap's layout) as records of
    64 tokens: each sample is its record, as int64 for an embedding."""
    rng = np.random.default_rng(3)
    tokens = (np.cumsum(rng.integers(0, 97, 500 * 64)) % 50257).astype(np.uint16)
    tokens.tofile(tmp_path / "train.bin")
    records = np.memmap(tmp_path / "train.bin", dtype=np.uint16, mode="r").reshape(-1, 64)
    ld = loader(daemon, {"raw": {"path": str(tmp_path / "train.bin"), "dtype": "uint16",
                                 "shape": [64]}},
                [stoker.array((64,), "tokens", dtype="int64")], batch_size=50)
    seen = []
    for b in ld.batches():
        idx = np.array(b.indices)
        assert np.array_equal(b.field("tokens"), records[idx].astype(np.int64))
        seen.append(idx)
    assert sorted(np.concatenate(seen)) == list(range(500))


@pytest.mark.parametrize("kind", ["npy", "hdf5"])
def test_features_are_bit_identical_in_plan_order(daemon, features, kind):
    d, x, y = features
    src = ({"npy": {"path": str(d / "x.npy"), "labels": str(d / "y.npy")}}
           if kind == "npy" else
           {"hdf5": {"path": str(d / "f.h5"), "dataset": "x", "labels": "y"}})
    ld = loader(daemon, src, [stoker.array((24,), "features"), stoker.label()])
    seen = []
    for epoch in range(2):
        ld.set_epoch(epoch)
        for b in ld.batches():
            idx = np.array(b.indices)  # A copy: views would hold the slot.
            assert np.array_equal(b.field("features"), x[idx])  # Bit-identical.
            assert np.array_equal(b.field("label"), y[idx])
            seen.append(idx)
    order0 = np.concatenate(seen[:16])
    assert sorted(order0) == list(range(1000))  # One epoch: each once.
    assert not np.array_equal(order0, np.concatenate(seen[16:]))  # Reshuffled.


def test_a_folder_of_feature_files_is_rows_across_files(daemon, tmp_path):
    """A feature store as teams keep one: several gzip-chunked files named
    *.H5, each with its rows and labels; rows bit-identical to h5py's in
    plan order, files in name order."""
    rng = np.random.default_rng(3)
    t = np.arange(24, dtype=np.float32)
    parts, labels = [], []
    for k, rows in enumerate((300, 200, 250, 250)):
        # Smooth structure plus noise, as features look.
        x = (np.sin(t[None, :] * 0.3 + rng.uniform(0, 6, (rows, 1))) * 4
             + rng.standard_normal((rows, 24)) * 0.1).astype(np.float32)
        y = rng.integers(0, 10, rows)
        with h5py.File(tmp_path / f"part{k}.H5", "w") as f:
            f.create_dataset("x", data=x, compression="gzip", chunks=(64, 24))
            f["y"] = y
        parts.append(x)
        labels.append(y)
    x, y = np.concatenate(parts), np.concatenate(labels)
    ld = loader(daemon, {"hdf5": {"path": str(tmp_path), "dataset": "x", "labels": "y"}},
                [stoker.array((24,), "features"), stoker.label()])
    assert len(ld) == 16  # 1000 rows in batches of 64.
    seen = []
    for b in ld.batches():
        idx = np.array(b.indices)
        assert np.array_equal(b.field("features"), x[idx])
        assert np.array_equal(b.field("label"), y[idx])
        seen.append(idx)
    assert sorted(np.concatenate(seen)) == list(range(1000))


def test_a_part_of_another_width_fails_its_rows_alone(daemon, tmp_path):
    """Rows copied in runs from where they lie beside rows that cannot be:
    a part whose rows are wider than the field. Its rows are that sample's
    decode error (zeros with on_error="zeros"); every other row, in the
    same batches, is bit-identical to h5py's."""
    rng = np.random.default_rng(5)
    widths, parts = (16, 24, 16), []
    for k, w in enumerate(widths):
        x = (rng.standard_normal((120, w)) * 3).astype(np.float32)
        with h5py.File(tmp_path / f"p{k}.h5", "w") as f:
            f.create_dataset("x", data=x, compression="gzip", chunks=(32, w))
            f["y"] = np.full(120, k)
        parts.append(x)
    ld = loader(daemon, {"hdf5": {"path": str(tmp_path), "dataset": "x", "labels": "y"}},
                [stoker.array((16,), "x")], on_error="zeros", batch_size=72)
    bad, good = 0, 0
    with pytest.warns(stoker.SampleErrorWarning, match="120 sample"):
        for b in ld.batches():
            got = np.asarray(b.field("x"))
            for row, i, s in zip(got, b.indices, b.status):
                k, j = divmod(int(i), 120)
                if widths[k] == 16:
                    assert s == 0 and np.array_equal(row, parts[k][j]), (i, s)
                    good += 1
                else:
                    assert s == 2 and not row.any(), (i, s)  # A decode error, zeros.
                    bad += 1
    assert (good, bad) == (240, 120)


def test_conversion_and_normalize(daemon, features):
    d, x, _ = features
    ld = loader(daemon, {"npy": {"path": str(d / "x64.npy")}},
                [stoker.array((24,), "f16", dtype="float16")],
                [stoker.normalize([0.5], [2.0])], shuffle=False)
    b = next(ld.batches())
    want = ((x[:64].astype(np.float64) - 0.5) / 2.0).astype(np.float16)
    got = np.asarray(b.field("f16"))
    assert np.abs(got.astype(np.float32) - want.astype(np.float32)).max() <= 2e-3
    ld = loader(daemon, {"hdf5": {"path": str(d / "f.h5"), "dataset": "i16"}},
                [stoker.array((24,), "wide", dtype="int64")], shuffle=False)
    b = next(ld.batches())
    assert np.array_equal(b.field("wide"), (x[:64] * 100).astype(np.int16))


@pytest.fixture(scope="module")
def volumes(tmp_path_factory):
    d = tmp_path_factory.mktemp("vols")
    rng = np.random.default_rng(1)
    vols = [rng.standard_normal(s).astype(np.float32)
            for s in ((20, 30, 40), (24, 26, 33), (21, 31, 41))]
    os.mkdir(d / "npy")
    os.mkdir(d / "h5")
    for i, v in enumerate(vols):
        np.save(d / "npy" / f"v{i}.npy", v)
        with h5py.File(d / "h5" / f"v{i}.h5", "w") as f:
            f["vol"] = v
    return d, vols


def find_patch(vol, patch):
    pz, py, px = patch.shape
    for z in range(vol.shape[0] - pz + 1):
        for y in range(vol.shape[1] - py + 1):
            for x in range(vol.shape[2] - px + 1):
                if np.array_equal(vol[z:z + pz, y:y + py, x:x + px], patch):
                    return (z, y, x)
    return None


@pytest.mark.parametrize("kind", ["npy", "h5"])
def test_volume_patches_are_regions_of_their_volume(daemon, volumes, kind):
    d, vols = volumes
    src = ({"npy": {"path": str(d / "npy")}} if kind == "npy" else
           {"hdf5": {"path": str(d / "h5"), "dataset": "vol"}})
    ld = loader(daemon, src, [stoker.array((8, 9, 10), "patch")],
                [stoker.random_patch((8, 9, 10))], batch_size=3, seed=2)
    corners = {}
    for epoch in range(3):
        ld.set_epoch(epoch)
        for b in ld.batches():
            for i, p in zip(b.indices, np.asarray(b.field("patch"))):
                corner = find_patch(vols[int(i)], p)
                assert corner is not None
                corners[(epoch, int(i))] = corner
    assert len(set(corners.values())) > 3  # Drawn anew per epoch and sample.
    ld.set_epoch(1)  # Deterministic: the same epoch gives the same patches.
    for b in ld.batches():
        for i, p in zip(b.indices, np.asarray(b.field("patch"))):
            assert find_patch(vols[int(i)], p) == corners[(1, int(i))]


@pytest.mark.parametrize("fields, pipeline, source, words", [
    ([stoker.array((25, 9, 10))], [stoker.random_patch((25, 9, 10))],
     "npy", "does not fit"),
    ([stoker.array((19, 30, 40))], [], "npy", "add a random_patch op"),
    ([stoker.image(8, 8)], [stoker.center_crop(8)], "npy",
     "holds arrays: declare array fields"),
])
def test_bad_array_specs_name_what_is_wrong(daemon, volumes, fields, pipeline,
                                            source, words):
    d, _ = volumes
    ld = loader(daemon, {"npy": {"path": str(d / "npy")}}, fields, pipeline)
    with pytest.raises(stoker.StokerError) as e:
        next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and words in str(e.value)


def test_a_patch_of_other_rank_is_refused_when_the_loader_is_made(daemon, volumes):
    d, _ = volumes
    with pytest.raises(ValueError, match=r"pipeline\[0\] \(random_patch\): patch \[4, 4\] "
                       r"differs from field 'array' \[4, 4, 4\]"):
        loader(daemon, {"npy": {"path": str(d / "npy")}}, [stoker.array((4, 4, 4))],
               [stoker.random_patch((4, 4))])


def test_a_volume_the_patch_does_not_fit_is_a_per_sample_error(daemon, volumes):
    d, _ = volumes  # Depths 20, 24, 21: a patch 21 deep misses the first.
    ld = loader(daemon, {"npy": {"path": str(d / "npy")}},
                [stoker.array((21, 9, 10))], [stoker.random_patch((21, 9, 10))],
                batch_size=3, shuffle=False, on_error="zeros")
    with pytest.warns(stoker.SampleErrorWarning, match="v0.npy"):
        b = list(ld.batches())[0]
    assert list(b.status) == [2, 0, 0]


def test_corrupt_files_are_per_sample_errors(daemon, tmp_path):
    rng = np.random.default_rng(3)
    os.mkdir(tmp_path / "npy")
    os.mkdir(tmp_path / "h5")
    for i in range(3):
        v = rng.standard_normal((6, 7)).astype(np.float32)
        np.save(tmp_path / "npy" / f"{i}.npy", v)
        with h5py.File(tmp_path / "h5" / f"{i}.h5", "w") as f:
            f["v"] = v
    raw = (tmp_path / "npy" / "1.npy").read_bytes()
    (tmp_path / "npy" / "1.npy").write_bytes(raw[:100])  # Truncated data.
    (tmp_path / "h5" / "1.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    for src, bad in (({"npy": {"path": str(tmp_path / "npy")}}, "1.npy"),
                     ({"hdf5": {"path": str(tmp_path / "h5"), "dataset": "v"}}, "1.h5")):
        ld = loader(daemon, src, [stoker.array((6, 7), "v")], shuffle=False,
                    batch_size=3, on_error="zeros")
        with pytest.warns(stoker.SampleErrorWarning, match=bad):
            b = list(ld.batches())[0]  # Reported at the epoch's end.
        assert list(b.status) == [0, 2, 0]
        assert not np.asarray(b.field("v"))[1].any()


def test_bad_single_files_fail_the_session(daemon, tmp_path):
    np.save(tmp_path / "f.npy", np.asfortranarray(np.ones((4, 3))))
    (tmp_path / "big.npy").write_bytes(
        stoker_npy_header("<f4", "(4, 3)") + b"\0" * 10)
    for name, words in (("f.npy", "Fortran-order"), ("big.npy", "needs 48 bytes")):
        ld = loader(daemon, {"npy": {"path": str(tmp_path / name)}},
                    [stoker.array((3,))])
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
        assert e.value.code == "FAILED_PRECONDITION" and words in str(e.value)
        assert name in str(e.value)


def stoker_npy_header(descr, shape):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    d += " " * (63 - (10 + len(d)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode()


def daemon_stats(daemon):
    out = subprocess.run([STOKERCTL, "--socket", daemon.socket, "stats", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def write_gzip_volumes(folder, name, count, shape, chunks, seed, shuffle=False):
    """`count` float32 volumes `name.format(k)` in `folder`, dataset "vol",
    gzip in `chunks`: smooth structure plus noise, as scans look."""
    rng = np.random.default_rng(seed)
    grid = np.mgrid[tuple(slice(0, n) for n in shape)].astype(np.float32)
    vols = []
    for k in range(count):
        v = (np.sin(grid[0] * 0.3 + k) * np.cos(grid[1] * 0.2) * 50 + grid[2]
             + rng.standard_normal(shape) * 0.5).astype(np.float32)
        with h5py.File(folder / name.format(k), "w") as f:
            f.create_dataset("vol", data=v, compression="gzip", shuffle=shuffle, chunks=chunks)
        vols.append(v)
    return vols


def test_compressed_volumes_are_decoded_once_and_give_several_patches(daemon, tmp_path,
                                                                     dataset):
    # Volumes as h5py users write them: gzip (with shuffle) in h5py's
    # chunks, upper-case names, smooth structure plus noise.
    vols = write_gzip_volumes(tmp_path, "scan{}.H5", 3, (22, 27, 31), (5, 7, 8), seed=5,
                              shuffle=True)
    before = daemon_stats(daemon)
    src = {"hdf5": {"path": str(tmp_path), "dataset": "vol"}, "samples_per_volume": 4}
    ld = loader(daemon, src, [stoker.array((8, 9, 10), "patch")],
                [stoker.random_patch((8, 9, 10))], batch_size=5, seed=3)
    assert len(ld) == 3  # 12 samples in batches of 5.
    corners = {}
    for epoch in range(2):
        ld.set_epoch(epoch)
        seen = []
        for b in ld.batches():
            for i, p in zip(b.indices, np.asarray(b.field("patch"))):
                corner = find_patch(vols[int(i) // 4], p)  # Bit-exact region.
                assert corner is not None, (epoch, int(i))
                corners[(epoch, int(i))] = corner
                seen.append(int(i))
        assert sorted(seen) == list(range(12))  # 4 samples of each volume.
    # Each volume's 4 samples are drawn apart (not one patch 4 times).
    for k in range(3):
        assert len({corners[(0, 4 * k + j)] for j in range(4)}) > 1
    after = daemon_stats(daemon)
    # Chunks decoded as patches touch them, each once, for 24 patches and
    # more (whatever the ring prefetched): at most the 3 x 80 chunks, and a
    # volume counts as decoded once all of its are.
    chunks = after["volume_cache_chunks"] - before.get("volume_cache_chunks", 0)
    assert 0 < chunks <= 3 * 80
    decodes = after.get("volume_cache_decodes", 0) - before.get("volume_cache_decodes", 0)
    assert decodes <= chunks // 80
    # Whole volumes then fill only the chunks no patch touched: every chunk
    # once in all, and each volume decoded once.
    whole = loader(daemon, {"hdf5": {"path": str(tmp_path), "dataset": "vol"}},
                   [stoker.array((22, 27, 31), "vol")], [], batch_size=3, seed=3)
    b = next(iter(whole.batches()))
    for i, v in zip(b.indices, np.asarray(b.field("vol"))):
        np.testing.assert_array_equal(v, vols[int(i)])
    whole.close()
    final = daemon_stats(daemon)
    assert final["volume_cache_chunks"] - before.get("volume_cache_chunks", 0) == 3 * 80
    assert final["volume_cache_decodes"] - before.get("volume_cache_decodes", 0) == 3
    lookups = [sum({t["tier"]: t for t in s["tiers"]}["volumes"].get(k, 0)
                   for k in ("hits", "misses")) for s in (before, after)]
    assert lookups[1] - lookups[0] >= 24
    ld.close()
    # On a source whose samples are not volumes it is refused by name.
    with pytest.raises(stoker.StokerError, match="samples_per_volume applies to array sources"):
        len(stoker.Loader({"folder": {"path": dataset}, "samples_per_volume": 2},
                          batch_size=4, transform="train", shuffle=True, image_size=32,
                          socket=daemon.socket))


def test_dataset_names_never_share_a_cache_entry(daemon, tmp_path):
    """HDF5 names may hold any character: a gzip-chunked "Y" and a
    fletcher32-chunked "Y|chunks" of another shape in one file, read one
    after the other, each come back as h5py reads them (the volume cache
    once keyed Y's chunk table and Y|chunks' volume alike)."""
    rng = np.random.default_rng(11)
    y = (np.arange(6 * 7 * 8, dtype=np.float32).reshape(6, 7, 8) * 0.5
         + rng.standard_normal((6, 7, 8)).astype(np.float32))
    other = (np.arange(9 * 5 * 4, dtype=np.float32).reshape(9, 5, 4) * -2
             + rng.standard_normal((9, 5, 4)).astype(np.float32))
    with h5py.File(tmp_path / "v.H5", "w") as f:
        f.create_dataset("Y", data=y, compression="gzip", chunks=(3, 4, 4))
        f.create_dataset("Y|chunks", data=other, fletcher32=True, chunks=(3, 5, 4))
    for name, want in (("Y", y), ("Y|chunks", other), ("Y", y)):
        ld = loader(daemon, {"hdf5": {"path": str(tmp_path), "dataset": name}},
                    [stoker.array(want.shape, "vol")], [], batch_size=1)
        b = next(iter(ld.batches()))
        np.testing.assert_array_equal(np.asarray(b.field("vol"))[0], want)
        ld.close()
    assert daemon.proc.poll() is None


def test_volumes_fill_the_rest_while_the_trainer_steps(daemon, tmp_path):
    """Chunks no patch touched are inflated while the trainer is busy with
    its step: with the ring full and nothing released, both gzip volumes
    become whole, each chunk inflated once, and reading them whole then
    inflates nothing."""
    vols = write_gzip_volumes(tmp_path, "vol{}.h5", 2, (40, 48, 48), (5, 6, 6), seed=8)
    chunks = 8 * 8 * 8  # Per volume.
    before = daemon_stats(daemon)

    def grown(stats, key):
        return stats.get(key, 0) - before.get(key, 0)

    src = {"hdf5": {"path": str(tmp_path), "dataset": "vol"}}
    ld = loader(daemon, src, [stoker.array((8, 9, 10), "patch")],
                [stoker.random_patch((8, 9, 10))], batch_size=2, seed=4, ring_slots=2)
    b = next(iter(ld.batches()))
    for i, p in zip(b.indices, np.asarray(b.field("patch"))):
        assert find_patch(vols[int(i)], p) is not None
    deadline = time.monotonic() + 120
    while grown(stats := daemon_stats(daemon), "volume_cache_decodes") < 2:
        assert time.monotonic() < deadline, stats
        time.sleep(0.05)  # Polling the counter, not timing the fill.
    assert grown(stats, "volume_cache_chunks") == 2 * chunks
    # Patches of the few batches the ring holds touch at most 27 chunks
    # each; the background filled the rest.
    assert 2 * chunks - 8 * 27 <= grown(stats, "volume_cache_idle_chunks") < 2 * chunks
    whole = loader(daemon, src, [stoker.array((40, 48, 48), "vol")], [], batch_size=2)
    b = next(iter(whole.batches()))
    for i, v in zip(b.indices, np.asarray(b.field("vol"))):
        np.testing.assert_array_equal(v, vols[int(i)])
    assert grown(daemon_stats(daemon), "volume_cache_chunks") == 2 * chunks
    whole.close()
    ld.close()


@pytest.mark.parametrize("kind", ["npy", "hdf5"])
def test_bfloat16_fields_are_torchs_rounding(daemon, features, kind):
    """float32 rows (and values a normalize made) into bfloat16 fields: the
    bits torch.tensor(x, dtype=torch.bfloat16) has; numpy sees the raw
    16-bit patterns."""
    d, x, _ = features
    src = ({"npy": {"path": str(d / "x.npy")}} if kind == "npy" else
           {"hdf5": {"path": str(d / "f.h5"), "dataset": "x"}})
    plain = loader(daemon, src, [stoker.array((24,), "bf", dtype="bfloat16")], shuffle=False)
    normed = loader(daemon, src, [stoker.array((24,), "bf", dtype="bfloat16")],
                    [stoker.normalize([0.5], [3.0])], shuffle=False)
    f32 = loader(daemon, src, [stoker.array((24,), "bf", dtype="float32")],
                 [stoker.normalize([0.5], [3.0])], shuffle=False)
    for b, n, f in zip(plain, normed, f32):
        assert b["bf"].dtype == torch.bfloat16
        idx = slice(0, b["bf"].shape[0])
        want = torch.tensor(x[idx], dtype=torch.bfloat16)
        assert torch.equal(b["bf"].view(torch.int16), want.view(torch.int16))
        assert torch.equal(n["bf"].view(torch.int16),
                           f["bf"].to(torch.bfloat16).view(torch.int16))
        break
    raw = next(plain.batches()).field("bf")
    assert raw.dtype == np.uint16
    want = torch.tensor(x[:64], dtype=torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(raw, want)
