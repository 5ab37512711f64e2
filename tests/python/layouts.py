"""The JPEG layouts a decoder must read, plus CMYK and PNG, written from one
PIL picture each: for client-decode tests and bench/client_decode.py; and
real photographs cut into ImageNet-sized tiles (photo_tiles) for benches."""

import glob
import os

PHOTOS = "/usr/share/backgrounds/mate/nature"  # deploy/install-deps.sh

LAYOUTS = ["444", "422", "420", "gray", "progressive", "cmyk", "png"]
DAEMON_ONLY = {"cmyk", "png"}  # The daemon decodes these whatever the split.


def save(picture, layout, stem):
    """Writes RGB `picture` as `layout` to stem + ".jpg" (".png"); the path."""
    path = stem + (".png" if layout == "png" else ".jpg")
    if layout in ("444", "422", "420"):
        picture.save(path, quality=90, subsampling=("444", "422", "420").index(layout))
    elif layout == "gray":
        picture.convert("L").save(path, quality=90)
    elif layout == "progressive":
        picture.save(path, quality=90, progressive=True)
    elif layout == "cmyk":
        picture.convert("CMYK").save(path, quality=90)
    else:
        picture.save(path)
    return path


def write_folder(root, pictures):
    """One class folder per layout ("<k>_<layout>", so a label names its
    layout), each holding every picture in that layout."""
    for k, layout in enumerate(LAYOUTS):
        folder = os.path.join(root, f"{k}_{layout}")
        os.makedirs(folder)
        for i, p in enumerate(pictures):
            save(p, layout, os.path.join(folder, str(i)))


def photo_tiles(per_photo=4):
    """Debian's mate-backgrounds photographs, each scaled to 1000 px tall and
    cut into `per_photo` tiles of 500x375 and 375x500 in turn, spread along
    its diagonal; [] where the package is missing."""
    from PIL import Image
    tiles = []
    for path in sorted(glob.glob(os.path.join(PHOTOS, "*.jpg"))):
        im = Image.open(path).convert("RGB")
        small = im.resize((im.width * 1000 // im.height, 1000))
        for k in range(per_photo):
            w, h = (500, 375) if k % 2 == 0 else (375, 500)
            x = (small.width - w) * k // max(1, per_photo - 1)
            y = (1000 - h) * k // max(1, per_photo - 1)
            tiles.append(small.crop((x, y, x + w, y + h)))
    return tiles
