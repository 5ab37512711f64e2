"""Training from the daemon's pixel cache (Loader pixel_cache=):
the same batches when every picture comes from the cache, bit-identical to
decode="full" when nothing is scaled, close to it (PSNR) when scaled, masks
kept to their values, bad arguments refused; and the automatic cache (the
default) bit-identical to decoding every epoch, saying what it kept."""

import math

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")

import stoker
from test_pipeline import loader, noise, write_manifest


def epochs(ld, n):
    out = []
    for e in range(n):
        ld.set_epoch(e)
        out += [images.clone() for images, _ in ld]
    return out


def psnr(a, b):
    mse = float(((torch.cat(a).double() - torch.cat(b).double()) ** 2).mean())
    return 10 * math.log10(255 ** 2 / mse) if mse else math.inf


def test_cached_batches_repeat_and_match_the_full_path(daemon, dataset):
    kw = dict(batch_size=4, transform="train", shuffle=True, image_size=64,
              socket=daemon.socket, seed=7, decode="full")
    full = epochs(stoker.Loader(dataset, **kw), 2)
    unscaled = epochs(stoker.Loader(dataset, pixel_cache=stoker.PixelCache(16384), **kw), 2)
    assert all(torch.equal(x, y) for x, y in zip(full, unscaled))
    first = epochs(stoker.Loader(dataset, pixel_cache=stoker.PixelCache(128), **kw), 2)
    again = epochs(stoker.Loader(dataset, pixel_cache=stoker.PixelCache(128), **kw), 2)
    assert len(first) == len(full) and all(torch.equal(x, y) for x, y in zip(first, again))
    # Random crops of a smaller picture are other windows; a fixed geometry
    # (val: resize + center crop) shows what the smaller source costs:
    # 260-340 px photos kept at 128 for a 64 px output.
    kw.update(transform="val", shuffle=False)
    quality = psnr(epochs(stoker.Loader(dataset, pixel_cache=stoker.PixelCache(128), **kw), 1),
                   epochs(stoker.Loader(dataset, **kw), 1))
    print(f"PSNR of max_side=128 against decode=full (val, 64 px): {quality:.1f} dB")
    assert 30 < quality < math.inf


def test_masks_keep_their_values_through_the_cache(daemon, tmp_path):
    rng = np.random.default_rng(5)
    rows = []
    for i in range(6):
        img = noise(rng, 80 + 4 * i, 120, 1)
        Image.fromarray(img).save(tmp_path / f"{i}.png")
        Image.fromarray((img // 64).astype(np.uint8)).save(tmp_path / f"{i}_m.png")
        rows.append((f"{i}.png", f"{i}_m.png", 0))
    ld = loader(daemon, write_manifest(tmp_path, rows),
                [stoker.image(32, 32, channels=1), stoker.mask(32, 32)],
                [stoker.random_resized_crop(32), stoker.flip()],
                shuffle=True, seed=2, pixel_cache=stoker.PixelCache(60))
    seen = set()
    for b in ld:
        seen |= set(torch.unique(b["mask"]).tolist())
    assert seen <= {0, 1, 2, 3} and len(seen) == 4  # Nearest: no blended classes.


def test_bad_arguments_are_refused(dataset):
    with pytest.raises(TypeError, match='pixel_cache must be "auto", None or a stoker.PixelCache'):
        stoker.Loader(dataset, batch_size=2, pixel_cache="decoded", transform="train", shuffle=True)
    with pytest.raises(TypeError, match=r"train_cache= is now pixel_cache=stoker\.PixelCache"):
        stoker.Loader(dataset, batch_size=2, train_cache="decoded", transform="train", shuffle=True)
    with pytest.raises(ValueError, match=r"pixel_cache.max_side 8 must be 0 \(automatic\) or 16..16384"):
        stoker.Loader(dataset, batch_size=2, transform="train",
                      pixel_cache=stoker.PixelCache(8))


def test_the_automatic_cache_keeps_pngs_exactly_and_says_so(daemon, tmp_path):
    rng = np.random.default_rng(11)
    for c in range(2):
        (tmp_path / f"class_{c}").mkdir()
        for i in range(12):
            Image.fromarray(noise(rng, 48, 48, 3)).save(tmp_path / f"class_{c}" / f"{i}.PNG")
    kw = dict(batch_size=8, transform="train", shuffle=True, image_size=40,
              socket=daemon.socket, seed=3)
    decoded = stoker.Loader(str(tmp_path), pixel_cache=None, **kw)
    want = epochs(decoded, 3)
    assert decoded.stats()["pixel_cache"]["mode"] == "off"
    kept = stoker.Loader(str(tmp_path), **kw)  # The default: "auto".
    got = epochs(kept, 3)
    assert len(got) == len(want) and all(torch.equal(x, y) for x, y in zip(got, want))
    assert not torch.equal(want[0], want[3])  # Each epoch draws its own crops.
    pixels = kept.stats()["pixel_cache"]
    assert pixels["mode"] == "kept", pixels
    assert pixels["bytes"] >= 24 * 48 * 48 * 3
