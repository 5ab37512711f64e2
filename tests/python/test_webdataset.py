"""WebDataset shards as Python's tarfile writes them (its default pax
format; long names), read through the daemon: the same batches as a manifest of
the same pictures in the same order, named by a shard pattern, a folder of
shards or one shard; a shard that lies is refused naming it."""

import os
import tarfile

import pytest

import stoker

torch = pytest.importorskip("torch")


def pictures(dataset):
    """(path, label) of the session dataset's JPEGs, class by class."""
    out = []
    for label, cls in enumerate(sorted(os.listdir(dataset))):
        for name in sorted(os.listdir(os.path.join(dataset, cls))):
            out.append((os.path.join(dataset, cls, name), label))
    return out


def write_shards(folder, items, per_shard):
    os.makedirs(folder, exist_ok=True)
    for s in range(0, len(items), per_shard):
        with tarfile.open(os.path.join(folder, f"train-{s // per_shard:06d}.tar"), "w") as tar:
            for i, (path, label) in enumerate(items[s:s + per_shard], start=s):
                key = f"{'long-folder-name/' * 6}{i:06d}"  # Past ustar's 100 bytes.
                tar.add(path, arcname=f"{key}.JPG")
                cls = os.path.join(folder, "cls.tmp")
                with open(cls, "w") as f:
                    f.write(f"{label}\n")
                tar.add(cls, arcname=f"{key}.cls")
                os.remove(cls)


def batches(ld):
    return [(x.clone(), y.clone()) for x, y in ld]


def test_shards_give_the_batches_of_the_same_pictures_listed(daemon, dataset, tmp_path):
    items = pictures(dataset)
    manifest = tmp_path / "train.tsv"
    manifest.write_text("".join(f"{p}\t{label}\n" for p, label in items))
    shards = tmp_path / "shards"
    write_shards(str(shards), items, per_shard=5)
    n = (len(items) + 4) // 5
    args = dict(batch_size=4, transform="val", image_size=40, shuffle=False,
                socket=daemon.socket)
    want = batches(stoker.Loader(str(manifest), **args))
    assert sum(len(y) for _, y in want) == len(items)
    for named in (str(shards / f"train-{{000000..{n - 1:06d}}}.tar"), str(shards)):
        got = batches(stoker.Loader(named, **args))
        assert len(got) == len(want), named
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy), named
    # One shard: its 5 pictures, the manifest's 6th to 10th.
    one = batches(stoker.Loader(str(shards / "train-000001.tar"), **args))
    assert torch.equal(torch.cat([y for _, y in one]), torch.cat([y for _, y in want])[5:10])
    assert torch.equal(torch.cat([x for x, _ in one]), torch.cat([x for x, _ in want])[5:10])


def test_a_shard_that_lies_is_refused_naming_it(daemon, tmp_path):
    good = tmp_path / "good.tar"
    with tarfile.open(good, "w") as tar:
        f = tmp_path / "a.jpg"
        f.write_bytes(b"\xff\xd8\xff" + b"x" * 2000)
        tar.add(f, arcname="a.jpg")
    data = bytearray(good.read_bytes())
    data[124:136] = b"77777777777\0"  # A size far past the end,
    data[148:156] = b" " * 8  # under a checksum that holds.
    data[148:155] = b"%06o\0" % sum(data[:512])
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(data))
    with pytest.raises(stoker.StokerError, match="bad.tar.*past the end") as e:
        next(iter(stoker.Loader(str(bad), batch_size=1, transform="train",
                                socket=daemon.socket)))
    assert e.value.code == "DATA_LOSS"


def caption_shards(dataset, tmp_path, per_shard=12):
    """Image-caption shards (CLIP's layout: .jpg, .txt, .json per key) of 12
    of the dataset's pictures, `per_shard` each, sample 5 without a
    caption: (folder, captions, metadata), the texts in sample order."""
    items = pictures(dataset)[:12]
    shards = tmp_path / "captions"
    shards.mkdir()
    captions, metas = {}, {}
    for i, (path, _) in enumerate(items):
        key = f"{i:06d}"
        with tarfile.open(shards / f"pairs-{i // per_shard:06d}.tar", "a") as tar:
            tar.add(path, arcname=f"{key}.jpg")
            captions[i] = "" if i == 5 else f"a photo, number {i} — «ünïcode» ✓" * (1 + i % 3)
            metas[i] = f'{{"key": "{key}", "width": {100 + i}}}'
            for ext, text in (("txt", captions[i]), ("json", metas[i])):
                if ext == "txt" and i == 5:
                    continue  # No caption for this one.
                member = tmp_path / f"m.{ext}"
                member.write_text(text, encoding="utf-8")
                tar.add(member, arcname=f"{key}.{ext}")
    return shards, [captions[i] for i in range(12)], [metas[i] for i in range(12)]


CAPTION_FIELDS = [stoker.image(32, 32), stoker.text("txt", name="caption", max_bytes=512),
                  stoker.text("json", name="meta")]
CAPTION_ARGS = dict(batch_size=5, shuffle=False, pipeline=[stoker.resize(width=32, height=32)])


def test_a_caption_shard_set_yields_its_captions(daemon, dataset, tmp_path):
    """Each batch's captions and metadata are the tar's members, str per
    sample; a sample without a caption gives ""; the pictures are those of
    the same shards read without captions."""
    shards, captions, metas = caption_shards(dataset, tmp_path)
    fields = CAPTION_FIELDS
    args = dict(CAPTION_ARGS, socket=daemon.socket)
    got = list(stoker.Loader(str(shards), fields=fields, **args))
    assert [len(b["caption"]) for b in got] == [5, 5, 2]
    assert [c for b in got for c in b["caption"]] == captions
    assert [m for b in got for m in b["meta"]] == metas
    plain = list(stoker.Loader(str(shards), fields=fields[:1], **args))
    for b, p in zip(got, plain):
        assert torch.equal(b["image"], p["image"])
    # Pictures decoded in this process: the same captions beside them.
    here = list(stoker.Loader(str(shards), fields=fields,
                              client_decode=stoker.ClientDecode("cpu", cpu_share=0), **args))
    assert [c for b in here for c in b["caption"]] == captions
    assert [m for b in here for m in b["meta"]] == metas
    # A caption over max_bytes is that sample's error, as any encoded field's.
    small = [fields[0], stoker.text("txt", name="caption", max_bytes=8)]
    with pytest.raises(stoker.StokerError, match=r"DATA_LOSS: 5 sample\(s\) of epoch 0 batch 0"):
        list(stoker.Loader(str(shards), fields=small, on_error="raise", **args))
    # A member of a source that keeps files is refused before any reading.
    with pytest.raises(ValueError, match="members are read from WebDataset shards"):
        stoker.Loader(dataset, fields=fields, **args)


def test_a_manifests_caption_files_are_its_text_field(daemon, dataset, tmp_path):
    """Caption files beside pictures in a manifest (`a.jpg<TAB>a.txt<TAB>
    label`): stoker.text(file=1) gives each batch's captions as str, equal
    to the files; the pictures and labels are those of the manifest."""
    items = pictures(dataset)[:7]
    lines, captions = [], []
    for i, (path, label) in enumerate(items):
        caption = f"picture {i}: «ünïcode» ✓ " * (1 + i % 2)
        (tmp_path / f"{i}.txt").write_text(caption, encoding="utf-8")
        lines.append(f"{path}\t{tmp_path / f'{i}.txt'}\t{label}")
        captions.append(caption)
    (tmp_path / "pairs.tsv").write_text("\n".join(lines) + "\n")
    fields = [stoker.image(32, 32), stoker.label(),
              stoker.text(file=1, name="caption", max_bytes=256)]
    got = list(stoker.Loader(str(tmp_path / "pairs.tsv"), batch_size=3, shuffle=False,
                             socket=daemon.socket, fields=fields,
                             pipeline=[stoker.resize(width=32, height=32)]))
    assert [len(b["caption"]) for b in got] == [3, 3, 1]
    assert [c for b in got for c in b["caption"]] == captions
    assert [int(v) for b in got for v in b["label"]] == [label for _, label in items]
    assert all(isinstance(c, str) for b in got for c in b["caption"])
    with pytest.raises(ValueError, match="exclude each other"):
        stoker.text("txt", file=1)
    # text applies to encoded fields only: the daemon's checker says so.
    bad = dict(stoker.label(), text=True)
    with pytest.raises(ValueError, match="text applies to encoded fields"):
        stoker.Loader(str(tmp_path / "pairs.tsv"), batch_size=3, socket=daemon.socket,
                      fields=[stoker.image(32, 32), bad],
                      pipeline=[stoker.resize(width=32, height=32)])
