"""Argument checks of stoker.Loader, and the distributed job's rank."""

import json
import numbers
import os

from stoker._native import lib
from stoker.errors import StokerError

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None


def _check_int(name, value, lo=None, hi=None):
    """An int (not a bool); within lo..hi when given. Ranges a spec's field
    has are the daemon's to check (stoker_check_spec), not given here."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if lo is not None and not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {value}")
    return int(value)


def _source_spec(dataset, root):
    """The DatasetSpec for a Loader's `dataset`, as the library names it: a
    path is recognised there, and paths are made absolute."""
    if isinstance(dataset, dict):
        def text(v):
            return os.fspath(v) if isinstance(v, os.PathLike) else v
        try:
            named = json.dumps({
                kind: ({k: text(v) for k, v in dict(src).items()}
                       if not isinstance(src, (int, str)) else src)
                for kind, src in dataset.items()})
        except (TypeError, ValueError) as e:
            raise TypeError(f"a dataset dict is {{kind: {{field: value}}}} (and "
                            f"DatasetSpec scalars such as samples_per_volume): {e}") from None
    elif isinstance(dataset, (str, os.PathLike)):
        named = os.fspath(dataset)
    else:
        raise TypeError(f"dataset must be a path or a dict, got {type(dataset).__name__}")
    try:
        return lib.dataset_json(named, root)
    except StokerError as e:
        if e.code != "INVALID_ARGUMENT":
            raise
        raise ValueError(e.message) from None


def _check_numbers(name, value):
    if value is None:
        return []
    try:
        return [float(v) for v in value]
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be numbers, got {value!r}") from None


def _check_real(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    return float(value)


def _check_bool(name, value):
    if not isinstance(value, bool) and not (np is not None and isinstance(value, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def _check_device(device):
    if device is None:
        return None
    if torch is None:
        raise ValueError("device= needs torch, which is not installed")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be None, a str or a torch.device, "
                        f"got {type(device).__name__}")
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ValueError(f"device {device!r} is not a valid torch device") from e
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        raise ValueError(f"device must be None, 'cpu' or 'cuda[:N]', got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not "
                         "available here (torch.cuda.is_available() is False); "
                         "use device=None and move batches yourself")
    return dev


def default_rank_and_world_size():
    """(rank, world_size) of this process in a distributed job: from
    torch.distributed when it is initialised, else from the RANK and
    WORLD_SIZE environment variables that torchrun sets, else (0, 1)."""
    if torch is not None:
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is not None and world is not None:
        try:
            return int(rank), int(world)
        except ValueError:
            raise ValueError(f"RANK={rank!r} and WORLD_SIZE={world!r} must be "
                             "integers") from None
    return 0, 1


def check_client_decode(option, device, checked_device):
    """The torch.device a ClientDecode option decodes on (None without
    one); its device and the Loader's device= must agree."""
    if option is None:
        return None
    if torch is None:
        raise ValueError("client_decode= needs torch and torchvision")
    from stoker import client_decode
    dev = client_decode.check_device(option.device)
    if checked_device is not None and \
            (checked_device.type, checked_device.index or 0) != (dev.type, dev.index or 0):
        raise ValueError(f"device={device!r} and ClientDecode.device={option.device!r} "
                         "differ: batches come on the decode device")
    return dev
