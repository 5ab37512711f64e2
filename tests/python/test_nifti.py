"""NIfTI volumes through a real stokerd, written by nibabel as teams keep
them (.nii.gz with structure plus noise, label volumes, a scaled int16
scan, a NIfTI-2 file with an upper-case name): every patch bit-identical to
nibabel's array at the same corner, image and label patched jointly, in
plan order; bad volumes named."""

import gzip
import os
import struct

import pytest

np = pytest.importorskip("numpy")
nib = pytest.importorskip("nibabel")
pytest.importorskip("torch")

import stoker
from conftest import Daemon
from test_arrays import daemon_stats, find_patch

SHAPE = (20, 24, 18)  # x, y, z as nibabel gives them.
PATCH = (8, 9, 10)


def scan(rng, k):
    g = np.mgrid[0:SHAPE[0], 0:SHAPE[1], 0:SHAPE[2]].astype(np.float32)
    return (np.sin(g[0] * 0.3 + k) * np.cos(g[1] * 0.2) * 50 + g[2] * 2
            + rng.standard_normal(SHAPE) * 0.5).astype(np.float32)


def write_scaled(path, raw, slope, inter):
    """An int16 volume whose header scales it (scl_slope, scl_inter),
    gzip-compressed, as scanners' converters write them."""
    plain = str(path)[:-3]
    nib.Nifti1Image(raw, np.eye(4)).to_filename(plain)
    data = bytearray(open(plain, "rb").read())
    data[112:120] = struct.pack("<ff", slope, inter)
    os.remove(plain)
    with open(path, "wb") as f:
        f.write(gzip.compress(bytes(data), compresslevel=6))


@pytest.fixture(scope="module")
def volumes(tmp_path_factory):
    d = tmp_path_factory.mktemp("nifti")
    rng = np.random.default_rng(11)
    affine = np.array([[-0.9, 0, 0, 90], [0, 1.1, 0, -120], [0, 0, 2.5, -70], [0, 0, 0, 1]])
    lines, names = [], []
    for k in range(3):
        name = f"case{k}"
        img = d / f"{name}_img.nii.gz"
        if k == 1:
            write_scaled(img, (scan(rng, k) * 40).astype(np.int16), 0.25, -3.5)
        elif k == 2:  # NIfTI-2, float64, uncompressed, an upper-case name.
            img = d / f"{name}_IMG.NII"
            nib.Nifti2Image(scan(rng, k).astype(np.float64), affine).to_filename(img)
        else:
            nib.Nifti1Image(scan(rng, k), affine).to_filename(img)
        lab = d / f"{name}_seg.nii.gz"
        seg = (scan(rng, k + 7) > 20).astype(np.uint8) * (k + 1)
        nib.Nifti1Image(seg, affine).to_filename(lab)
        lines.append(f"{img.name}\t{lab.name}\t{k + 4}")
        names.append((img, lab))
    (d / "train.tsv").write_text("# image, label volume, class\n" + "\n".join(lines) + "\n")
    refs = [(np.asarray(nib.load(i).get_fdata(dtype=np.float32)),
             np.asarray(nib.load(l).dataobj)) for i, l in names]
    return d, refs


def test_patches_and_labels_are_nibabels_regions_jointly(daemon, volumes):
    d, refs = volumes
    src = {"nifti": {"path": str(d / "train.tsv")}, "samples_per_volume": 3}
    ld = stoker.Loader(src, batch_size=4, shuffle=True, seed=9, socket=daemon.socket,
                       fields=[stoker.array(PATCH, "image"),
                               stoker.array(PATCH, "seg", dtype="uint8", file=1),
                               stoker.label()],
                       pipeline=[stoker.random_patch(PATCH)])
    before = daemon_stats(daemon)
    corners = {}
    for epoch in range(2):
        ld.set_epoch(epoch)
        seen = []
        for b in ld.batches():
            labels = np.asarray(b.field("label"))
            for j, (i, p, s) in enumerate(zip(b.indices, np.asarray(b.field("image")),
                                              np.asarray(b.field("seg")))):
                image, seg = refs[int(i) // 3]
                c = find_patch(image, p)  # Bit-exact against nibabel.
                assert c is not None, (epoch, int(i))
                np.testing.assert_array_equal(
                    s, seg[c[0]:c[0] + PATCH[0], c[1]:c[1] + PATCH[1], c[2]:c[2] + PATCH[2]])
                assert labels[j] == int(i) // 3 + 4
                corners[(epoch, int(i))] = c
                seen.append(int(i))
        assert sorted(seen) == list(range(9))
    assert len(set(corners.values())) > 6  # Drawn per (epoch, index).
    ld.set_epoch(1)  # The same epoch again: the same patches, in order.
    for b in ld.batches():
        for i, p in zip(b.indices, np.asarray(b.field("image"))):
            assert find_patch(refs[int(i) // 3][0], p) == corners[(1, int(i))]
    after = daemon_stats(daemon)
    # Six volumes (three images, three label volumes), decoded once each.
    assert after["volume_cache_decodes"] - before.get("volume_cache_decodes", 0) == 6
    ld.close()


def corners_around(seg, voxels):
    """MONAI's RandCropByPosNegLabel windows in NumPy: the corner of the
    PATCH window centred on each voxel (flat offsets into seg), shifted
    inside the volume."""
    centre = np.stack(np.unravel_index(voxels, seg.shape), axis=1)
    lo = centre - np.array(PATCH) // 2
    return set(map(tuple, np.clip(lo, 0, np.array(seg.shape) - PATCH)))


@pytest.mark.parametrize("pos,neg", [(1, 0), (0, 1)])
def test_label_biased_patches_are_centred_on_foreground_or_background(daemon, volumes, pos, neg):
    d, refs = volumes
    src = {"nifti": {"path": str(d / "train.tsv")}, "samples_per_volume": 8}
    ld = stoker.Loader(src, batch_size=4, shuffle=True, seed=3, socket=daemon.socket,
                       fields=[stoker.array(PATCH, "image"),
                               stoker.array(PATCH, "seg", dtype="uint8", file=1)],
                       pipeline=[stoker.random_patch(PATCH, label="seg", pos=pos, neg=neg)])
    allowed = []
    for image, seg in refs:
        flat = seg.reshape(-1)
        voxels = np.flatnonzero(flat) if pos else np.flatnonzero(flat == 0)
        allowed.append(corners_around(seg, voxels))
    n = 0
    for b in ld.batches():
        for i, p, s in zip(b.indices, np.asarray(b.field("image")), np.asarray(b.field("seg"))):
            image, seg = refs[int(i) // 8]
            c = find_patch(image, p)  # Bit-exact against nibabel.
            assert c is not None
            assert c in allowed[int(i) // 8], (int(i), c)
            np.testing.assert_array_equal(
                s, seg[c[0]:c[0] + PATCH[0], c[1]:c[1] + PATCH[1], c[2]:c[2] + PATCH[2]])
            if pos:
                assert s.any()  # Every positive patch holds foreground.
            n += 1
    assert n == 24
    ld.close()


def test_a_path_is_recognised_as_nifti(daemon, volumes):
    d, refs = volumes
    # The manifest by its first file, a single volume by its name.
    for path, n in ((d / "train.tsv", 3), (d / "case0_img.nii.gz", 1)):
        ld = stoker.Loader(str(path), batch_size=1, shuffle=False, socket=daemon.socket,
                           fields=[stoker.array(SHAPE, "vol")])
        assert len(ld) == n
        first = next(iter(ld.batches()))
        np.testing.assert_array_equal(np.asarray(first.field("vol"))[0], refs[0][0])
        ld.close()


def test_each_samples_volumes_are_described_with_nibabels_affine(daemon, volumes):
    """describe(): per index the image and label volume, their shape, and
    the affine nibabel gives each (sform; the scaled scan's identity; the
    NIfTI-2 file's), the same for each of a volume's patches."""
    d, _ = volumes
    files = [(d / "case0_img.nii.gz", d / "case0_seg.nii.gz"),
             (d / "case1_img.nii.gz", d / "case1_seg.nii.gz"),
             (d / "case2_IMG.NII", d / "case2_seg.nii.gz")]
    ld = stoker.Loader({"nifti": {"path": str(d / "train.tsv")}, "samples_per_volume": 2},
                       batch_size=2, shuffle=False, socket=daemon.socket,
                       fields=[stoker.array(PATCH, "image"),
                               stoker.array(PATCH, "seg", dtype="uint8", file=1)],
                       pipeline=[stoker.random_patch(PATCH)])
    described = ld.describe(range(6))
    assert len(described) == 6
    for i, sample in enumerate(described):
        assert [f["path"] for f in sample["files"]] == [str(p) for p in files[i // 2]]
        for f, path in zip(sample["files"], files[i // 2]):
            img = nib.load(path)
            assert f["shape"] == list(img.shape)
            np.testing.assert_allclose(f["affine"], img.affine, rtol=0, atol=1e-6)
    assert described[4]["files"][0]["affine"][0][0] == pytest.approx(-0.9)
    with pytest.raises(stoker.StokerError, match="outside the dataset's 6 samples"):
        ld.describe([6])
    ld.close()


def test_decoded_volumes_are_found_in_l2_after_a_restart(volumes, tmp_path):
    """A daemon with an L2 spills each volume it decodes there; a restarted
    one finds all six (images and label volumes) instead of decoding, and
    serves the same bytes as nibabel's."""
    d, refs = volumes
    flags = ["--l2-path", str(tmp_path / "l2"), "--l2-max-bytes", "256M"]

    def whole_volumes(daemon):
        ld = stoker.Loader({"nifti": {"path": str(d / "train.tsv")}}, batch_size=3,
                           shuffle=False, socket=daemon.socket,
                           fields=[stoker.array(SHAPE, "image"),
                                   stoker.array(SHAPE, "seg", dtype="uint8", file=1)])
        (b,) = list(ld.batches())
        for k, (image, seg) in enumerate(refs):
            np.testing.assert_array_equal(np.asarray(b.field("image"))[k], image)
            np.testing.assert_array_equal(np.asarray(b.field("seg"))[k], seg)
        ld.close()
        return daemon_stats(daemon)

    # The first daemon decodes and spills; the restarted one finds them.
    for decodes, counted in ((6, "volume_cache_spilled"), (0, "volume_cache_unspilled")):
        stokerd = Daemon(extra=flags)
        try:
            s = whole_volumes(stokerd)
            assert s.get("volume_cache_decodes", 0) == decodes
            assert s.get(counted, 0) == 6
        finally:
            stokerd.stop()  # Writes what it queued for L2 before it exits.


def test_bad_volumes_are_named(daemon, tmp_path):
    rng = np.random.default_rng(2)
    nib.Nifti1Image(scan(rng, 0), np.eye(4)).to_filename(tmp_path / "good.nii.gz")
    good = (tmp_path / "good.nii.gz").read_bytes()
    (tmp_path / "cut.nii.gz").write_bytes(good[:len(good) // 2])  # A truncated stream.
    nib.Nifti1Image(scan(rng, 1)[:10], np.eye(4)).to_filename(tmp_path / "small.nii.gz")
    (tmp_path / "pairs.tsv").write_text("good.nii.gz\tsmall.nii.gz\n")

    def first_batch(path):
        ld = stoker.Loader({"nifti": {"path": str(tmp_path / path)}}, batch_size=1,
                           socket=daemon.socket, on_error="raise",
                           fields=[stoker.array(PATCH, "image")],
                           pipeline=[stoker.random_patch(PATCH)], shuffle=True)
        try:
            next(iter(ld.batches()))
        finally:
            ld.close()

    with pytest.raises(stoker.StokerError, match=r"small.nii.gz: shape \[10, 24, 18\] is not"):
        first_batch("pairs.tsv")
    with pytest.raises(stoker.StokerError,
                       match=r"could not be read or decoded: .*cut.nii.gz \(sample 0\)"):
        first_batch("cut.nii.gz")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("not a volume\n")
    with pytest.raises(stoker.StokerError, match="holds no NIfTI volumes"):
        len(stoker.Loader({"nifti": {"path": str(tmp_path / "docs")}}, batch_size=1,
                          socket=daemon.socket, fields=[stoker.array(PATCH)], shuffle=True))
