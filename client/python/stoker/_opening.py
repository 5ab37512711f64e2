"""Progress of a long dataset opening, shown while a session waits on it.

The daemon lists and indexes a dataset before the session's first batch
(a bucket's listing, shards read whole to index them: minutes for a large
one). Its GetStats names each opening in flight with a summary it writes
itself; while this process's open call blocks for longer than EVERY
seconds, the summaries of this user's openings go to stderr, one line
every EVERY seconds."""

import contextlib
import os
import sys
import threading

EVERY = 5.0  # Seconds.


@contextlib.contextmanager
def shown(client, every=None, out=None):
    """Shows this user's openings in flight on `out` (stderr) while the
    body runs, after `every` (EVERY) seconds and every `every` seconds."""
    done = threading.Event()
    uid = os.getuid()

    def watch():
        while not done.wait(EVERY if every is None else every):
            try:
                openings = client.stats().get("openings", [])
            except Exception:  # noqa: BLE001 (a display: the open call reports errors)
                return
            for o in openings:
                if int(o.get("uid", -1)) == uid and not done.is_set():
                    print(f"stoker: opening {o['summary']}", file=out or sys.stderr, flush=True)

    thread = threading.Thread(target=watch, name="stoker-opening", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
