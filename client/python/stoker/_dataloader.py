"""torch.utils.data.DataLoader's arguments as stoker.Loader takes them.
Each one means something here or is explained in the Loader's one
warning; none is a TypeError:

- sampler: a DistributedSampler gives num_replicas, rank, shuffle and
  seed (its drop_last or the Loader's), and its set_epoch, once called, is
  read at each pass; a RandomSampler shuffles (with its generator's seed),
  a SequentialSampler does not. A sampler that picks or weighs samples
  (SubsetRandomSampler, WeightedRandomSampler, one of your own) is a
  ValueError: ignored, it would read samples it was meant to leave out.
- batch_sampler: a BatchSampler's batch_size, drop_last and sampler.
- generator: its initial_seed() seeds the order.
- timeout: 0 is no limit, as DataLoader's.
- pin_memory: each batch copied into pinned (page-locked) memory, as
  DataLoader's, so .to("cuda", non_blocking=True) is asynchronous; without
  CUDA, a warning, as DataLoader gives.
- collate_fn: applied to the list of each batch's samples, as DataLoader
  applies it.
- num_workers, prefetch_factor, persistent_workers, worker_init_fn,
  multiprocessing_context, pin_memory_device, in_order: the daemon decodes
  on its own threads and prefetches ring_slots batches; given other than
  DataLoader's defaults, the warning says so.
"""

import warnings

try:
    import torch
except ImportError:
    torch = None

# The worker settings, with DataLoader's defaults.
WORKER_DEFAULTS = {"num_workers": 0, "prefetch_factor": None, "persistent_workers": False,
                   "worker_init_fn": None, "multiprocessing_context": None,
                   "pin_memory_device": "", "in_order": True}
# What the Loader's own arguments are when neither they nor a sampler say.
# seed 0 as DistributedSampler's: a seed drawn per process (as a bare
# RandomSampler draws one) would give each rank of a job another order.
DEFAULTS = {"batch_size": 1, "shuffle": False, "seed": 0, "drop_last": False}


def _sampler_class(name):
    data = getattr(getattr(torch, "utils", None), "data", None) if torch is not None else None
    return getattr(data, name, None)


class Words:
    """The DataLoader arguments among a Loader's keyword arguments."""

    def __init__(self, kwargs):
        self.rest = dict(kwargs)  # Neither the Loader's nor DataLoader's.
        take = self.rest.pop
        self.sampler = take("sampler", None)
        self.batch_sampler = take("batch_sampler", None)
        self.generator = take("generator", None)
        self.collate_fn = take("collate_fn", None)
        if self.collate_fn is not None and not callable(self.collate_fn):
            raise TypeError(f"collate_fn must be callable, got "
                            f"{type(self.collate_fn).__name__}")
        self.pin_memory = bool(take("pin_memory", False))
        self.workers = {k: take(k) for k in WORKER_DEFAULTS if k in self.rest}
        self.epochs = None  # A DistributedSampler whose set_epoch a pass reads,
        self.epoch_seen = None  # and its epoch when last read.
        self.notes = []

    def settings(self, given):
        """`given`: the Loader's batch_size, shuffle, seed, rank, world_size
        and drop_last as passed (None: not given). They, resolved with
        what the samplers say and the defaults."""
        out = dict(given)
        bs = self.batch_sampler
        if bs is not None:
            if not isinstance(bs, _sampler_class("BatchSampler") or ()):
                raise ValueError(f"batch_sampler={type(bs).__name__}: the daemon makes the "
                                 "batches; give batch_size= (and sampler=, drop_last=)")
            out["batch_size"] = bs.batch_size if out["batch_size"] is None else out["batch_size"]
            out["drop_last"] = bs.drop_last if out["drop_last"] is None else out["drop_last"]
            self.sampler = self.sampler or bs.sampler
        self._from_sampler(out)
        if self.generator is not None and out["seed"] is None:
            out["seed"] = int(self.generator.initial_seed()) % 2**64
        for key, value in DEFAULTS.items():
            if out.get(key) is None:
                out[key] = value
        return out

    def _from_sampler(self, out):
        s = self.sampler
        if s is None:
            return
        if out["shuffle"]:  # As DataLoader.
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if isinstance(s, _sampler_class("DistributedSampler") or ()):
            # The sampler decides, as it does for a DataLoader.
            out.update(world_size=s.num_replicas, rank=s.rank, shuffle=s.shuffle, seed=s.seed,
                       drop_last=bool(out["drop_last"]) or s.drop_last)
            self.epochs, self.epoch_seen = s, s.epoch
            if type(s) is not _sampler_class("DistributedSampler"):
                self.notes.append(f"{type(s).__name__}'s own order is not used, only its "
                                  "settings (the daemon orders the samples)")
        elif isinstance(s, _sampler_class("RandomSampler") or ()):
            out["shuffle"] = True
            if s.generator is not None and self.generator is None:
                self.generator = s.generator
            if s.replacement or s._num_samples is not None:
                self.notes.append("RandomSampler's replacement and num_samples are not used "
                                  "(each epoch is a permutation of the dataset)")
        elif isinstance(s, _sampler_class("SequentialSampler") or ()):
            out["shuffle"] = False
        else:
            raise ValueError(
                f"sampler={type(s).__name__}: the daemon orders the samples (shuffle=, seed=, "
                "rank=, world_size=), and a sampler that picks or weighs them cannot be sent; "
                "for a subset, name its files in a manifest and pass that as the dataset")

    def warn(self, device):
        """The one warning, where something given has no effect here;
        whether batches are copied into pinned memory."""
        notes = list(self.notes)
        odd = {k: v for k, v in self.workers.items() if v != WORKER_DEFAULTS[k]}
        if odd:
            notes.append(", ".join(f"{k}={v!r}" for k, v in odd.items()) +
                         " has no meaning here: the daemon decodes on its own threads and "
                         "prefetches ring_slots batches (its threads: the daemon's --threads, "
                         "or threads= for an embedded daemon)")
        pin = self.pin_memory and device is None
        if pin and (torch is None or not torch.cuda.is_available()):
            notes.append("pin_memory=True but no CUDA device is available: batches stay "
                         "unpinned")
            pin = False
        if notes:
            warnings.warn("stoker.Loader: " + "; ".join(notes), UserWarning, stacklevel=3)
        return pin

    def epoch(self):
        """The epoch a DistributedSampler's set_epoch chose since it was
        last read, or None (an untouched sampler leaves the Loader's own,
        a loaded state's included)."""
        if self.epochs is None or self.epochs.epoch == self.epoch_seen:
            return None
        self.epoch_seen = self.epochs.epoch
        return int(self.epoch_seen)


class DatasetView:
    """loader.dataset, as frameworks read DataLoader.dataset: the dataset
    as given (`source`), and len() its samples (the daemon counts them)."""

    def __init__(self, loader, given):
        self._loader = loader
        self.source = given

    def __len__(self):
        return _known(self._loader._opened().dataset_samples)

    def __repr__(self):
        return f"stoker dataset {self.source!r}"


class SamplerView:
    """loader.sampler, as a DistributedSampler reads: num_replicas, rank,
    shuffle, seed, drop_last, epoch, set_epoch(); len() the samples this
    rank reads an epoch. The daemon orders them: there is nothing to
    iterate here."""

    def __init__(self, loader):
        self._loader = loader

    num_replicas = property(lambda self: self._loader.world_size)
    rank = property(lambda self: self._loader.rank)
    shuffle = property(lambda self: self._loader.shuffle)
    seed = property(lambda self: self._loader.seed)
    drop_last = property(lambda self: self._loader.drop_last)
    epoch = property(lambda self: self._loader._epoch)

    def set_epoch(self, epoch):
        self._loader.set_epoch(epoch)

    def __len__(self):
        return _known(self._loader._opened().samples_per_epoch)


def _known(n):
    """A count the session's opening answered; a dataset opened as a stream
    (shards, a bucket) answered none, as an IterableDataset has no len()."""
    if n == 0:
        raise TypeError("this dataset was opened as a stream (shards or a bucket): its "
                        "sample count is not known here; len(loader) gives its batches")
    return n
