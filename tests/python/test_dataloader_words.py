"""DataLoader code moved to stoker.Loader as written: its arguments mean
what they can here or are said once in a warning, never a TypeError; its
defaults (no shuffle) hold; a transform must be named; a torchvision
transform is answered with the stoker ops doing the same."""

import warnings

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
transforms = pytest.importorskip("torchvision.transforms")

import stoker
from torch.utils.data import BatchSampler, DistributedSampler, RandomSampler, SequentialSampler


def labels_of(ld):
    return [int(v) for _, labels in ld for v in labels]


def test_positional_settings_and_an_unnamed_transform_are_refused(dataset):
    with pytest.raises(TypeError):
        stoker.Loader(dataset, 64, True)  # DataLoader's shuffle; here keyword-only.
    with pytest.raises(ValueError, match='transform= is needed with the preset: "train"'):
        stoker.Loader(dataset, batch_size=4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shufle'"):
        stoker.Loader(dataset, batch_size=4, transform="val", shufle=True)


def test_a_torchvision_transform_is_answered_with_the_ops_doing_the_same(dataset):
    train = transforms.Compose([
        transforms.RandomResizedCrop(224, scale=(0.35, 1)), transforms.RandomHorizontalFlip(),
        transforms.ColorJitter(0.4, 0.4, 0.4), transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    with pytest.raises(ValueError) as e:
        stoker.Loader(dataset, batch_size=4, transform=train)
    text = str(e.value)
    for words in ("torchvision Compose cannot be sent",
                  "stoker.image(224, 224, dtype='float32', chw=True), stoker.label()",
                  "stoker.random_resized_crop(224, 224, scale=(0.35, 1), ratio=(",
                  "stoker.flip(p=0.5)", "stoker.color_jitter(brightness=(0.6, 1.4)",
                  "stoker.normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])"):
        assert words in text, text
    # What it says is accepted as written, by the daemon's own checker.
    written = eval("dict(" + text.split("It reads as:", 1)[1] + ")", {"stoker": stoker})
    assert len(written["pipeline"]) == 4
    stoker.Loader(dataset, batch_size=4, socket="/nonexistent/stoker.sock", **written)
    val = transforms.Compose([transforms.Resize(256, interpolation=transforms.InterpolationMode
                                                .BICUBIC), transforms.CenterCrop(224),
                              transforms.PILToTensor()])
    with pytest.raises(ValueError) as e:
        stoker.Loader(dataset, batch_size=4, transform=val)
    written = eval("dict(" + str(e.value).split("It reads as:", 1)[1] + ")", {"stoker": stoker})
    assert written["fields"][0]["chw"] and written["pipeline"][0]["resize"]["interpolation"]
    stoker.Loader(dataset, batch_size=4, socket="/nonexistent/stoker.sock", **written)
    # What has no op is said, not dropped.
    with pytest.raises(ValueError, match=r"padding=4 has no stoker op"):
        stoker.Loader(dataset, batch_size=4, transform=transforms.RandomCrop(32, padding=4))


def test_dataloader_words_give_behaviour_or_one_warning(daemon, dataset):
    base = dict(batch_size=5, transform="val", image_size=32, socket=daemon.socket)
    want = [(x.clone(), y.clone()) for x, y in stoker.Loader(dataset, **base)]
    assert labels_of(stoker.Loader(dataset, **base)) == sorted(labels_of(
        stoker.Loader(dataset, **base)))  # No shuffle unless asked, as DataLoader.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ld = stoker.Loader(dataset, num_workers=8, persistent_workers=True, prefetch_factor=4,
                           worker_init_fn=print, multiprocessing_context="spawn",
                           pin_memory=True, timeout=0, **base)
    said = [str(w.message) for w in caught if "stoker" in str(w.message)]
    assert len(said) == 1, said
    assert "num_workers=8" in said[0] and "the daemon decodes on its own threads" in said[0]
    if not torch.cuda.is_available():
        assert "pin_memory=True but no CUDA device" in said[0]
    got = list(ld)
    assert all(torch.equal(x, wx) and torch.equal(y, wy) for (x, y), (wx, wy) in zip(got, want))
    assert (ld.num_workers, ld.timeout, ld.batch_size) == (0, 0, 5)
    # collate_fn gets the batch's samples, as DataLoader gives them.
    seen = []
    ld = stoker.Loader(dataset, collate_fn=lambda s: seen.append(len(s)) or s[0][1], **base)
    firsts = list(ld)
    assert seen == [5, 5, 5, 5, 4] and [int(v) for v in firsts] == [wy[0] for _, wy in want]
    from torch.utils.data import default_collate
    ld = stoker.Loader(dataset, collate_fn=default_collate, **base)
    assert all(torch.equal(x, wx) for (x, _), (wx, _) in zip(ld, want))


def test_samplers_and_generators_set_the_order(daemon, dataset):
    base = dict(batch_size=4, transform="val", image_size=32, socket=daemon.socket)
    n = 24
    dist = DistributedSampler(range(n), num_replicas=2, rank=1, shuffle=True, seed=5)
    # The sampler decides, shuffle=False being DataLoader's default.
    ld = stoker.Loader(dataset, sampler=dist, shuffle=False, **base)
    assert (ld.rank, ld.world_size, ld.shuffle, ld.seed) == (1, 2, True, 5)
    # A sampler nobody told of an epoch leaves the Loader's own.
    ld.set_epoch(2)
    assert {b.epoch for b in ld.batches()} == {2}
    explicit = stoker.Loader(dataset, rank=1, world_size=2, shuffle=True, seed=5, **base)
    # The sampler's set_epoch chooses the pass's epoch, as for a DataLoader.
    dist.set_epoch(3)
    got = [(b.epoch, [int(i) for i in b.indices]) for b in ld.batches()]
    explicit.set_epoch(3)
    want = [(b.epoch, [int(i) for i in b.indices]) for b in explicit.batches()]
    assert got == want and {e for e, _ in got} == {3}
    assert len(ld.sampler) == n // 2 and ld.sampler.num_replicas == 2
    assert len(ld.dataset) == n
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        stoker.Loader(dataset, sampler=dist, shuffle=True, **base)
    # RandomSampler and a generator: shuffled, seeded by the generator.
    g = torch.Generator().manual_seed(7)
    assert stoker.Loader(dataset, sampler=RandomSampler(range(n), generator=g), **base).seed == 7
    assert stoker.Loader(dataset, generator=g, shuffle=True, **base).seed == 7
    # A BatchSampler gives the batch size and drop_last.
    bs = BatchSampler(SequentialSampler(range(n)), batch_size=5, drop_last=True)
    ld = stoker.Loader(dataset, batch_sampler=bs, transform="val", image_size=32,
                       socket=daemon.socket)
    assert (ld.batch_size, ld.drop_last, len(ld)) == (5, True, 4)  # Not 5: the tail dropped.
    # A sampler that picks or weighs samples would read what it leaves out.
    from torch.utils.data import SubsetRandomSampler, WeightedRandomSampler
    for sampler in (SubsetRandomSampler(range(12)), WeightedRandomSampler([1.0] * n, n)):
        with pytest.raises(ValueError, match="name its files in a manifest"):
            stoker.Loader(dataset, sampler=sampler, **base)


def test_a_streamed_datasets_length_is_not_guessed(daemon, dataset, tmp_path):
    from test_webdataset import pictures, write_shards
    write_shards(str(tmp_path / "shards"), pictures(dataset), per_shard=5)
    ld = stoker.Loader(str(tmp_path / "shards"), batch_size=4, transform="val", image_size=32,
                       socket=daemon.socket)
    assert len(ld) == 6  # 24 pictures, batches of 4: known once the shards are indexed.
    # The count the opening answered, or none (a TypeError, as an
    # IterableDataset's), never a guess such as 0.
    for view in (ld.dataset, ld.sampler):
        try:
            assert len(view) == 24
        except TypeError as e:
            assert "opened as a stream" in str(e)
    from stoker._dataloader import _known
    with pytest.raises(TypeError, match="opened as a stream"):
        _known(0)
