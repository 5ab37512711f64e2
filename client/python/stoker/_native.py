"""ctypes binding of libstoker.so (the C ABI in client/c/stoker.h).

Pure Python: works in any CPython >= 3.8 with nothing to compile. Batches are
views of the ring slot without a copy: numpy arrays when numpy is present,
memoryviews otherwise; every view keeps its Batch (and so the slot) alive,
and the slot goes back to the daemon when the last view is gone.

ctypes releases the GIL around every foreign call, so a blocking next()
never holds up other Python threads.
"""

import collections
import ctypes
import json
import os
import struct
import sys

from stoker.errors import StokerError

try:
    import numpy as np
except ImportError:  # The memoryview path.
    np = None

ABI_VERSION = 1
MAX_FIELD_DIMS = 6  # STOKER_MAX_FIELD_DIMS
_HERE = os.path.dirname(os.path.abspath(__file__))

# gRPC's canonical code names, indexed by number (the C ABI returns numbers).
CODE_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
              "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
              "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
              "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
              "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
              "UNAUTHENTICATED")


def library_candidates():
    """Where libstoker.so is looked for, in order."""
    out = []
    if os.environ.get("STOKER_LIB"):
        out.append(os.environ["STOKER_LIB"])
    out.append(os.path.join(_HERE, "_lib", "libstoker.so"))        # wheel
    out.append(os.path.join(_HERE, "..", "..", "..", "libstoker.so"))  # bundle
    out.append(os.path.join(_HERE, "..", "..", "..", "bazel-bin", "client",
                            "c", "libstoker.so"))                  # source tree
    return [os.path.normpath(p) for p in out]


def _load():
    tried = []
    for path in library_candidates():
        if not os.path.exists(path):
            tried.append(path)
            continue
        if not os.access(path, os.R_OK):
            raise ImportError(
                f"stoker: {path} exists but this user cannot read it "
                "(a build tree of another user?); install the stoker wheel "
                "or release bundle, or set STOKER_LIB")
        return ctypes.CDLL(path)
    raise ImportError(
        "stoker: libstoker.so not found (looked at " + ", ".join(tried) +
        "); install the stoker wheel or release bundle, run `make` in a "
        "source tree, or set STOKER_LIB")


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class _BatchInfo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p),
                ("size_bytes", ctypes.c_uint64),
                ("sample_bytes", ctypes.c_uint64),
                ("dtype", ctypes.c_uint32),
                ("ndim", ctypes.c_uint32),
                ("shape", ctypes.c_uint64 * 4),
                ("samples", ctypes.c_uint32),
                ("error_count", ctypes.c_uint32),
                ("labels", ctypes.c_void_p),
                ("status", ctypes.c_void_p),
                ("indices", ctypes.c_void_p),
                ("epoch", ctypes.c_uint64),
                ("batch_index", ctypes.c_uint64),
                ("sequence", ctypes.c_uint64),
                ("mapping_base", ctypes.c_void_p),
                ("mapping_size", ctypes.c_uint64),
                ("copied", ctypes.c_uint32),
                ("reserved0", ctypes.c_uint32)]


class _FieldInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("data", ctypes.c_void_p),
                ("size_bytes", ctypes.c_uint64),
                ("sample_bytes", ctypes.c_uint64),
                ("dtype", ctypes.c_uint32),
                ("ndim", ctypes.c_uint32),
                ("shape", ctypes.c_uint64 * (1 + MAX_FIELD_DIMS)),
                ("slab", ctypes.c_void_p)]


class _DaemonDecode(ctypes.Structure):
    _fields_ = [("samples", ctypes.c_uint64), ("nanos", ctypes.c_uint64),
                ("threads", ctypes.c_uint32), ("share", ctypes.c_double)]


class _ChecksumState(ctypes.Structure):
    _fields_ = [("state", ctypes.c_uint64)]


def _declare(dll):
    p, c_int, c_double = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
    err = ctypes.POINTER(_Error)
    sig = {
        "stoker_abi_version": (ctypes.c_uint32, []),
        "stoker_version": (ctypes.c_char_p, []),
        "stoker_connect": (c_int, [ctypes.c_char_p, c_double,
                                   ctypes.POINTER(p), err]),
        "stoker_client_free": (None, [p]),
        "stoker_locate_daemon": (c_int, [ctypes.POINTER(p), err]),
        "stoker_socket_answers": (c_int, [ctypes.c_char_p]),
        "stoker_dtypes_json": (ctypes.c_char_p, []),
        "stoker_op_defaults_json": (ctypes.c_char_p, []),
        "stoker_source_kinds_json": (ctypes.c_char_p, []),
        "stoker_session_settings_json": (ctypes.c_char_p, []),
        "stoker_check_spec": (c_int, [ctypes.c_char_p, err]),
        "stoker_dataset_json": (c_int, [ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.POINTER(p), err]),
        "stoker_open_session": (c_int, [p, ctypes.c_char_p,
                                        ctypes.POINTER(p), err]),
        "stoker_session_info_json": (c_int, [p, ctypes.POINTER(p), err]),
        "stoker_session_id": (ctypes.c_uint64, [p]),
        "stoker_session_reconnects": (ctypes.c_uint64, [p]),
        "stoker_session_set_resume_window": (None, [p, c_double]),
        "stoker_session_set_cpu_share": (None, [p, c_double]),
        "stoker_session_daemon_decode": (c_int, [p, ctypes.POINTER(_DaemonDecode),
                                                 ctypes.c_size_t]),
        "stoker_session_describe_samples": (
            c_int, [p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                    ctypes.POINTER(p), err]),
        "stoker_session_describe": (
            c_int, [p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                    ctypes.POINTER(p), err]),
        "stoker_next": (c_int, [p, c_double, ctypes.POINTER(p), err]),
        "stoker_next_in_epoch": (c_int, [p, ctypes.c_uint64, c_double, ctypes.POINTER(p), err]),
        "stoker_session_batches_per_epoch": (c_int, [p, c_double,
                                                     ctypes.POINTER(ctypes.c_uint64), err]),
        "stoker_session_close": (c_int, [p, err]),
        "stoker_session_free": (None, [p]),
        "stoker_batch_get_info": (c_int, [p, ctypes.POINTER(_BatchInfo),
                                          ctypes.c_size_t]),
        "stoker_batch_release": (None, [p]),
        "stoker_batch_field_count": (ctypes.c_uint32, [p]),
        "stoker_batch_get_field": (c_int, [p, ctypes.c_uint32,
                                           ctypes.POINTER(_FieldInfo),
                                           ctypes.c_size_t]),
        "stoker_stats_json": (c_int, [p, ctypes.POINTER(p), err]),
        "stoker_health": (c_int, [p, err]),
        "stoker_string_free": (None, [p]),
        "stoker_checksum_init": (None, [ctypes.POINTER(_ChecksumState)]),
        "stoker_checksum_update": (None, [ctypes.POINTER(_ChecksumState), p,
                                          ctypes.c_size_t]),
        "stoker_checksum_value": (ctypes.c_uint64,
                                  [ctypes.POINTER(_ChecksumState)]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(dll, name)
        fn.restype, fn.argtypes = restype, argtypes
    return dll


_dll = _declare(_load())
if _dll.stoker_abi_version() != ABI_VERSION:
    raise ImportError(f"stoker: libstoker.so speaks ABI "
                      f"{_dll.stoker_abi_version()}, this package "
                      f"{ABI_VERSION}; install matching versions")
version = _dll.stoker_version().decode()


def _check(rc, err):
    if rc != 0:
        code = CODE_NAMES[rc] if 0 <= rc < len(CODE_NAMES) else str(rc)
        raise StokerError(code, err.message.decode(errors="replace"))


def _out(call, *args):
    """Calls a stoker_* function whose last two arguments are its result
    and the error; returns the result (a pointer) or raises StokerError."""
    err, out = _Error(), ctypes.c_void_p()
    _check(call(*args, ctypes.byref(out), ctypes.byref(err)), err)
    return out.value


def _take_json(call, *args):
    out = _out(call, *args)
    try:
        return json.loads(ctypes.string_at(out).decode())
    finally:
        _dll.stoker_string_free(out)


def _timeout(seconds):
    return -1.0 if seconds is None else float(seconds)


# The library's dtype table (shm/dtypes.h): names by STOKER_DTYPE_* code, the
# struct format of one element (16-bit floats as their raw patterns, "H":
# memoryview cannot cast to them), the numpy dtype a view has (bfloat16's raw
# patterns as uint16: numpy has no bfloat16) and the torch dtype of a tensor.
DTYPES = {d["name"]: d for d in json.loads(_dll.stoker_dtypes_json().decode())}
DTYPE_NAMES = {d["code"]: d["name"] for d in DTYPES.values()}
_VIEW_FORMATS = {d["name"]: d["format"] for d in DTYPES.values()}
_VIEW_FORMATS.update(uint32="I", uint64="Q")  # A batch's status and indices.
_NUMPY = {d["name"]: d["numpy"] for d in DTYPES.values()}
# The schema's op defaults (stoker_op_defaults_json), as the daemon applies them.
OP_DEFAULTS = json.loads(_dll.stoker_op_defaults_json().decode())
SOURCE_KINDS = json.loads(_dll.stoker_source_kinds_json().decode())
SESSION_SETTINGS = json.loads(_dll.stoker_session_settings_json().decode())


class _Owned:
    """Holds one native object and frees it once: explicitly, or when the
    Python object goes (also at interpreter exit, when _dll may be gone)."""

    _free = None    # Name of the stoker_* function that frees the handle.
    _handle = None

    def _release_handle(self):
        handle, self._handle = self._handle, None
        if handle and _dll is not None:
            getattr(_dll, self._free)(handle)

    def __del__(self):
        self._release_handle()


class _LateReleases:
    """Batches whose slabs a GPU may still read: each released once the
    work its device's current stream had queued when it was let go is done
    (an event, not a wait: the loop runs ahead as without slabs)."""

    def __init__(self):
        self._pending = collections.deque()  # (event, handle), oldest first.

    def defer(self, torch, device, handle):
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        self._pending.append((event, handle))
        self.release_done()

    def release_done(self, wait=False):
        """Releases those whose work is done (all, waiting, with `wait`)."""
        while self._pending and _dll is not None:
            event, handle = self._pending[0]
            if wait:
                event.synchronize()
            elif not event.query():
                return
            self._pending.popleft()
            _dll.stoker_batch_release(handle)


_GPU_LATE = _LateReleases()


class Batch(_Owned):
    """One ring slot, held until release() or until no view is left."""

    _free = "stoker_batch_release"

    def __init__(self, handle, slabs=None):
        self._handle = handle
        self._slab_kind = slabs  # The session's slabs' kind, or None.
        info = _BatchInfo()
        _dll.stoker_batch_get_info(handle, ctypes.byref(info),
                                   ctypes.sizeof(info))
        self._info = info
        self.samples = info.samples
        self.epoch = info.epoch
        self.batch_index = info.batch_index
        self.sequence = info.sequence
        self.error_count = info.error_count
        self.data_ptr = info.data or 0
        self.mapping_base = info.mapping_base or 0
        self.mapping_size = info.mapping_size
        # A private copy holds no ring slot (the application held the rest).
        self.copied = bool(info.copied)
        self.dtype = DTYPE_NAMES[info.dtype]
        self._specs = self._slabs = None

    def _view(self, address, dtype, shape):
        count = 1
        for d in shape:
            count *= d
        itemsize = struct.calcsize(_VIEW_FORMATS[dtype])
        raw = (ctypes.c_uint8 * (count * itemsize)).from_address(address or 0)
        raw._stoker_batch = self  # The view keeps the slot.
        if np is not None:
            return np.frombuffer(raw, dtype=_NUMPY.get(dtype, dtype)).reshape(shape)
        return memoryview(raw).cast("B").cast(_VIEW_FORMATS[dtype], shape)

    def field_specs(self):
        """(name, dtype name, shape with the batch dimension first, address)
        of every field, in the session's order."""
        if self._specs is None:
            out, slabs = [], []
            for i in range(_dll.stoker_batch_field_count(self._handle)):
                f = _FieldInfo()
                _dll.stoker_batch_get_field(self._handle, i, ctypes.byref(f),
                                            ctypes.sizeof(f))
                out.append((f.name.decode(), DTYPE_NAMES[f.dtype],
                            tuple(int(d) for d in f.shape[:f.ndim]), f.data))
                slabs.append(f.slab)
            self._specs, self._slabs = out, slabs
        return self._specs

    def slab_fields(self):
        """Every field as it is in the batch's slab (the spec's slabs), by
        name: views of host memory (MEMORY_HOST), or torch tensors on the
        GPU (MEMORY_CUDA), each keeping the slot as the ring's views do.
        ValueError without slabs, and for a private copy (copied: its slab
        went back with its slot). A GPU's slab goes back (and the daemon
        writes it next) once the work its device's current stream had
        queued when the batch was let go is done (checked at the next
        next()); work on other streams is the caller's to finish first."""
        specs = self.field_specs()
        if self._slab_kind is None or not all(self._slabs):
            raise ValueError("this batch has no slabs: " + (
                "the session did not ask for them (spec slabs)" if self._slab_kind is None
                else "it is a private copy, whose slab went back with its slot"))
        if self._slab_kind == "cuda":
            from stoker import _cuda_ring
            out = {name: _cuda_ring.device_tensor(address, DTYPES[dtype], shape, self)
                   for (name, dtype, shape, _), address in zip(specs, self._slabs)}
            self._on_gpu = next(iter(out.values())).device
            return out
        return {name: self._view(address, dtype, shape)
                for (name, dtype, shape, _), address in zip(specs, self._slabs)}

    @property
    def fields(self):
        """Every field as a new view, by name (in the session's order).
        The views, not the Batch, keep the slot: no cycle holds it."""
        return {name: self._view(address, dtype, shape)
                for name, dtype, shape, address in self.field_specs()}

    def field(self, name):
        for fname, dtype, shape, address in self.field_specs():
            if fname == name:
                return self._view(address, dtype, shape)
        raise KeyError(f"batch has no field {name!r}")

    @property
    def images(self):
        """The first field: the presets' pixels, uint8 NHWC or float32 /
        float16 NCHW normalized."""
        name, dtype, shape, address = self.field_specs()[0]
        return self._view(address, dtype, shape)

    @property
    def labels(self):
        """The "label" field (None without one)."""
        for name, dtype, shape, address in self.field_specs():
            if name == "label":
                return self._view(address, dtype, shape)
        return None

    @property
    def status(self):
        """Per-sample status: 0 ok, 1 read error, 2 decode error, 3 replaced."""
        return self._view(self._info.status, "uint32", (self.samples,))

    @property
    def indices(self):
        """Dataset sample index of each sample."""
        return self._view(self._info.indices, "uint64", (self.samples,))

    def _release_handle(self):
        device = getattr(self, "_on_gpu", None)
        torch = sys.modules.get("torch")
        if device is not None and self._handle and _dll is not None and torch is not None:
            # Its slab goes back once the reads queued on it are done.
            handle, self._handle = self._handle, None
            _GPU_LATE.defer(torch, device, handle)
            return
        super()._release_handle()

    def release(self):
        """Returns the slot now; views taken earlier must not be used. A
        private copy (copied) holds no slot: its memory goes with its last
        view."""
        if not self.copied:
            self._release_handle()


class Session(_Owned):
    _free = "stoker_session_free"

    def __init__(self, handle):
        self._handle = handle
        info = _take_json(_dll.stoker_session_info_json, handle)
        # The kind of its slabs (spec slabs): "host", "cuda", or None.
        self.slabs = info["ring"].get("slab_kind") or None
        # 0 in the answer to a streamed opening: known at its end (below).
        self._batches_per_epoch = int(info["batches_per_epoch"])
        self._size_failed = False
        self.samples_per_epoch = int(info["samples_per_epoch"])
        self.dataset_samples = int(info["dataset_samples"])
        self.num_classes = int(info["num_classes"])
        # What a resume state must match (the daemon's OrderKey).
        self.order_key = int(info.get("order_key", 0))
        # The order's canonical partitions in effect (0: not known yet).
        self.partitions = int(info.get("partitions", 0))
        self.ring_slots = int(info["ring"]["slots"])  # The daemon's count.
        self.skipped_files = int(info["skipped_files"])
        # Image fields the client decodes (spec client_decode).
        self.client_decode = info.get("client_decode", [])

    @property
    def batches_per_epoch(self):
        """This rank's batches per epoch; for a streamed opening, waits for
        the dataset's opening to end (StokerError if it failed)."""
        if not self._batches_per_epoch:
            rc, err, n = self._size(-1.0)
            _check(rc, err)
            self._batches_per_epoch = n
        return self._batches_per_epoch

    @property
    def batches_known(self):
        """Whether batches_per_epoch would answer without waiting (False
        for good once the opening failed: next() then gives the batches
        left, then the error)."""
        if not self._batches_per_epoch and not self._size_failed:
            rc, _, n = self._size(0.0)
            if rc == 0:
                self._batches_per_epoch = n
            elif CODE_NAMES[rc] not in ("DEADLINE_EXCEEDED", "UNAVAILABLE"):
                self._size_failed = True  # The opening failed: never (not yet, or a restart).
        return bool(self._batches_per_epoch)

    def _size(self, timeout):
        """stoker_session_batches_per_epoch: (code, error, batches)."""
        err, out = _Error(), ctypes.c_uint64()
        rc = _dll.stoker_session_batches_per_epoch(self._handle, timeout, ctypes.byref(out),
                                                   ctypes.byref(err))
        return rc, err, out.value

    def ended(self, batches):
        """Whether `batches` batches make this rank's epoch, as far as known."""
        return self.batches_known and batches >= self.batches_per_epoch

    @property
    def id(self):
        """The daemon's session id (a new one after a resume)."""
        return _dll.stoker_session_id(self._handle)

    def describe_samples(self, indices):
        """File paths of dataset sample indices of this session."""
        return self._describe(_dll.stoker_session_describe_samples, indices)

    def describe(self, indices):
        """The daemon's DescribeSamplesResponse for dataset sample indices,
        as a dict (paths, and per index its files' paths, shapes, affines)."""
        return self._describe(_dll.stoker_session_describe, indices)

    def _describe(self, call, indices):
        arr = (ctypes.c_uint64 * len(indices))(*[int(i) for i in indices])
        return _take_json(call, self._handle, arr, len(indices))

    def set_resume_window(self, seconds):
        """How long next() tries to reconnect to a restarted daemon."""
        _dll.stoker_session_set_resume_window(self._handle, float(seconds))

    def set_cpu_share(self, share):
        """Client decode: the share of each batch the daemon decodes (0..1)."""
        _dll.stoker_session_set_cpu_share(self._handle, float(share))

    def daemon_decode(self):
        """Client decode: the daemon's (samples, nanoseconds summed over
        threads, threads, share in effect) for this session."""
        d = _DaemonDecode()
        _dll.stoker_session_daemon_decode(self._handle, ctypes.byref(d),
                                          ctypes.sizeof(d))
        return d.samples, d.nanos, d.threads, d.share

    @property
    def reconnects(self):
        """Times next() reconnected to a restarted daemon and went on."""
        return _dll.stoker_session_reconnects(self._handle)

    def next(self, timeout=None, epoch=None):
        """The next batch; with `epoch`, None where the next batch is of a
        later epoch (this epoch's pass ended; nothing is taken)."""
        _GPU_LATE.release_done()  # GPU slabs whose reads are done go back.
        if epoch is None:
            return Batch(_out(_dll.stoker_next, self._handle, _timeout(timeout)), self.slabs)
        try:
            return Batch(_out(_dll.stoker_next_in_epoch, self._handle, int(epoch),
                              _timeout(timeout)), self.slabs)
        except StokerError as e:
            if e.code == "OUT_OF_RANGE":
                return None
            raise

    def close(self):
        _GPU_LATE.release_done(wait=True)
        err = _Error()
        _check(_dll.stoker_session_close(self._handle, ctypes.byref(err)), err)


class Client(_Owned):
    _free = "stoker_client_free"

    def __init__(self, socket, timeout=5.0):
        self.socket = os.fspath(socket)
        self._handle = _out(_dll.stoker_connect, self.socket.encode(),
                            float(timeout))

    def open_session(self, spec):
        """Opens a session from a SessionSpec dict (protobuf's JSON mapping)."""
        return Session(_out(_dll.stoker_open_session, self._handle,
                            json.dumps(spec).encode()))

    def stats(self):
        return _take_json(_dll.stoker_stats_json, self._handle)

    def health(self):
        err = _Error()
        _check(_dll.stoker_health(self._handle, ctypes.byref(err)), err)


def check_spec(spec):
    """Checks a SessionSpec dict with the daemon's own rules (those that do
    not depend on the data): StokerError INVALID_ARGUMENT in its words."""
    err = _Error()
    _check(_dll.stoker_check_spec(json.dumps(spec).encode(), ctypes.byref(err)), err)


def locate_daemon():
    """The daemon to use when none is named: {"socket", "embedded", "log",
    "described"} (stoker_locate_daemon), or StokerError UNAVAILABLE."""
    return _take_json(_dll.stoker_locate_daemon)


def socket_answers(path):
    """Whether something accepts a connection at the Unix socket `path`."""
    return bool(_dll.stoker_socket_answers(os.fsencode(path)))


def dataset_json(dataset, root=""):
    """The DatasetSpec dict the library makes of `dataset` (a path it
    recognises, or one source as JSON text) and `root`; paths absolute."""
    return _take_json(_dll.stoker_dataset_json, dataset.encode(), root.encode())


class Checksum:
    """The order-sensitive content hash stokerctl prints."""

    def __init__(self):
        self._state = _ChecksumState()
        _dll.stoker_checksum_init(ctypes.byref(self._state))

    def update(self, buffer):
        view = memoryview(buffer).cast("B")
        if view.nbytes == 0:
            data = None
        elif view.readonly:
            data = ctypes.cast(ctypes.c_char_p(view.tobytes()), ctypes.c_void_p)
        else:
            data = ctypes.addressof(ctypes.c_char.from_buffer(view))
        _dll.stoker_checksum_update(ctypes.byref(self._state), data, view.nbytes)

    @property
    def hex(self):
        return "%016x" % _dll.stoker_checksum_value(ctypes.byref(self._state))


# The module is the binding: `from stoker._native import lib` then lib.Client.
lib = sys.modules[__name__]
