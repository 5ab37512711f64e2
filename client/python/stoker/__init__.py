"""Stoker: batches from the stokerd daemon, zero-copy, as a DataLoader drop-in.

    import stoker
    loader = stoker.Loader("/data/train", batch_size=256, transform="train", shuffle=True)
    for images, labels in loader:      # uint8 NHWC torch tensors (ring views)
        ...

Any sample, any pipeline: fields= and pipeline= (the fields stoker.image,
mask, label, array, encoded, text and the ops stoker.resize, center_crop,
random_crop, flip, color_jitter, ..., all of stoker.pipeline) yield dicts of
tensors by field name.

Pure Python over libstoker.so (ctypes): any CPython >= 3.8, with or without
numpy and torch. See Loader for the arguments. Errors reported by the daemon raise
StokerError, which carries the gRPC status code name and message.
"""

from stoker.errors import SampleErrorWarning, StokerError, StarvationWarning
from stoker import _native
from stoker.loader import Loader
from stoker.options import ClientDecode, PixelCache, Placement
from stoker import pipeline as _pipeline
from stoker.pipeline import *  # noqa: F401,F403 (every field and op helper)
from stoker._daemon import daemon_socket, stop_embedded_daemon

__version__ = _native.version  # libstoker.so's, so package and library agree.


def op_defaults():
    """Every op's parameter defaults as the daemon applies them to what a
    spec leaves unset: {"flip": {"probability": 0.5}, ...} (a copy)."""
    import copy
    return copy.deepcopy(_native.OP_DEFAULTS)


def session_settings():
    """The session's settings with a default or a range, as the daemon
    applies and checks them: {"ring_slots": {"default": 4, "min": 2,
    "max": 256}, "batch_size": {"min": 1, "max": 65536}, ...} (a copy). A
    Loader argument left None takes the default."""
    import copy
    return copy.deepcopy(_native.SESSION_SETTINGS)


def source_kinds():
    """The source kinds a dataset dict may name: ["folder", "list", ...]."""
    return list(_native.SOURCE_KINDS)


__all__ = ["Loader", "Placement", "PixelCache", "ClientDecode", "StokerError", "StarvationWarning", "SampleErrorWarning",
           "daemon_socket", "stop_embedded_daemon", "op_defaults", "session_settings",
           "source_kinds", "__version__",
           *_pipeline.__all__]
