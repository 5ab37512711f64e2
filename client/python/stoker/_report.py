"""What the Loader tells its user about the daemon's side of its session:
the session's entry in the daemon's stats, what the pixel cache keeps for
it, and the advice a starvation warning gives. Stateless; best effort
where it says so."""

import os


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
    return f"Daemon's diagnosis: {diagnosis}: {advice}."
