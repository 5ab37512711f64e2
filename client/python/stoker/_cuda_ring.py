"""A session's ring as a GPU reads it: its mapping registered with CUDA
(pinned) once per mapping, and the slots whose asynchronous copies to the
GPU are still in flight (each holds its slot until its copy is done).
torch is imported by the methods that need it: without a GPU nothing here
runs but make_room, on an empty list."""


class PinnedRing:
    def __init__(self):
        self._base = None    # The mapping registered with CUDA.
        self._pending = []   # (event, ring views) until their copies finish.

    def pin(self, batch):
        """Registers batch's ring mapping with CUDA unless it already is
        (a new mapping: the old one is unregistered first). A private
        copy's data (batch.copied) lie outside it and go up from pageable
        memory."""
        if self._base == batch.mapping_base:
            return
        import torch
        self.unpin()
        rc = torch.cuda.cudart().cudaHostRegister(batch.mapping_base, batch.mapping_size, 0)
        if int(rc) != 0:
            raise RuntimeError(f"cudaHostRegister of the ring ({batch.mapping_size} bytes) "
                               f"failed with CUDA error {int(rc)}")
        self._base = batch.mapping_base

    def copy(self, batch, tensors, device):
        """Asynchronous copies of `tensors` (views of batch's slot) to
        `device`; the slot stays held until they complete."""
        import torch
        self.pin(batch)
        gpu = {n: t.to(device, non_blocking=True) for n, t in tensors.items()}
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        self._pending.append((event, tensors))  # Holds the slot until copied.
        return gpu

    def make_room(self, slots):
        """Releases slots whose copies are done; waits while more than
        slots - 2 of a ring of `slots` are still copying."""
        self._pending = [(e, t) for e, t in self._pending if not e.query()]
        limit = max(1, slots - 2)
        while len(self._pending) > limit:
            self._pending.pop(0)[0].synchronize()

    def unpin(self):
        """Waits for every copy, then unregisters the mapping."""
        if self._base is None:
            return
        import torch
        for event, _ in self._pending:
            event.synchronize()
        self._pending.clear()
        torch.cuda.cudart().cudaHostUnregister(self._base)
        self._base = None


class _DeviceArray:
    """Device memory as __cuda_array_interface__ describes it, keeping its
    owner (a batch, holding its slot and slab) while a tensor uses it."""

    def __init__(self, address, typestr, shape, owner):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (int(address), False), "version": 2,
                                         "strides": None}
        self._owner = owner


def device_tensor(address, dtype, shape, owner):
    """A torch tensor over `shape` elements of `dtype` (an entry of the
    library's dtype table) at device `address`, keeping `owner` alive; no
    copy. The elements go as their numpy type, then are viewed as torch's
    (bfloat16 has no numpy type: its raw patterns go as uint16)."""
    import numpy as np
    import torch
    typestr = np.dtype(dtype["numpy"]).str
    # No device named: torch takes the pointer's, where naming another
    # (the current one) would copy.
    tensor = torch.as_tensor(_DeviceArray(address, typestr, shape, owner))
    return tensor.view(getattr(torch, dtype["torch"]))
