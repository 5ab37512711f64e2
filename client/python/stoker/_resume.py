"""A Loader's resume state: what state_dict() saves (the epoch and the
samples the whole world consumed of its global order, the same on every
rank), what load_state_dict() checks at once (seed, shuffle, drop_last) and
what it checks against the next session the daemon opens (its order key and
dataset size), and the one warning a world size off the order's partitions
gets. The order's rules stay the daemon's: this keeps and compares what the
daemon answered."""

import warnings

from stoker._args import _check_bool, _check_int
from stoker._native import SESSION_SETTINGS

# Kept by the Loader and compared here at load.
SHARED = ("seed", "shuffle", "drop_last")


class Resume:
    def __init__(self):
        self.order_key = None  # The last session's (or a loaded state's) order key.
        self._expected_key = None  # A loaded state's, until a session checks it.
        self._expected_samples = None  # Its dataset's size, where it was known.
        self._said_partitions = False  # Whether a world size off C was named.
        self._canonical_first = None  # A loaded state's first epoch, as it began.

    def canonical_first_epoch(self, loader):
        """SessionSpec.canonical_first_epoch: as a loaded state's first
        epoch began, where it resumes within that epoch; else the daemon's
        default for this world size."""
        if self._canonical_first is not None:
            return self._canonical_first
        return loader.world_size > 1

    def state(self, loader, position, session):
        """state_dict() of `loader` at `position` (epoch, from, batch)."""
        epoch, start, batch = position
        world = loader.world_size
        consumed = start + batch * loader.batch_size * world
        samples = session.dataset_samples if session is not None else 0
        if samples:  # The last batch of a resumed epoch ends it.
            consumed = min(consumed, samples)
        elif self._expected_samples:
            samples = self._expected_samples
        state = {"epoch": epoch, "consumed": consumed,
                 **{k: getattr(loader, k) for k in SHARED},
                 "partitions": loader.partitions, "world_size": loader.world_size,
                 "batch_size": loader.batch_size,
                 "canonical_first_epoch": self.canonical_first_epoch(loader),
                 # The same keys at every point (None until known):
                 # torch.distributed.checkpoint loads into the keys of the
                 # state it is given, a new Loader's.
                 "order_key": self.order_key, "samples": samples or None}
        return state

    def load(self, loader, state):
        """Takes a state for `loader`: (epoch, consumed)."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict, got {type(state).__name__}")
        for key in SHARED:
            if key in state and state[key] != getattr(loader, key):
                raise ValueError(f"state {key}={state[key]!r} does not match this "
                                 f"Loader's {key}={getattr(loader, key)!r}")
        epoch = _check_int("state['epoch']", state.get("epoch"), 0,
                           SESSION_SETTINGS["start_epoch"]["max"])
        if "consumed" in state:
            consumed = _check_int("state['consumed']", state["consumed"], 0, 2**63)
        else:  # A state saved before "consumed": its batch at its own sizes.
            batch = _check_int("state['batch']", state.get("batch"), 0, 2**63)
            consumed = batch * _check_int("state['batch_size']",
                                          state.get("batch_size", loader.batch_size)) * \
                (_check_int("state['world_size']", state.get("world_size", loader.world_size)) or 1)
            if batch and state.get("shuffle", loader.shuffle):
                warnings.warn("stoker: this state was saved before the order became one "
                              "global order at any world size; the epoch goes on at the same "
                              "count of samples, not at the same samples", stacklevel=3)
        first = state.get("canonical_first_epoch")
        if first is not None:
            first = _check_bool("state['canonical_first_epoch']", first)
        if first is None and epoch == 0 and consumed and "consumed" in state and \
                state.get("shuffle", loader.shuffle):
            first = False  # Its first epoch read its windows, as all did then.
            warnings.warn("stoker: this state was saved within the first epoch by a stoker "
                          "whose first epoch had another order; the epoch goes on at the "
                          "same count of samples, not at the same samples", stacklevel=3)
        # Only a first epoch resumed part way must go on in its own order.
        self._canonical_first = first if epoch == 0 and consumed else None
        key, samples = state.get("order_key"), state.get("samples")
        self._expected_key = None if key is None else _check_int(
            "state['order_key']", key, 0, 2**64 - 1)
        self.order_key = self._expected_key
        self._expected_samples = None if samples is None else _check_int(
            "state['samples']", samples, 0, 2**63)
        return epoch, consumed

    def check(self, session):
        """A loaded state against the session the daemon opened for it:
        ValueError when it was saved by another order or dataset."""
        if self._expected_key is not None and session.order_key != self._expected_key:
            raise ValueError("the state loaded was saved by a run of another order: its "
                             "seed, shuffle, drop_last, partitions, exchange or pipeline "
                             "differ")
        samples = session.dataset_samples
        if self._expected_samples and samples and samples != self._expected_samples:
            raise ValueError(f"the state loaded was saved over {self._expected_samples} "
                             f"samples; this dataset has {samples}")
        self._expected_key = self._expected_samples = None
        self.order_key = session.order_key

    def say_partitions(self, session, world_size):
        """Says once when the world size does not divide the order's
        partitions: ranks' shares then move between epochs."""
        c, w = session.partitions, world_size
        if self._said_partitions or c <= 1 or c % w == 0:
            return
        self._said_partitions = True
        warnings.warn(f"stoker: world_size {w} does not divide the order's {c} partitions, "
                      "so each rank's samples move between epochs and each node reads more "
                      "from storage; a world size dividing it (or partitions= one that "
                      f"{w} divides) keeps each node's share", stacklevel=5)
