"""The 3-D ops through a real stokerd on NIfTI scans and label volumes
written by nibabel, against NumPy: axis_flip and rot90 applied jointly to
scan and labels (numpy.flip, numpy.rot90), window, intensity and normalize
on the scan's float32 and float16 values in op order, labels untouched."""

import itertools

import pytest

np = pytest.importorskip("numpy")
nib = pytest.importorskip("nibabel")
pytest.importorskip("torch")

import stoker

SHAPE = (16, 12, 12)  # x, y, z: square in the plane of axes 1 and 2.
PER_VOLUME = 8


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    d = tmp_path_factory.mktemp("volume-ops")
    rng = np.random.default_rng(5)
    g = np.mgrid[0:SHAPE[0], 0:SHAPE[1], 0:SHAPE[2]].astype(np.float32)
    refs, lines = [], []
    for k in range(3):
        v = (np.sin(g[0] * 0.4 + k) * np.cos(g[1] * 0.3) * 120 + g[2] * 6 - 40
             + rng.standard_normal(SHAPE) * 3).astype(np.float32)
        seg = (v > 30).astype(np.uint8) * (k + 1)
        nib.Nifti1Image(v, np.eye(4)).to_filename(d / f"s{k}.nii.gz")
        nib.Nifti1Image(seg, np.eye(4)).to_filename(d / f"l{k}.nii.gz")
        lines.append(f"s{k}.nii.gz\tl{k}.nii.gz")
        refs.append((v, seg))
    (d / "train.tsv").write_text("\n".join(lines) + "\n")
    return {"nifti": {"path": str(d / "train.tsv")}, "samples_per_volume": PER_VOLUME}, refs


def batches(daemon, src, fields, pipeline, epoch=0):
    ld = stoker.Loader(src, batch_size=4, shuffle=True, seed=1, socket=daemon.socket,
                       fields=fields, pipeline=pipeline)
    ld.set_epoch(epoch)
    try:
        for b in ld.batches():
            yield b
    finally:
        ld.close()


def test_flips_and_quarter_turns_are_numpys_and_joint(daemon, scans):
    src, refs = scans
    fields = [stoker.array(SHAPE, "image"), stoker.array(SHAPE, "seg", dtype="uint8", file=1)]
    pipeline = [stoker.axis_flip(p=0.5), stoker.rot90(axes=(1, 2), p=0.75)]
    # Every (flipped axes, k) a sample may get, as NumPy computes it.
    candidates = [(flips, k) for n in range(4) for flips in itertools.combinations(range(3), n)
                  for k in range(4)]

    def apply(v, flips, k):
        return np.rot90(np.flip(v, flips) if flips else v, k, axes=(1, 2))

    seen = set()
    for b in batches(daemon, src, fields, pipeline):
        for i, img, seg in zip(b.indices, np.asarray(b.field("image")),
                               np.asarray(b.field("seg"))):
            v, s = refs[int(i) // PER_VOLUME]
            match = [c for c in candidates if np.array_equal(apply(v, *c), img)]
            assert match, int(i)
            # The labels got the very same flips and turn.
            np.testing.assert_array_equal(seg, apply(s, *match[0]))
            seen.add(match[0])
    assert len(seen) >= 8  # Drawn per sample, not once.


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_window_intensity_and_normalize_act_in_op_order(daemon, scans, dtype):
    src, refs = scans
    fields = [stoker.array(SHAPE, "image", dtype=dtype),
              stoker.array(SHAPE, "seg", dtype="uint8", file=1)]
    pipeline = [stoker.window(-50, 80), stoker.intensity(scale=(0.9, 1.1), shift=(-0.1, 0.1)),
                stoker.normalize([0.5], [0.25])]
    scales = []
    tol = 1e-5 if dtype == "float32" else 4e-3
    for b in batches(daemon, src, fields, pipeline):
        for i, img, seg in zip(b.indices, np.asarray(b.field("image")),
                               np.asarray(b.field("seg"))):
            v, s = refs[int(i) // PER_VOLUME]
            np.testing.assert_array_equal(seg, s)  # Not a float field: untouched.
            # MONAI's ScaleIntensityRange(-50, 80, 0, 1, clip=True) in float32.
            w = np.clip((v - np.float32(-50)) / np.float32(130) * np.float32(1) + np.float32(0),
                        0, 1)
            y = img.astype(np.float64) * 0.25 + 0.5  # Undo normalize: w * a + b.
            a, b0 = np.polyfit(w.reshape(-1), y.reshape(-1), 1)
            assert 0.9 <= a <= 1.1 and -0.1 <= b0 <= 0.1, (a, b0)
            expect = ((w * np.float32(a) + np.float32(b0)) - np.float32(0.5)) / np.float32(0.25)
            np.testing.assert_allclose(img.astype(np.float32), expect, rtol=0, atol=tol * 4)
            scales.append(a)
    assert len(scales) == 3 * PER_VOLUME
    assert np.ptp(scales) > 0.05  # Drawn per sample.


def test_a_window_alone_is_numpys_to_the_bit(daemon, scans):
    src, refs = scans
    fields = [stoker.array(SHAPE, "image")]
    for b in batches(daemon, src, fields, [stoker.window(-50, 80, out=(-1, 1))]):
        for i, img in zip(b.indices, np.asarray(b.field("image"))):
            v = refs[int(i) // PER_VOLUME][0]
            x = (v - np.float32(-50)) / np.float32(130) * np.float32(2) + np.float32(-1)
            np.testing.assert_array_equal(img, np.clip(x, np.float32(-1), np.float32(1)))


def test_bad_3d_ops_are_named(daemon, scans):
    src, _ = scans
    cases = [
        ([stoker.array(SHAPE, "image")], [stoker.rot90(axes=(0, 1))],
         r"pipeline\[0\] \(rot90\): field 'image' is 16 x 12 in the plane of axes \[0, 1\]"),
        ([stoker.array(SHAPE, "image")], [stoker.axis_flip(axes=(3,))],
         r"pipeline\[0\] \(axis_flip\): axis 3 is not one of field 'image' \(3 dimensions\)"),
        ([stoker.array(SHAPE, "image")], [stoker.window(80, -50)],
         r"pipeline\[0\] \(window\): window \[80, -50\] onto \[0, 1\]"),
        ([stoker.array(SHAPE, "seg", dtype="uint8", file=1)], [stoker.window(0, 1, fields=["seg"])],
         r"pipeline\[0\] \(window\): field 'seg' is a array of uint8; window applies to "
         r"float32/float16/bfloat16 arrays"),
    ]
    for fields, pipeline, message in cases:
        with pytest.raises(ValueError, match=message):
            stoker.Loader(src, batch_size=1, socket=daemon.socket, fields=fields,
                          pipeline=pipeline, shuffle=True)
