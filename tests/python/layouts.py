"""The JPEG layouts a decoder must read, plus CMYK and PNG, written from one
PIL picture each: for client-decode tests and bench/client_decode.py."""

import os

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
