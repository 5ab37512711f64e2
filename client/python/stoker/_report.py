"""What the Loader tells its user about the daemon's side of its session:
the session's entry in the daemon's stats, what the pixel cache keeps for
it, and the advice a starvation warning gives; an epoch's account and its
warnings (starvation, failed samples); described samples. Stateless (the
totals are the caller's); best effort where it says so."""

import os
import warnings

from stoker import _daemon
from stoker.errors import SampleErrorWarning, StarvationWarning


def daemon_session(client, session, stats=None):
    """`session`'s entry in the daemon's stats (`stats`, else asked of
    `client`); None when no session is open."""
    if session is None or client is None:
        return None
    stats = stats if stats is not None else client.stats()
    mine = [s for s in stats["sessions"] if s["session_id"] == session.id]
    return mine[0] if mine else None


def spoken(value, prefix):
    """An enum value as stokerctl and the metrics say it:
    PIXEL_MODE_NOT_KEPT -> not-kept."""
    return value.replace(prefix, "").lower().replace("_", "-")


def pixel_cache(mine):
    """What the daemon's pixel cache does for a session (its stats entry),
    and why: {"mode", "why", "bytes"}."""
    return {"mode": spoken(mine.get("pixel_mode", ""), "PIXEL_MODE_"),
            "why": mine.get("pixel_cache_why", ""),
            "bytes": int(mine.get("pixel_cache_bytes", 0))}


def remote(mine):
    """A session's reads of a remote source (an object store): {"requests",
    "bytes", "epochs": {epoch: {"requests", "bytes"}}} (its last 16
    epochs); None for a local source."""
    if not mine.get("remote_by_epoch"):
        return None
    return {"requests": int(mine.get("remote_requests", 0)),
            "bytes": int(mine.get("remote_bytes", 0)),
            "epochs": {int(e.get("epoch", 0)): {"requests": int(e.get("requests", 0)),
                                                "bytes": int(e.get("bytes", 0))}
                       for e in mine["remote_by_epoch"]}}


def order(mine):
    """How well the shuffled epoch a session reads mixes the dataset
    (server/serve/order_quality.h): {"epoch", "partitions", "global_step",
    "partitions_per_step", "spread", "exchanged", "exchange_by_bytes",
    "exchange_over_budget"}; None before it reads one."""
    o = mine.get("order")
    if not o:
        return None
    return {"epoch": int(o.get("epoch", 0)), "partitions": int(o.get("partitions", 0)),
            "global_step": int(o.get("global_step", 0)),
            "partitions_per_step": float(o.get("partitions_per_step", 0)),
            "spread": float(o.get("spread", 0)), "exchanged": int(o.get("exchanged", 0)),
            "exchange_by_bytes": bool(o.get("exchange_by_bytes", False)),
            "exchange_over_budget": int(o.get("exchange_over_budget", 0))}


def starvation_hint(client, session, waits):
    """Why the loop waited `waits` (seconds per batch), from the daemon's
    diagnosis of `session`, and what to do. Best effort."""
    total = sum(waits)
    if total and waits[0] / total > 0.5:
        return ("Most of it was the first batch (ring warm-up): keep the "
                "Loader and its daemon alive across epochs, or raise ring_slots.")
    try:
        stats = client.stats()
    except Exception:  # The hint is best effort.
        return "The daemon did not answer for a diagnosis."
    mine = daemon_session(client, session, stats)
    diagnosis = spoken(mine["diagnosis"], "DIAGNOSIS_") if mine else "unknown"
    threads = stats["decode_threads"]
    cores = os.cpu_count() or 1
    advice = {
        "decode-bound": (f"the daemon's {threads} decode threads are busy; "
                         + (f"start stokerd with --threads {cores} or --autotune"
                            if threads < cores else
                            "give stokerd more cores or use a smaller image_size")),
        "read-bound": "storage is the bottleneck: warm the caches "
                      "(stokerctl warm) or add --l2-path on local NVMe",
        "starved-by-fair-share": "other sessions share the decode threads; "
                                 "add threads (stokerctl resize)",
        "consumer-bound": "the ring was full at the end: the wait came earlier",
        "latency-bound": "no stage is busy, yet batches arrive late: "
                         "raise ring_slots so more are in flight",
    }.get(diagnosis, "see stokerctl top")
    if (mine and diagnosis in ("decode-bound", "starved-by-fair-share")
            and mine.get("pixel_mode") == "PIXEL_MODE_NOT_KEPT"):
        # Later epochs would not decode if the pictures were kept.
        advice += f"; its decoded pictures are not kept: {mine.get('pixel_cache_why')}"
    return f"Daemon's diagnosis: {diagnosis}: {advice} ({_daemon.described(client.socket)})."


def account(totals, epoch, waits, compute, images, threshold, client, session):
    """Adds a pass to `totals` and returns its summary (Loader.stats()'s
    "last_epoch"); warns when the loop waited more than `threshold`."""
    wait = sum(waits)
    for k, v in (("batches", len(waits)), ("images", images),
                 ("wait_seconds", wait), ("compute_seconds", compute)):
        totals[k] += v
    busy = wait + compute
    frac = wait / busy if busy else 0.0
    # Short epochs (tests, smoke runs) are all warm-up: stay quiet.
    if frac > threshold and len(waits) >= 4 and wait >= 0.2:
        warnings.warn(StarvationWarning(
            f"stoker: the training loop waited {frac:.0%} of epoch {epoch} "
            f"({wait:.2f} s of {busy:.2f} s) for data. "
            f"{starvation_hint(client, session, waits)}"), stacklevel=5)
    return {"epoch": epoch, "batches": len(waits), "wait_seconds": wait,
            "compute_seconds": compute, "wait_fraction": frac,
            "first_batch_wait_seconds": waits[0] if waits else 0.0}


def names(session, indices):
    """The files of up to 5 dataset indices (best effort)."""
    try:
        return session.describe_samples(indices[:5])
    except Exception:
        return [f"sample {i}" for i in indices[:5]]


def failures(session, epoch, failed, on_error, what=None, socket=None):
    """The one warning of a pass whose samples `failed` (read through the
    daemon at `socket`)."""
    more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
    what = what or ("could not be read or decoded and " +
                    ("were replaced by other samples" if on_error == "replace"
                     else "are zero images") +
                    f" (the log of {_daemon.described(socket)} says why)")
    warnings.warn(SampleErrorWarning(
        f"stoker: {len(failed)} sample(s) of epoch {epoch} {what}: "
        f"{', '.join(names(session, failed))}{more}"), stacklevel=4)


def described(samples):
    """Loader.describe()'s answer from the daemon's: per sample its files'
    path, shape and affine (4 x 4 nested lists)."""
    out = []
    for sample in samples.get("samples", []):
        files = []
        for f in sample.get("files", []):
            d = {"path": f.get("path", "")}
            if "shape" in f:
                d["shape"] = [int(n) for n in f["shape"]]
            if "affine" in f:
                a = [float(x) for x in f["affine"]]
                d["affine"] = [a[r * 4:r * 4 + 4] for r in range(4)]
            files.append(d)
        out.append({"files": files})
    return out
