"""What a Loader yields for a native batch: tensors viewing the ring slot
(numpy arrays or memoryviews without torch), copied to device= or into
pinned memory (pin_memory=), and passed through collate_fn= as DataLoader
passes a batch's samples."""

from stoker._cuda_ring import PinnedRing
from stoker._native import DTYPES

try:
    import numpy as np
except ImportError:  # Batches come as memoryviews.
    np = None
try:
    import torch
except ImportError:  # numpy-only users
    torch = None


class Output:
    def __init__(self, fields, device, decode_device, pin_memory, collate_fn, slabs=False):
        self.fields = fields            # The Loader's fields= (None: a preset).
        self.device = device            # torch.device of device=, or None.
        self.decode_device = decode_device
        self.pin_memory = pin_memory    # Copies into pinned memory (no device=).
        self.collate_fn = collate_fn
        self.ring = PinnedRing()        # The ring as a GPU reads it.
        self.slabs = slabs              # Batches in GPU slabs (spec slabs).

    def tensors(self, batch):
        """{field: tensor} viewing the slot (no copy)."""
        views = batch.fields
        out = {}
        for name, dtype, _, _ in batch.field_specs():
            view = views[name]
            want = getattr(torch, DTYPES[dtype]["torch"], None)
            if want is not None and DTYPES[dtype]["numpy"] != dtype:
                # bfloat16: numpy sees raw patterns, torch the values.
                out[name] = torch.frombuffer(view, dtype=want).reshape(tuple(view.shape))
            elif want is None:
                # uint16 before torch 2.3: widened to int32 (a copy).
                flat = (np.asarray(view, dtype=np.int32) if np is not None
                        else list(view.cast("B").cast("H")))
                out[name] = torch.tensor(flat, dtype=torch.int32).reshape(
                    tuple(view.shape))
            elif np is not None:
                out[name] = torch.from_numpy(view)
            else:
                t = torch.frombuffer(view, dtype=want)
                out[name] = t.reshape(view.shape)
        return out

    def client_tensors(self, batch):
        """Ring views for the decoder (the ring pinned once for a GPU), and
        the members' values (lists, read out of the slot here)."""
        if self.decode_device.type == "cuda":
            self.ring.pin(batch)
        members = self.members(batch)
        out = {k: v for k, v in self.tensors(batch).items() if k not in members}
        out.update(members)
        return out

    def _moved(self, batch, tensors):
        """With device=, the batch's slabs on the GPU (slabs=), else
        asynchronous copies of `tensors` (the slot stays held until they
        complete; a private copy has no slabs)."""
        if self.device is not None and self.slabs and not batch.copied:
            on_gpu = batch.slab_fields()  # Already there: no copy.
            return {k: on_gpu[k] for k in tensors}
        if self.device is not None:
            return self.ring.copy(batch, tensors, self.device)
        return tensors

    def of_batch(self, batch):
        """The value a pass yields for a native batch."""
        members = self.members(batch)
        if torch is None:  # numpy arrays, or memoryviews of the slot
            views = batch.fields
            if self.fields is None:
                labels = views["label"]
                views = (views["image"], labels if np is None else labels.astype(np.int64))
            else:
                views = {k: v for k, v in views.items() if k not in members}
                views.update(members)
            return self.collated(views)
        tensors = {k: v for k, v in self.tensors(batch).items() if k not in members}
        out = self._moved(batch, tensors)
        out.update(members)
        return self.of_tensors(out)

    def members(self, batch):
        """{field: list of values} for the fields of shards' members and
        text fields (stoker.text): each sample's bytes, as str for text."""
        out = {}
        for f in self.fields or ():
            member = f.get("member", "")
            if not member and not f.get("text"):
                continue
            view = memoryview(batch.fields[f["name"]]).cast("B")
            stride = int(f["shape"][0])
            as_text = bool(f.get("text")) or member.endswith(("txt", "json"))
            values = []
            for at in range(0, len(view), stride):
                n = int.from_bytes(view[at:at + 4], "little")
                data = bytes(view[at + 4:at + 4 + n])
                values.append(data.decode("utf-8", errors="replace") if as_text else data)
            out[f["name"]] = values
        return out

    def of_tensors(self, out):
        """A preset's (images, int64 labels), or the fields' dict, collated,
        then with pin_memory= copied into pinned memory (as DataLoader
        pins what its collate_fn made)."""
        if self.fields is None:
            out = (out["image"], out["label"].to(torch.int64))
        out = self.collated(out)
        return _pinned(out) if self.pin_memory else out

    def collated(self, out):
        """collate_fn(list of the batch's samples), as DataLoader calls it:
        a sample is (image, label), or {field: value} with fields=."""
        if self.collate_fn is None:
            return out
        if isinstance(out, dict):
            n = len(next(iter(out.values())))
            return self.collate_fn([{k: v[i] for k, v in out.items()} for i in range(n)])
        return self.collate_fn(list(zip(*out)))


def _pinned(value):
    """Tensors in pinned memory, through tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return value.pin_memory()
    if isinstance(value, dict):
        return {k: _pinned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_pinned(v) for v in value)
    return value
