"""Named fields and pipelines through a real stokerd: PNG decoded by
content and bit-exact with PIL, image + mask kept aligned by random
geometry, letterbox, bicubic against PIL, LMDB from Python, and bad specs
named by op and field."""

import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")

import stoker
from conftest import BIN


def loader(daemon, source, fields, pipeline, **kw):
    args = dict(batch_size=4, shuffle=False, socket=daemon.socket,
                on_error="zeros", fields=fields, pipeline=pipeline)
    args.update(kw)
    return stoker.Loader(source, **args)


def write_manifest(folder, rows):
    path = os.path.join(folder, "list.tsv")
    with open(path, "w") as f:
        for row in rows:
            f.write("\t".join(str(x) for x in row) + "\n")
    return path


def noise(rng, h, w, c):
    shape = (h, w) if c == 1 else (h, w, c)
    return rng.integers(0, 256, shape, dtype=np.uint8)


@pytest.mark.parametrize("mode, channels, name", [
    ("L", 1, "gray.png"), ("RGB", 3, "rgb.jpg"),   # A PNG named .jpg.
    ("RGBA", 4, "rgba.png"), ("P", 3, "palette.png"), ("LA", 3, "gray_alpha.png"),
])
def test_png_decodes_by_content_bit_exact_with_pil(daemon, tmp_path, mode,
                                                   channels, name):
    rng = np.random.default_rng(1)
    h, w = 23, 37
    pixels = noise(rng, h, w, {"L": 1, "RGB": 3, "RGBA": 4, "P": 1, "LA": 2}[mode])
    img = Image.fromarray(pixels, mode if mode != "P" else "L")
    if mode == "P":
        img = img.convert("RGB").quantize(colors=40)
    img.save(tmp_path / name, format="PNG")
    manifest = write_manifest(tmp_path, [(name, 3)] * 4)
    ld = loader(daemon, manifest, [stoker.image(h, w, channels), stoker.label()],
                [stoker.center_crop(w, h)])  # Same size: an identity.
    batch = next(iter(ld))
    want = np.asarray(Image.open(tmp_path / name).convert(
        {1: "L", 3: "RGB", 4: "RGBA"}[channels]))
    got = batch["image"][0].numpy()
    assert got.shape == want.reshape(h, w, channels).shape
    assert np.array_equal(got.reshape(want.shape), want)
    assert batch["label"].tolist() == [3] * 4


def test_masks_keep_palette_indices_and_16_bit_values(daemon, tmp_path):
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 21, (16, 24), dtype=np.uint8)
    pal = Image.fromarray(ids, "P")
    pal.putpalette(list(rng.integers(0, 256, 768, dtype=np.uint8)))
    pal.save(tmp_path / "voc.png")
    deep = rng.integers(0, 65536, (16, 24), dtype=np.uint16)
    Image.fromarray(deep).save(tmp_path / "depth.png")
    Image.fromarray(noise(rng, 16, 24, 3)).save(tmp_path / "img.jpg", quality=95)
    manifest = write_manifest(tmp_path, [("img.jpg", "voc.png", "depth.png", 0)] * 4)
    ld = loader(daemon, manifest,
                [stoker.image(16, 24), stoker.mask(16, 24, file=1),
                 stoker.mask(16, 24, name="depth", dtype="uint16", file=2)],
                [stoker.center_crop(24, 16)])
    b = next(iter(ld))
    assert np.array_equal(b["mask"][0].numpy(), ids)
    # torch before 2.3 has no uint16: widened to int32 there.
    want_dtype = getattr(torch, "uint16", torch.int32)
    assert b["depth"].dtype == want_dtype
    assert np.array_equal(b["depth"][0].numpy().astype(np.int64), deep)


def test_segmentation_recipe_keeps_mask_aligned(daemon, tmp_path):
    """A mask made from its image (threshold) stays the threshold of the
    transformed image through random crops, flips and letterbox padding."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(8):
        h, w = 40 + 7 * i, 90 - 5 * i
        img = noise(rng, h, w, 1)
        img[img == 0] = 1  # 0 only where padded.
        Image.fromarray(img).save(tmp_path / f"{i}.png")
        Image.fromarray((img > 128).astype(np.uint8)).save(tmp_path / f"{i}_m.png")
        rows.append((f"{i}.png", f"{i}_m.png", i % 3))
    manifest = write_manifest(tmp_path, rows)
    ld = loader(daemon, manifest,
                [stoker.image(48, 48, channels=1), stoker.mask(48, 48),
                 stoker.label()],
                [stoker.letterbox(64, interpolation="nearest"),
                 stoker.random_crop(48, 48), stoker.flip(),
                 stoker.flip(vertical=True)],
                shuffle=True, seed=4)
    padded = 0
    for epoch in range(3):
        for b in ld:
            image, mask = b["image"][..., 0], b["mask"]
            assert torch.equal((image > 128).to(torch.uint8), mask)
            padded += int((image == 0).sum())
    assert padded > 0  # The letterbox bars were cropped in.
    first = [b["image"].clone() for b in ld]
    ld.set_epoch(1)
    again = [b["image"].clone() for b in ld]
    ld.set_epoch(1)
    assert all(torch.equal(x, y) for x, y in zip(again, [b["image"] for b in ld]))
    assert not all(torch.equal(x, y) for x, y in zip(first, again))


def test_bicubic_and_bilinear_resize_close_to_pil(daemon, tmp_path):
    photos = "/usr/share/backgrounds/mate/nature"  # deploy/install-deps.sh
    src = Image.open(os.path.join(photos, sorted(os.listdir(photos))[0]))
    src = src.convert("RGB").resize((400, 300))
    src.save(tmp_path / "p.png")
    manifest = write_manifest(tmp_path, [("p.png", 0)] * 4)
    # Vertical pass first with an unrounded intermediate (PIL: horizontal
    # first, through clipped 8-bit rows): a level or two off, a few more
    # where bicubic overshoots at sharp edges.
    for interp, pil, worst in (("bicubic", Image.BICUBIC, 6),
                               ("bilinear", Image.BILINEAR, 2)):
        ld = loader(daemon, manifest, [stoker.image(90, 120)],
                    [stoker.resize(width=120, height=90, interpolation=interp)])
        got = next(iter(ld))["image"][0].numpy().astype(int)
        want = np.asarray(src.resize((120, 90), pil)).astype(int)
        diff = np.abs(got - want)
        assert diff.max() <= worst and diff.mean() < 0.3, (interp, diff.max(), diff.mean())


def test_not_an_image_is_a_per_sample_error_naming_the_file(daemon, tmp_path):
    Image.fromarray(noise(np.random.default_rng(6), 8, 8, 3)).save(tmp_path / "ok.png")
    (tmp_path / "text.png").write_bytes(b"hello, not a picture\n")
    manifest = write_manifest(tmp_path, [("ok.png", 0), ("text.png", 1)])
    ld = loader(daemon, manifest, [stoker.image(8, 8)], [stoker.center_crop(8)],
                batch_size=2)
    with pytest.warns(stoker.SampleErrorWarning, match="text.png"):
        batches = list(ld.batches())
    assert list(batches[0].status) == [0, 2]
    assert not batches[0].field("image")[1].any()


def test_lmdb_source_from_python(daemon, dataset, tmp_path):
    subprocess.run([os.path.join(BIN, "tests", "make_dataset"), "--out",
                    str(tmp_path / "files"), "--lmdb", str(tmp_path / "db"),
                    "--classes", "2", "--per_class", "3", "--seed", "9"],
                   check=True, capture_output=True)
    ld = stoker.Loader(str(tmp_path / "db"), batch_size=3, transform="val",
                       image_size=32, shuffle=False, socket=daemon.socket)
    labels = [int(x) for _, lab in ld for x in lab]
    assert labels == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("fields, pipeline, words", [
    ([stoker.image(8, 8)], [stoker.random_crop(8), {"blur": {}}], "(pipeline[1]) blur"),
    ([stoker.image(8, 8), stoker.mask(8, 8)],
     [stoker.center_crop(8), stoker.normalize([0.5], [0.5], fields=["mask"])],
     "pipeline[1] (normalize): field 'mask'"),
    ([stoker.image(8, 8)], [stoker.random_crop(9, 8)], "pipeline makes it 8x9"),
    ([stoker.image(8, 8, dtype="int16")], [stoker.center_crop(8)], "dtype int16"),
])
def test_bad_specs_are_refused_when_the_loader_is_made(dataset, fields, pipeline, words):
    # The daemon's checker, linked into the library: no daemon needed.
    with pytest.raises(ValueError) as e:
        stoker.Loader(dataset, batch_size=2, fields=fields, pipeline=pipeline,
                      socket="/nonexistent/stoker.sock", shuffle=True)
    assert words in str(e.value)


def test_what_the_data_decides_is_invalid_argument_from_the_daemon(daemon, dataset):
    ld = stoker.Loader(dataset, batch_size=2, socket=daemon.socket,
                       fields=[stoker.image(8, 8), stoker.mask(8, 8, file=3)],
                       pipeline=[stoker.center_crop(8)], shuffle=True)
    with pytest.raises(stoker.StokerError) as e:
        next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT"
    assert "fields read file 3 of each sample" in str(e.value)


def test_presets_and_fields_do_not_mix(dataset):
    with pytest.raises(ValueError, match="leave transform"):
        stoker.Loader(dataset, batch_size=2, transform="val",
                      fields=[stoker.label()], pipeline=[], shuffle=True)
