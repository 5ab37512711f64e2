"""Batches in slabs (the spec's slabs; shm/FORMAT.md, "Batches in slabs"):
each batch's fields in its ring slot's slab, handed over with the ring and
ordered by fences, through the real daemon and the C ABI."""

import os

import pytest

np = pytest.importorskip("numpy")

import stoker
from stoker._native import lib


def spec(dataset, **more):
    return {"dataset": {"folder": {"path": dataset}}, "batch_size": 4, "transform": "VAL",
            "image_size": 16, "ring_slots": 3, **more}


def test_host_slabs_hold_each_batch_as_the_ring_does(daemon, dataset):
    client = lib.Client(daemon.socket)
    plain = client.open_session(spec(dataset))
    slabbed = client.open_session(spec(dataset, slabs={"memory": "host"}))
    assert (plain.slabs, slabbed.slabs) == (None, "host")
    batches = 3 * slabbed.batches_per_epoch  # Each slot carries several.
    for _ in range(batches):
        a, b = plain.next(timeout=30), slabbed.next(timeout=30)
        ring, slab = b.fields, b.slab_fields()
        assert list(slab) == list(ring) == ["image", "label"]
        for name in ring:
            assert slab[name].ctypes.data != ring[name].ctypes.data
            assert np.array_equal(slab[name], ring[name])
            # A session without slabs has the very same batches.
            assert np.array_equal(a.fields[name], ring[name])
        with pytest.raises(ValueError, match="did not ask for them"):
            a.slab_fields()
        a.release()
        b.release()
    plain.close()
    slabbed.close()


def test_a_copied_batch_gives_its_slab_back_with_its_slot(daemon, dataset):
    client = lib.Client(daemon.socket)
    s = client.open_session(spec(dataset, ring_slots=2, slabs={}))
    held = [s.next(timeout=30)]
    copied = s.next(timeout=30)  # The application holds the other slot.
    assert copied.copied
    with pytest.raises(ValueError, match="private copy"):
        copied.slab_fields()
    assert np.array_equal(held[0].slab_fields()["image"], held[0].images)
    held.pop().release()
    # Had the copy kept its slab, the daemon would wait for it for good.
    for _ in range(4):
        b = s.next(timeout=30)
        assert np.array_equal(b.slab_fields()["image"], b.images)
        b.release()
    s.close()


def test_gpu_slabs_name_their_gpu_and_need_one(daemon, dataset):
    client = lib.Client(daemon.socket)
    with pytest.raises(stoker.StokerError, match="need placement.gpu_bus_id"):
        client.open_session(spec(dataset, slabs={"memory": "MEMORY_CUDA"}))
    with pytest.raises(stoker.StokerError, match="slabs and client_decode exclude each other"):
        client.open_session(spec(dataset, slabs={}, client_decode={}))
    with pytest.raises(stoker.StokerError, match="slabs.memory must be one of host, cuda"):
        client.open_session(spec(dataset, slabs={"memory": "MEMORY_TPU"}))
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is here: bench/gpu_checks.sh runs the GPU's slabs")
    except ImportError:
        pass
    with pytest.raises(stoker.StokerError) as refused:
        client.open_session(spec(dataset, slabs={"memory": "MEMORY_CUDA"},
                                 placement={"gpu_bus_id": "0000:3b:00.0"}))
    assert refused.value.code == "FAILED_PRECONDITION"
    assert "no CUDA driver" in str(refused.value) or "CUDA_ERROR" in str(refused.value)
    # The daemon goes on serving.
    s = client.open_session(spec(dataset, slabs={}))
    assert s.next(timeout=30).samples == 4
    s.close()


def test_the_loader_takes_slabs_on_a_gpu_only(dataset):
    with pytest.raises(ValueError, match='give device="cuda'):
        stoker.Loader(dataset, 4, transform="val", slabs=True)
    with pytest.raises(TypeError, match="slabs must be a bool"):
        stoker.Loader(dataset, 4, transform="val", slabs="cuda")


def test_handed_slabs_hold_no_descriptor_of_the_daemons(private_daemon, dataset):
    """Once handed over, a session's slabs and fences are the trainer's
    descriptors alone: a user's many sessions cannot use up the daemon's."""
    client = lib.Client(private_daemon.socket)
    fds = f"/proc/{private_daemon.proc.pid}/fd"

    def daemons_memory_files():
        links = []
        for fd in os.listdir(fds):
            try:
                links.append(os.readlink(os.path.join(fds, fd)))
            except OSError:  # Closed meanwhile.
                pass
        return [link for link in links if link.startswith("/memfd:")]

    s = client.open_session(spec(dataset, ring_slots=64, slabs={}))
    s.next(timeout=30).release()
    files = daemons_memory_files()
    assert any("stoker." in f for f in files), files  # The ring's: it keeps one.
    assert not [f for f in files if "stoker-slab" in f or "stoker-fences" in f], files
    s.close()
