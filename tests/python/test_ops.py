"""The per-pixel ops through a real stokerd, on real photographs, against
torchvision's functional ops on the same rendered pixels (Debian's
torchvision; its uint8 arithmetic is what transforms.v2 keeps)."""

import os

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
TF = pytest.importorskip("torchvision.transforms.functional")

import stoker

PHOTOS = "/usr/share/backgrounds/mate/nature"  # deploy/install-deps.sh
H, W = 72, 96


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """A manifest of 4 real photographs (JPEG as shipped), label = row."""
    folder = tmp_path_factory.mktemp("photos")
    names = sorted(n for n in os.listdir(PHOTOS) if n.lower().endswith((".jpg", ".jpeg")))[:4]
    assert len(names) == 4, names
    path = folder / "list.tsv"
    path.write_text("".join(f"{PHOTOS}/{n}\t{i}\n" for i, n in enumerate(names)))
    return str(path)


def batch(daemon, photos, *ops, fields=None, seed=0):
    ld = stoker.Loader(photos, batch_size=4, shuffle=False, seed=seed,
                       socket=daemon.socket,
                       fields=fields or [stoker.image(H, W)],
                       pipeline=[stoker.resize(width=W, height=H), *ops])
    return next(iter(ld))["image"].numpy()


def chw(x):
    return torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1)


@pytest.mark.parametrize("kw, fn", [
    (dict(brightness=(1.4, 1.4)), lambda t: TF.adjust_brightness(t, 1.4)),
    (dict(brightness=(0.6, 0.6)), lambda t: TF.adjust_brightness(t, 0.6)),
    (dict(contrast=(0.5, 0.5)), lambda t: TF.adjust_contrast(t, 0.5)),
    (dict(contrast=(1.7, 1.7)), lambda t: TF.adjust_contrast(t, 1.7)),
    (dict(saturation=(0.3, 0.3)), lambda t: TF.adjust_saturation(t, 0.3)),
    (dict(saturation=(2.0, 2.0)), lambda t: TF.adjust_saturation(t, 2.0)),
    (dict(hue=(0.2, 0.2)), lambda t: TF.adjust_hue(t, 0.2)),
    (dict(hue=(-0.35, -0.35)), lambda t: TF.adjust_hue(t, -0.35)),
])
def test_color_jitter_matches_torchvision(daemon, photos, kw, fn):
    base = batch(daemon, photos)
    got = batch(daemon, photos, stoker.color_jitter(**kw))
    for i in range(4):
        want = fn(chw(base[i])).permute(1, 2, 0).numpy().astype(int)
        diff = np.abs(got[i].astype(int) - want)
        # Float rounding at truncation boundaries: a level, rarely.
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01, (kw, diff.max(), (diff > 0).mean())


def test_color_jitter_is_drawn_per_sample_and_reproducible(daemon, photos):
    jitter = stoker.color_jitter(0.4, 0.4, 0.4, 0.1)
    a = batch(daemon, photos, jitter, seed=3)
    assert np.array_equal(a, batch(daemon, photos, jitter, seed=3))
    assert not np.array_equal(a, batch(daemon, photos, jitter, seed=4))
    base = batch(daemon, photos)
    assert all(not np.array_equal(a[i], base[i]) for i in range(4))


def test_random_grayscale_matches_torchvision(daemon, photos):
    base = batch(daemon, photos)
    got = batch(daemon, photos, stoker.random_grayscale(p=1.0))
    for i in range(4):
        want = TF.rgb_to_grayscale(chw(base[i]), 3).permute(1, 2, 0).numpy().astype(int)
        diff = np.abs(got[i].astype(int) - want)
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01
    assert np.array_equal(batch(daemon, photos, stoker.random_grayscale(p=0.0)), base)


def test_random_erasing_is_torchvisions_erase_of_a_drawn_box(daemon, photos):
    base = batch(daemon, photos)
    op = stoker.random_erasing(p=1.0, scale=(0.1, 0.2), ratio=(0.5, 2.0),
                               value=(255, 0, 128))
    got = batch(daemon, photos, op)
    for i in range(4):
        rows, cols = np.nonzero((got[i] != base[i]).any(axis=2))
        top, left = rows.min(), cols.min()
        h, w = rows.max() - top + 1, cols.max() - left + 1
        assert 0.1 * 0.7 <= h * w / (H * W) <= 0.2 * 1.3, (h, w)
        assert 0.5 * 0.7 <= h / w <= 2.0 * 1.4, (h, w)
        want = TF.erase(chw(base[i]), top, left, h, w,
                        torch.tensor([255, 0, 128], dtype=torch.uint8)[:, None, None])
        assert np.array_equal(got[i], want.permute(1, 2, 0).numpy())


def test_spec_augment_masks_whole_bands_of_gzip_hdf5_features(daemon, tmp_path):
    """Log-mel-like features stored as the audio teams store them (HDF5,
    gzip-chunked, [clips, frames, bins]): against h5py, every element is
    unchanged or lies in a wholly masked frame or bin band."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(3)
    frames, bins = np.arange(100)[:, None], np.arange(40)[None, :]
    x = (np.sin(frames / 7.0) * np.cos(bins / 5.0) + 0.1 *
         rng.standard_normal((64, 100, 40))).astype(np.float32)
    with h5py.File(tmp_path / "feats.H5", "w") as f:
        f.create_dataset("mel", data=x, chunks=(8, 100, 40), compression="gzip")
    src = {"hdf5": {"path": str(tmp_path / "feats.H5"), "dataset": "mel"}}
    ld = stoker.Loader(src, batch_size=64, shuffle=False, seed=5, socket=daemon.socket,
                       fields=[stoker.array((100, 40), "mel")],
                       pipeline=[stoker.normalize([0.0], [2.0]),
                                 stoker.spec_augment(2, 20, 2, 8, value=0.0)])
    got = next(ld.batches()).field("mel")
    want = x / 2.0
    for i in range(64):
        z = got[i] == 0.0
        rows, cols = z.all(axis=1), z.all(axis=0)
        keep = ~rows[:, None] & ~cols[None, :]
        assert np.array_equal(got[i][keep], want[i][keep])
        assert rows.sum() <= 2 * 19 and cols.sum() <= 2 * 7
    assert sum((got[i] == 0).any() for i in range(64)) > 60
