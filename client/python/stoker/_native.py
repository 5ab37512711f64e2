"""Loads the compiled extension `_stoker` (built by Bazel into
bazel-bin/client/python) with a clear message when it is missing."""

import os
import sys

try:
    import _stoker as lib  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised by users, not tests
    _here = os.path.dirname(os.path.abspath(__file__))
    _built = os.path.normpath(os.path.join(_here, "..", "..", "..", "bazel-bin",
                                           "client", "python"))
    if os.path.exists(os.path.join(_built, "_stoker.so")) and _built not in sys.path:
        sys.path.append(_built)
        import _stoker as lib  # noqa: F401
    else:
        raise ImportError(
            "stoker's native extension _stoker.so is not built or not on "
            "PYTHONPATH: run `make` (bazel build //client/python:_stoker.so) "
            "and add bazel-bin/client/python to PYTHONPATH") from e
