"""Batches an application keeps past the ring's slots: a list of a whole
epoch is the epoch's batches, as iterated, with one warning."""

import shutil

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

import stoker
from conftest import _generated


@pytest.fixture(scope="module")
def two_hundred():
    folder = _generated("stoker-pyds-held-", "--classes", "4", "--per_class", "50",
                        "--min_side", "24", "--max_side", "40", "--seed", "11")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_list_of_the_loader_is_its_epoch(daemon, two_hundred, capfd):
    ld = stoker.Loader(two_hundred, batch_size=25, transform="val", image_size=32,
                       shuffle=False, socket=daemon.socket)
    iterated = [(images.clone(), labels.clone()) for images, labels in ld]
    assert "copied out of the ring" not in capfd.readouterr().err
    held = list(ld)
    err = capfd.readouterr().err
    assert len(held) == len(iterated) == 8
    for (images, labels), (want_images, want_labels) in zip(held, iterated):
        assert torch.equal(images, want_images) and torch.equal(labels, want_labels)
    assert sorted(torch.cat([labels for _, labels in held]).tolist()) == \
        sorted([c for c in range(4) for _ in range(50)])
    # One warning, saying how to avoid the copies.
    assert err.count("copied out of the ring") == 1, err
    assert "more ring slots" in err
    # Two more epochs kept at once: still the same batches, and no more
    # warnings from the same session.
    more = list(ld) + list(ld)
    assert len(more) == 16
    for (images, _), (want, _) in zip(more, iterated + iterated):
        assert torch.equal(images, want)
    assert "copied out of the ring" not in capfd.readouterr().err
    # Every batch kept is intact after all that.
    for (images, _), (want, _) in zip(held, iterated):
        assert torch.equal(images, want)
    ld.close()
