"""Progress of a long dataset opening, shown while a session waits on it.

The daemon lists and indexes a dataset before the session's first batch
(a bucket's listing, shards read whole to index them: minutes for a large
one). Its GetStats names each opening in flight with a summary it writes
itself; while this process's open call, or a wait for what a streamed
opening has not published yet (the first batch, the epoch's size), blocks
for longer than EVERY seconds, the summaries of this process's openings go
to stderr, one line every EVERY seconds."""

import contextlib
import os
import sys
import threading

EVERY = 5.0  # Seconds.


@contextlib.contextmanager
def shown(client, every=None, out=None):
    """Shows this process's openings in flight on `out` (stderr) while the
    body runs, after `every` (EVERY) seconds and every `every` seconds."""
    done = threading.Event()
    uid, pid = os.getuid(), os.getpid()

    def watch():
        while not done.wait(EVERY if every is None else every):
            try:
                openings = client.stats().get("openings", [])
            except Exception:  # noqa: BLE001 (a display: the open call reports errors)
                return
            lines = [f"stoker: opening {o['summary']}" for o in openings
                     if int(o.get("uid", -1)) == uid and int(o.get("pid", 0)) == pid]
            if lines and not done.is_set():
                print("\n".join(lines), file=out or sys.stderr, flush=True)

    # A daemon thread, not joined: a stats call in flight may outlast the
    # open, and the display ends with it.
    thread = threading.Thread(target=watch, name="stoker-opening", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # No thread to spare: the open goes on unshown.
        pass
    try:
        yield
    finally:
        done.set()


def while_streamed(session, client, first=True):
    """shown() while `session`'s streamed opening goes on (its size not
    known yet) and `first` (a wait that may be for it), else nothing."""
    if not first or session.batches_known:
        return contextlib.nullcontext()
    return shown(client)
