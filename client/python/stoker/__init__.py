"""Stoker: batches from the stokerd daemon, zero-copy, as a DataLoader drop-in.

    import stoker
    loader = stoker.Loader("/data/train", batch_size=256, transform="train")
    for images, labels in loader:      # uint8 NHWC torch tensors (ring views)
        ...

Any sample, any pipeline: fields= and pipeline= (stoker.image, stoker.mask,
stoker.label, stoker.array, stoker.encoded; stoker.resize, letterbox, center_crop,
random_resized_crop, random_crop, flip, random_patch, normalize) yield dicts
of tensors by field name.

Pure Python over libstoker.so (ctypes): any CPython >= 3.8, with or without
numpy and torch. See Loader for the arguments. Errors reported by the daemon raise
StokerError, which carries the gRPC status code name and message.
"""

from stoker.errors import SampleErrorWarning, StokerError, StarvationWarning
from stoker import _native
from stoker.loader import Loader
from stoker.pipeline import (image, mask, label, array, encoded, resize, letterbox,
                             center_crop, random_resized_crop, random_crop,
                             flip, random_patch, normalize)
from stoker._daemon import daemon_socket, stop_embedded_daemon

__version__ = _native.version  # libstoker.so's, so package and library agree.

__all__ = ["Loader", "StokerError", "StarvationWarning", "SampleErrorWarning",
           "daemon_socket", "image", "mask", "label", "array", "encoded", "resize",
           "letterbox", "center_crop", "random_resized_crop", "random_crop",
           "flip", "random_patch", "normalize",
           "stop_embedded_daemon", "__version__"]
