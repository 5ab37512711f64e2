"""Option objects of stoker.Loader, one per stoker.v1.SessionSpec message.

Each holds what its message holds, checks only Python types here (the
ranges and the rules between options are the daemon's, checked by the
library before a session is opened), and gives its message as a dict.
"""

from stoker._args import _check_int, _check_real


class Placement:
    """SessionSpec.placement: where the daemon decodes this Loader's samples.

    Args:
      node: the daemon's NUMA node (as `stokerctl stats` numbers them).
      gpu_bus_id: the PCI address of the GPU the batches feed
        ("0000:3b:00.0"), when torch cannot report it.
    Unset, the Loader finds the node of its device= GPU, else of this
    process's CPUs; the daemon takes the least loaded node otherwise.
    """

    def __init__(self, node=None, gpu_bus_id=None):
        self.node = None if node is None else _check_int("Placement.node", node, 0, 2**31 - 1)
        if gpu_bus_id is not None and not isinstance(gpu_bus_id, str):
            raise TypeError(f"Placement.gpu_bus_id must be a str, got "
                            f"{type(gpu_bus_id).__name__}")
        self.gpu_bus_id = gpu_bus_id

    def spec(self):
        out = {}
        if self.node is not None:
            out["node"] = self.node
        if self.gpu_bus_id is not None:
            out["gpu_bus_id"] = self.gpu_bus_id
        return out

    def __repr__(self):
        return f"Placement(node={self.node!r}, gpu_bus_id={self.gpu_bus_id!r})"


def device_placement(device):
    """SessionSpec.placement for a torch `device`: a GPU's PCI address
    (torch >= 2.2 reports its parts), else nothing."""
    if device is None or device.type != "cuda":
        return {}
    import torch
    props = torch.cuda.get_device_properties(device)
    parts = [getattr(props, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if not all(isinstance(p, int) for p in parts):
        return {}
    return {"gpu_bus_id": "%04x:%02x:%02x.0" % tuple(parts)}


class ClientDecode:
    """SessionSpec.client_decode: the JPEGs of image fields are decoded in
    this process, on `device` (torchvision's nvJPEG on "cuda[:N]"; "cpu" is
    slow, for testing), while the daemon still reads, caches, shards and
    draws each sample's crop and flip. Batches come on that device.

    Args:
      device: "cuda[:N]" (the default "cuda") or "cpu", or a torch.device.
      cpu_share: the share of each batch the daemon decodes: "auto" keeps
        both sides busy from their measured rates; a number in 0..1 fixes it
        (the same batches every run).
      max_bytes: files larger than this (1024..67108864; None: 262144, 256
        KiB: the ring holds that much per sample) are decoded by the daemon,
        as are CMYK and PNG files.
    Pixels are within rounding of the daemon's (decode="full").
    """

    def __init__(self, device="cuda", cpu_share="auto", max_bytes=None):
        # A str or a torch.device (torch is not imported here): which
        # devices work is client_decode.check_device's to say.
        if not isinstance(device, str) and type(device).__name__ != "device":
            raise TypeError(f"ClientDecode.device must be a str or a torch.device, "
                            f"got {type(device).__name__}")
        self.device = device
        if cpu_share != "auto":
            cpu_share = _check_real("ClientDecode.cpu_share", cpu_share)
        self.cpu_share = cpu_share
        self.max_bytes = None if max_bytes is None else _check_int(
            "ClientDecode.max_bytes", max_bytes, 0, 2**32 - 1)

    @property
    def fixed_share(self):
        """The fixed share, or None for "auto"."""
        return None if self.cpu_share == "auto" else self.cpu_share

    def spec(self, measured=None):
        """The message. For "auto", the share starts at `measured` (the
        split a previous session of the Loader arrived at), else at 0.5."""
        share = self.fixed_share
        if share is None:
            share = 0.5 if measured is None else measured
        out = {"cpu_share": share}
        if self.max_bytes is not None:
            out["max_bytes"] = self.max_bytes
        return out

    def __repr__(self):
        return (f"ClientDecode(device={self.device!r}, cpu_share={self.cpu_share!r}, "
                f"max_bytes={self.max_bytes!r})")


class PixelCache:
    """SessionSpec.pixel_cache, bounded: every picture is kept decoded in
    the daemon's pixel cache, scaled so its longer side is at most
    `max_side` (default 256); every epoch then only crops and resizes. A
    lower-resolution source than decoding each epoch, the same batches in
    every run. Excludes ClientDecode (the cache holds the daemon's pixels).
    The Loader's default, "auto", keeps pictures exactly when they fit.
    """

    def __init__(self, max_side=256):
        self.max_side = _check_int("PixelCache.max_side", max_side, 0, 2**32 - 1)

    def spec(self):
        return {"max_side": self.max_side}

    def __repr__(self):
        return f"PixelCache(max_side={self.max_side!r})"


def pixel_cache_spec(value):
    """The Loader's pixel_cache ("auto", None or a PixelCache) as the
    spec's field; None when the spec leaves it to the daemon (automatic)."""
    if isinstance(value, str) and value == "auto":
        return None
    if value is None:
        return {"off": True}
    if not isinstance(value, PixelCache):
        raise TypeError("pixel_cache must be \"auto\", None or a stoker.PixelCache, got "
                        f"{type(value).__name__}")
    return value.spec()


def check_option(name, value, kind):
    """`value` (None or a `kind`) for Loader argument `name`."""
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be None or a stoker.{kind.__name__}, got "
                        f"{type(value).__name__}")
    return value


# Loader arguments that became options, and what to write instead.
RENAMED = {
    "numa_node": "placement=stoker.Placement(node=N)",
    "train_cache": "pixel_cache=stoker.PixelCache(max_side=256)",
    "max_side": "pixel_cache=stoker.PixelCache(max_side=N)",
    "decode_device": "client_decode=stoker.ClientDecode(device='cuda')",
    "cpu_share": "client_decode=stoker.ClientDecode(cpu_share=...)",
    "decode_max_bytes": "client_decode=stoker.ClientDecode(max_bytes=N)",
}


def check_renamed(kwargs):
    """TypeError naming the option that replaced each old argument, or an
    unknown argument as Python names it."""
    for key in kwargs:
        if key in RENAMED:
            raise TypeError(f"Loader's {key}= is now {RENAMED[key]}")
        raise TypeError(f"Loader() got an unexpected keyword argument {key!r}")

