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
