"""stoker.Loader: a torch DataLoader drop-in fed by the stokerd daemon."""

import inspect
import numbers
import os
import time

from stoker import _daemon, _opening, _report
from stoker._resume import Resume
from stoker._args import (_check_bool, _check_device, _check_int, _check_numbers, _check_real,
                          _source_spec, check_client_decode, default_rank_and_world_size)
from stoker.options import (ClientDecode, Placement, check_option, check_renamed,
                            device_placement, pixel_cache_spec)
from stoker._dataloader import DatasetView, SamplerView, Words
from stoker._native import SESSION_SETTINGS, lib
from stoker._output import Output
from stoker._torchvision import answer as _torchvision_answer
from stoker.errors import StokerError

try:
    import torch
except ImportError:  # numpy-only users
    torch = None


class Loader:
    """Iterates one epoch of (images, labels) per pass, like a DataLoader;
    or of {field: tensor} dicts with fields= and pipeline=.

    Args:
      dataset: a path, whose kind the library recognises by content, then
        by suffix in any case: an ImageFolder-style folder (sorted class
        sub-folders; JPEG and PNG files), a manifest file of
        `path[<TAB>path...]<TAB>label` lines (paths relative to `root`,
        default the manifest's folder; several paths per line are one
        sample's files, e.g. image and mask), an LMDB environment (a folder
        holding data.mdb), a .npy file of N samples, an ImageFolder in an
        object store, "s3://bucket/prefix/", or WebDataset shards there,
        "s3://bucket/shards/train-{000000..000146}.tar" (read with this
        process's AWS credentials: AWS_* variables or profiles); or a dict naming the
        source as stoker.v1.DatasetSpec does, under its kind's key, one of
        stoker.source_kinds(): {"lmdb": {"path": ..., "manifest": ...}}, {"npy": {"path": file or
        folder of .npy, "labels": .npy of N ints}}, {"hdf5": {"path": file
        or folder, "dataset": name, "labels": dataset name}}, {"s3": {"url":
        "s3://bucket/prefix/", "manifest": "s3://bucket/lists/train.tsv" or a
        local file}} (its `key<TAB>label` lines name objects below the prefix;
        lines of .tar keys name shards), with the spec's own keys beside
        it, e.g. {"hdf5": {...}, "samples_per_volume": 8} (each volume is 8
        samples of an epoch: 8 random patches). An opening that takes
        longer than 5 s (a large bucket's listing, shards read to index
        them) prints the daemon's progress of it to stderr every 5 s.
      batch_size: samples per batch (1..65536; None: 1, as DataLoader's).
        Every other argument is keyword-only. An argument that is a session
        setting takes the schema's default when None, and its range is
        checked by the daemon's rules (stoker.session_settings() lists them).
      transform: the preset, to be named: "train" (RandomResizedCrop +
        flip) or "val" (Resize + CenterCrop), both to image_size x
        image_size. No default: a DataLoader's transform lives in its
        dataset, so a swapped validation loader must not become random
        crops unasked. A torchvision transform is a ValueError that spells
        out the fields= and pipeline= doing the same.
      image_size: the preset's output side (1..4096; None: 224).
      fields, pipeline: instead of a preset, the batch's fields and the ops
        applied to each sample (stoker.image/mask/label/array/text and
        stoker.resize, center_crop, random_resized_crop, random_crop, flip,
        random_patch, normalize, or the dicts they return). Batches are then dicts of tensors by field
        name.
      shuffle, seed: shuffle False unset, as DataLoader's; seed 0, as
        DistributedSampler's (the same order on every rank).
        Each epoch's order is a function of (seed, epoch,
        partitions) alone, the same global order at any world size. WebDataset
        shards (local or in a bucket) are read in windows of 16 shards in
        the first epoch (epoch 0); an ImageFolder in a bucket, read by one
        rank, in two windows, each class's first 16 images then all the
        others (a world of several ranks waits for the whole listing and
        reads the whole order, so each node reads its own share; the state
        keeps which); each window's samples shuffled in turn; later epochs
        draw the whole order.
      partitions: the canonical partition count C of that order (1..65536;
        None: 120). The samples are placed in C partitions once per run, and each
        epoch visits them in turn, so a rank of a world size dividing C reads
        the same samples every epoch (a node caches its own share).
      exchange: the fraction of each partition read in another's place each
        epoch after the first, a new draw every epoch, so ranks' shares mix
        (in bytes too where a store lists the sizes; 0..1; None: 0.05; 0: each
        rank of a world size dividing the partitions the same samples every
        epoch). The state's order_key carries it.
      rank, world_size: DistributedSampler-style sharding of each global
        step of batch_size x world_size positions. None (default):
        torch.distributed's when initialised, else $RANK / $WORLD_SIZE
        (torchrun), else 0 and 1. state_dict() / load_state_dict() resume
        at any world size (see state_dict).
      drop_last: drop the last partial batch (and the uneven tail across
        ranks instead of padding it).
      dtype: "uint8" (NHWC 0..255: 4x less memory and PCIe, normalize on the
        GPU), or a float dtype, "float32" / "float16" / "bfloat16" (NCHW,
        normalized on the CPU as (x/255 - mean) / std, rounded to nearest
        even into 16-bit floats as torch does).
      mean, std: 3 values each for float dtypes, on the 0..1 scale of
        pixels / 255 as torchvision's (ValueError otherwise); default
        ImageNet's.
      device: None (CPU tensors viewing the ring) or "cuda[:N]" (the ring is
        pinned once; batches are copied with non_blocking=True and the slot
        is released after the copy completes).
      socket: the daemon's Unix socket. None: $STOKER_SOCKET (which must
        answer), else /run/stoker/stoker.sock if a daemon answers there,
        else this user's embedded daemon, shared by its processes on this
        node (started if needed).
      ring_slots: batches prefetched by the daemon (2..256; None: 4); more
        of them keep more held batches without copies (a
        loop holds the batch it took last while it takes the next: with 2,
        every batch after the first is a copy).
      threads: decode threads of an embedded daemon (ignored otherwise).
      timeout: seconds to wait for one batch before raising (None or 0: no limit;
        a vanished daemon is reported within a few seconds regardless).
      decode: "auto" (= "scale_crop": decode at the smallest DCT scale
        that keeps the crop at least image_size, and only the crop's
        rows/columns), "crop" (only the crop, full scale: same pixels as
        "full"), or "full" (every pixel: torchvision's pixels exactly).
      on_error: a sample that cannot be read or decoded is "replace"d by
        another one chosen deterministically (default; no blank image reaches
        training), makes the epoch "raise" StokerError("DATA_LOSS") naming
        the file, or stays "zeros". Replaced or zeroed samples are reported
        once per epoch with a SampleErrorWarning naming the files.
      resume_timeout: when the daemon dies or restarts, how long (seconds)
        to keep reconnecting before raising; the Loader then goes on at the
        next undelivered batch with the same data. 0: raise at once.
      starvation_threshold: warn at the end of an epoch when the training loop
        spent more than this fraction of it (and at least 0.2 s) waiting for
        data.
      priority: this Loader's weight (1..16; None: 1) when its user's
        sessions share a saturated daemon: users share the decode threads
        equally, and each user's part goes priority / (sum of that user's
        busy sessions' priorities) to this session.
      placement: a stoker.Placement (the daemon's NUMA node to decode on).
        None: the node of device= (its GPU's PCI address), else of this
        process's CPUs, else the least loaded one.
      pixel_cache: "auto" (default): the daemon keeps every picture decoded,
        exactly as decoding it gives it, when the dataset's pictures fit
        this user's share of its pixel cache (stats() says whether they
        did); later epochs then only crop and resize, with the same
        batches (a JPEG decoded per crop is kept once per DCT scale its
        crops take). None: decode every epoch. A
        stoker.PixelCache(max_side): keep every picture scaled to a longer
        side of at most max_side (a lower-resolution source, by choice).
      client_decode: a stoker.ClientDecode: the JPEGs of image fields are
        decoded in this process on its device (torchvision's nvJPEG), and
        batches come on that device.
      slabs: True, with device="cuda": the daemon copies each batch into
        GPU memory it shares with this process (SessionSpec.slabs, on the
        GPU of device=), and batches come as tensors there with no copy
        here. Not with client_decode.
      DataLoader's other arguments (sampler, batch_sampler, generator,
        pin_memory, collate_fn, num_workers, prefetch_factor,
        persistent_workers, worker_init_fn, ...) mean what they can here:
        a DistributedSampler's rank, world size, shuffle, seed and
        set_epoch; pinned copies; collate_fn over each batch's samples.
        What has no meaning (the workers: the daemon decodes) is said in
        one warning (stoker/_dataloader.py lists each). loader.dataset and
        loader.sampler answer len() as DataLoader's do.

    The spec these arguments make is checked with the daemon's own rules
    (the library links them) when the Loader is made: a bad value raises
    ValueError in the daemon's words before any daemon is reached.

    Yields `(images, labels)`: images a uint8 [B, S, S, 3] tensor (or a
    float [B, 3, S, S] one) that views the ring slot (no copy); the slot
    stays reserved while any view of it is alive. Once the application
    holds every slot but one, the next batches are private copies (one
    warning on stderr), so keeping batches (``list(loader)``) never
    stalls. labels an int64 [B] tensor. Without torch, numpy arrays. With
    fields=, a dict {name: tensor} of ring views instead.
    Each full pass advances the epoch; set_epoch(e) picks one explicitly.
    """

    def __init__(self, dataset, batch_size=None, *, transform=None, image_size=None,
                 shuffle=None, seed=None, rank=None, world_size=None, drop_last=None,
                 dtype=None, device=None, socket=None, ring_slots=None,
                 threads=None, root=None, timeout=None,
                 starvation_threshold=0.1, decode="auto", mean=None, std=None,
                 resume_timeout=60, on_error="replace", fields=None,
                 pipeline=None, priority=None, placement=None, pixel_cache="auto",
                 client_decode=None, partitions=None, exchange=None, slabs=False,
                 **dataloader):
        words = Words(dataloader)
        check_renamed(words.rest)
        if root is not None and not isinstance(root, (str, os.PathLike)):
            raise TypeError(f"root must be a path, got {type(root).__name__}")
        self._root = os.fspath(root) if root is not None else ""
        self._source = _source_spec(dataset, self._root)
        given = words.settings(dict(batch_size=batch_size, shuffle=shuffle, seed=seed,
                                    rank=rank, world_size=world_size, drop_last=drop_last))
        batch_size, shuffle, seed, drop_last = (given[k] for k in
                                                ("batch_size", "shuffle", "seed", "drop_last"))
        rank, world_size = given["rank"], given["world_size"]
        self.batch_size = _check_int("batch_size", batch_size)
        self._fields = None if fields is None else [dict(f) for f in fields]
        self._pipeline = [dict(op) for op in (pipeline or [])]
        if transform is not None and not isinstance(transform, str):
            raise ValueError(_torchvision_answer(transform))
        if self._fields is None:  # The preset: which one is the caller's to say.
            if transform is None:
                raise ValueError('transform= is needed with the preset: "train" (random '
                                 'resized crops and flips) or "val" (resize and center '
                                 'crop); or give fields= and pipeline=')
            dtype = "uint8" if dtype is None else dtype
        self.transform = transform
        self.image_size = None if image_size is None else _check_int("image_size", image_size)
        self.shuffle = _check_bool("shuffle", shuffle)
        self.seed = _check_int("seed", seed, 0, 2**64 - 1)
        if rank is None or world_size is None:
            env_rank, env_world = default_rank_and_world_size()
            rank = env_rank if rank is None else rank
            world_size = env_world if world_size is None else world_size
        self.world_size = _check_int("world_size", world_size)
        self.rank = _check_int("rank", rank)
        self.drop_last = _check_bool("drop_last", drop_last)
        self.partitions = None if partitions is None else _check_int("partitions", partitions)
        self.exchange = None if exchange is None else _check_real("exchange", exchange)
        if torch is not None and isinstance(dtype, torch.dtype):
            dtype = str(dtype).replace("torch.", "")
        self.dtype = dtype
        self._mean = _check_numbers("mean", mean)
        self._std = _check_numbers("std", std)
        self._ring_slots = None if ring_slots is None else _check_int("ring_slots", ring_slots)
        if threads is not None:
            _check_int("threads", threads)  # Its range is the daemon's.
        if socket is not None and not isinstance(socket, (str, os.PathLike)):
            raise TypeError(f"socket must be a path, got {type(socket).__name__}")
        if timeout is not None and (not isinstance(timeout, numbers.Real) or timeout < 0):
            raise ValueError(f"timeout must be a number of seconds >= 0 (0: no limit, as "
                             f"DataLoader's), got {timeout!r}")
        if not isinstance(starvation_threshold, numbers.Real) or not 0 < starvation_threshold <= 1:
            raise ValueError("starvation_threshold must be in (0, 1]")
        self.decode = decode
        if not isinstance(resume_timeout, numbers.Real) or resume_timeout < 0:
            raise ValueError("resume_timeout must be a number of seconds >= 0, "
                             f"got {resume_timeout!r}")
        self._resume_timeout = float(resume_timeout)
        self.on_error = on_error
        self._device = _check_device(device)
        self._priority = None if priority is None else _check_int("priority", priority)
        self._placement_option = check_option("placement", placement, Placement)
        self._pixel_cache = pixel_cache_spec(pixel_cache)
        self._client_decode = check_option("client_decode", client_decode, ClientDecode)
        self._decode_device = check_client_decode(client_decode, device, self._device)
        self._slabs = _check_bool("slabs", slabs)
        if self._slabs and (self._device is None or self._device.type != "cuda"):
            raise ValueError('slabs=True puts batches in the memory of device=\'s GPU: '
                             'give device="cuda[:N]"')
        self._resumption = Resume()  # What state_dict() saves and a resume checks.
        try:  # The daemon's rules, with the library's copy of its code.
            lib.check_spec(self._spec(0, 0, 0))
        except StokerError as e:
            if e.code != "INVALID_ARGUMENT":
                raise
            raise ValueError(e.message) from None
        self._decoder = None
        self._timeout = float(timeout) if timeout else None
        self._threshold = float(starvation_threshold)
        self._socket = os.fspath(socket) if socket is not None else None
        self._threads = threads
        self._client = None
        self._session = None
        # Positions are (epoch, from, batch): batch `batch` of the epoch's
        # global order read from position `from` (a resumed epoch's; else 0).
        self._stream = None       # The position the open session yields next.
        self._opened_first = None
        self._epoch = 0           # Epoch of the next pass.
        self._resume = (0, 0)     # (from, batch) the next pass starts at.
        self._position = (0, 0, 0)  # Next undelivered.
        self._words = words
        self._out = Output(self._fields, self._device, self._decode_device,
                           words.warn(self._device), words.collate_fn, self._slabs)
        self._ring = self._out.ring  # The ring as a GPU reads it.
        # DataLoader's attributes, as frameworks read them.
        self.pin_memory = self._out.pin_memory
        self.collate_fn = words.collate_fn
        self.num_workers = 0
        self.timeout = self._timeout or 0
        self.dataset = DatasetView(self, dataset)
        self.sampler = SamplerView(self)
        self._prefetch = None     # The client-decode pipeline of the last iterator.
        self._stopped = None      # One _close_prefetch stopped mid-pass.
        self._totals = {"batches": 0, "images": 0, "wait_seconds": 0.0,
                        "compute_seconds": 0.0}
        self._last_epoch = None

    # ----------------------------------------------------------- DataLoader API
    def __len__(self):
        """Batches per epoch for this rank. A dataset whose opening is
        streamed (shards or an ImageFolder in an object store) knows it once
        its shards are indexed or its classes listed: this waits for that."""
        if self._session is not None:  # Mid-pass too: the same for every epoch.
            self._check_order_key()
            session = self._session
        else:
            session = self._open(self._epoch, *self._resume)
        with _opening.while_streamed(session, self._client):
            return session.batches_per_epoch

    def set_epoch(self, epoch):
        """Selects the epoch of the next pass (like DistributedSampler). The
        epoch a loaded state resumes keeps its position."""
        epoch = _check_int("epoch", epoch, 0, SESSION_SETTINGS["start_epoch"]["max"])
        if epoch == self._epoch and self._resume != (0, 0):
            return
        self._epoch = epoch
        self._resume = (0, 0)
        self._position = (self._epoch, 0, 0)

    def state_dict(self):
        """Where to resume, the same on every rank: the epoch and the samples
        the whole world consumed of its global order ("consumed"), with what
        a resume must share (seed, shuffle, drop_last, partitions,
        "order_key": the pipeline's and these, None before a pass began; and
        "canonical_first_epoch": whether the first epoch, of a bucket's
        ImageFolder, read the whole listing's order or its windows). The
        world size and batch size are recorded, not required: load it at
        any world size. Its keys are the same at every point, as
        torch.distributed.checkpoint needs."""
        return self._resumption.state(self, self._position, self._session)

    def load_state_dict(self, state):
        """Resumes where state_dict() was taken, on the next pass: the same
        global order from the samples the world consumed, at this Loader's
        world size and batch size (keep batch_size for the same per-rank
        batch, or pass global batch / world_size for the same steps)."""
        epoch, consumed = self._resumption.load(self, state)
        self._epoch = epoch
        self._resume = (consumed, 0)
        self._position = (epoch, consumed, 0)

    def __iter__(self):
        if self._decode_device is None:
            for batch in self.batches():
                yield self._out.of_batch(batch)
            return
        from stoker import client_decode
        self._follow_sampler()
        # The next batch decodes while this one trains; the position moves
        # as each is handed out, not as it is read from the ring.
        epoch, undecodable = self._epoch, []
        self._close_prefetch()  # An iterator left behind still decodes.
        pipeline = self._prefetch = client_decode.prefetched(
            self._positioned(), self._out.client_tensors, lambda: self._decoder)
        for out, position, failed in pipeline:
            self._position = position
            if failed and self.on_error == "raise":
                raise StokerError("DATA_LOSS", "could not decode in this process: " +
                                  ", ".join(self._names(failed)))
            undecodable += failed
            yield self._out.of_tensors(out)
        if self._stopped is pipeline:
            raise StokerError("CANCELLED", "this pass was stopped before its end "
                                           "(Loader.close(), or a new pass began)")
        if self._stream[0] > epoch:  # The epoch's size came after its last batch.
            self._position = self._stream
        if undecodable:  # Zeros: the daemon had published them already.
            self._report_failures(epoch, undecodable, "could not be decoded in this "
                                  "process (past a valid header) and are zero images")

    def batches(self):
        """One epoch of native batches (images, labels, status, indices...),
        as the ring holds them: with client_decode=, the samples handed over
        are in F_jpeg / F_render, not yet in F."""
        for batch, position in self._positioned():
            self._position = position
            yield batch

    def _follow_sampler(self):
        """The epoch a sampler=DistributedSampler's set_epoch chose."""
        chosen = self._words.epoch()
        if chosen is not None:
            self.set_epoch(chosen)

    def _opened(self):
        """The session, opened for the next pass if none is."""
        if self._session is not None:
            return self._session
        return self._open(self._epoch, *self._resume)

    def _positioned(self):
        """batches(), each with the resume position after it."""
        self._follow_sampler()
        epoch, (start_from, start) = self._epoch, self._resume
        self._resume = (0, 0)
        session = self._open(epoch, start_from, start)
        waits, compute, images = [], 0.0, 0
        failed = []  # Dataset indices of samples that could not be used.
        returned = None
        b = start
        # A streamed opening: the epoch's size is known once the dataset's
        # opening ends; until then the pass ends at a batch of the next epoch.
        while not session.ended(b):
            t0 = time.perf_counter()
            if returned is not None:
                compute += t0 - returned
            self._ring.make_room(session.ring_slots)  # Slots still copying to a GPU.
            # The first batch may wait for a streamed opening (a world's
            # canonical first epoch waits for the whole listing).
            with _opening.while_streamed(session, self._client, returned is None):
                batch = session.next(self._timeout, epoch=epoch)
            if batch is None:
                break
            waits.append(time.perf_counter() - t0)
            b += 1
            self._stream = (epoch + 1, 0, 0) if session.ended(b) else (epoch, start_from, b)
            images += batch.samples
            if batch.error_count:
                failed += [int(i) for i, s in zip(batch.indices, batch.status) if s]
            returned = time.perf_counter()
            yield batch, self._stream
        if returned is not None:
            compute += time.perf_counter() - returned
        # The pass's end, also where the epoch's size came after its last batch.
        self._stream = self._position = (epoch + 1, 0, 0)
        if self._epoch == epoch:  # Not moved by set_epoch during the pass.
            self._epoch = epoch + 1
        self._account(epoch, waits, compute, images)
        if failed:
            self._report_failures(epoch, failed)

    # ------------------------------------------------------------ reporting
    def stats(self):
        """Time the loop waited for data versus worked between batches; with
        a session open, "pixel_cache": what the daemon keeps for it ("mode":
        kept, not-kept, partly-kept, estimating, bounded or off; "why"; its
        pictures' estimated "bytes"), and for a dataset in an object store
        "remote": the session's "requests" and "bytes", and per epoch
        ("epochs": {epoch: {"requests", "bytes"}}, its last 16); for a
        shuffled epoch of the canonical order, "order": how well it mixes
        ("partitions_per_step" of its "global_step", "spread") and its
        exchange ("exchanged" a partition, "exchange_by_bytes",
        "exchange_over_budget" partitions)."""
        t = dict(self._totals)
        busy = t["wait_seconds"] + t["compute_seconds"]
        t["wait_fraction"] = t["wait_seconds"] / busy if busy else 0.0
        t["images_per_second"] = t["images"] / busy if busy else 0.0
        t["last_epoch"] = self._last_epoch
        if self._decoder is not None:
            t["client_decode"] = self._decoder.split.stats()
        mine = _report.daemon_session(self._client, self._session)
        if mine is not None:
            t["pixel_cache"] = _report.pixel_cache(mine)
            for key, value in (("remote", _report.remote(mine)), ("order", _report.order(mine))):
                if value is not None:
                    t[key] = value
        return t

    def describe(self, indices):
        """What dataset sample indices (a native batch's ``indices``) are:
        per index a dict whose ``files`` list the sample's files (an image
        and its mask, a scan and its label volume), each a dict with its
        ``path`` and, for typed arrays, its ``shape`` and, for NIfTI
        volumes, its ``affine``: 4 x 4 nested lists, voxel index to world
        millimetres, as nibabel's ``img.affine``. At most 1024 indices."""
        session = self._session or self._open(self._epoch, *self._resume)
        return _report.described(session.describe(indices))

    def _account(self, epoch, waits, compute, images):
        self._last_epoch = _report.account(self._totals, epoch, waits, compute, images,
                                           self._threshold, self._client, self._session)

    def _names(self, indices):
        return _report.names(self._session, indices)

    def _report_failures(self, epoch, failed, what=None):
        _report.failures(self._session, epoch, failed, self.on_error, what,
                         self._client.socket if self._client is not None else None)

    # ------------------------------------------------------------ internals
    def _open(self, epoch, start, batch):
        first = self._resumption.canonical_first_epoch(self)
        if (self._session is not None and self._stream == (epoch, start, batch)
                and (epoch > 0 or self._opened_first == first)):
            self._check_order_key()
            return self._session
        self._close_session()
        if self._client is None:
            socket = self._socket or _daemon.daemon_socket(self._threads)
            self._client = lib.Client(socket)
        previous = self._decoder.split if self._decoder is not None else None
        spec = self._spec(epoch, start, batch, previous.share if previous is not None else None)
        with _opening.shown(self._client):
            self._session = self._client.open_session(spec)
        self._check_order_key()
        self._resumption.say_partitions(self._session, self.world_size)
        if self._decode_device is not None:
            from stoker import client_decode
            self._decoder = client_decode.ClientDecoder(
                self._session, self._decode_device, self._client_decode.fixed_share)
            if previous is not None:  # Go on from what was measured.
                self._decoder.split.adopt(previous)
        self._session.set_resume_window(self._resume_timeout)
        self._stream = (epoch, start, batch)
        self._opened_first = first  # Its canonical_first_epoch.
        return self._session

    def _check_order_key(self):
        """A loaded state against the open session (closed if it differs)."""
        try:
            self._resumption.check(self._session)
        except ValueError:
            self._close_session()
            raise

    def _spec(self, epoch, start, batch, measured_share=None):
        """The stoker.v1.SessionSpec of a session starting at batch `batch`
        of `epoch` read from position `start`, in protobuf's JSON mapping (enum values by their short
        names, 64-bit integers as strings); `measured_share`: client
        decode's split as a previous session left it."""
        spec = {
            "dataset": self._source,
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "seed": str(self.seed),
            "rank": self.rank,
            "world_size": self.world_size,
            "drop_last": self.drop_last,
            "start_epoch": str(epoch),
            "start_position": str(start),
            "start_batch": str(batch),
            "decode": self.decode,
            "on_error": self.on_error,
            "streamed_opening": True,
            "canonical_first_epoch": self._resumption.canonical_first_epoch(self),
            "placement": self._placement(),
        }
        given = {"ring_slots": self._ring_slots, "partitions": self.partitions,
                 "exchange": self.exchange, "priority": self._priority}
        spec.update({k: v for k, v in given.items() if v is not None})  # Else the schema's.
        if self._pixel_cache is not None:
            spec["pixel_cache"] = self._pixel_cache
        if self._client_decode is not None:
            spec["client_decode"] = self._client_decode.spec(measured_share)
        if self._slabs:
            spec["slabs"] = {"memory": "cuda"}
        if self._fields is not None:
            spec["fields"] = self._fields
        if self._pipeline:
            spec["pipeline"] = self._pipeline
        preset = {"transform": self.transform, "image_size": self.image_size,
                  "dtype": self.dtype, "mean": self._mean, "std": self._std}
        spec.update({k: v for k, v in preset.items() if v not in (None, [])})
        return spec

    def _placement(self):
        """Where this trainer runs (libstoker adds the CPU affinity)."""
        if self._placement_option is not None and self._placement_option.spec():
            return self._placement_option.spec()
        return device_placement(self._device)

    def _close_prefetch(self):
        """Stops the pipeline of an iterator that was left mid-epoch: its
        worker may still be copying out of the ring (on a GPU, by DMA from
        the pinned mapping), so it finishes before the ring goes. That
        iterator then ends. Called from within the running pipeline (as a
        pass opens its session) it does nothing."""
        gen = self._prefetch
        if gen is not None and inspect.getgeneratorstate(gen) == inspect.GEN_SUSPENDED:
            self._prefetch = None
            self._stopped = gen  # Its iterator raises if resumed.
            gen.close()

    def _close_session(self):
        self._close_prefetch()
        if self._session is not None:
            self._ring.unpin()
            session, self._session, self._stream = self._session, None, None
            try:
                session.close()
            except Exception:  # The daemon may already be gone.
                pass

    def close(self):
        """Closes the session; batches still held stay readable."""
        self._close_session()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
