"""The Loader's display of a long opening (stoker/_opening.py) with a fake
client: only this process's openings are shown, and nothing for an open
call quicker than the display's period."""

import io
import os
import threading

from stoker import _opening


class FakeClient:
    """GetStats with an opening of this process, one of another process of
    this user, and one of another user; `polled` is set at each call."""

    def __init__(self):
        self.polled = threading.Event()
        self.calls = 0

    def stats(self):
        self.calls += 1
        self.polled.set()
        return {"openings": [
            {"uid": os.getuid(), "pid": os.getpid(), "summary": "mine: 1 of 2 shards"},
            {"uid": os.getuid(), "pid": os.getpid() + 1, "summary": "my other job"},
            {"uid": os.getuid() + 1, "pid": 0, "summary": "(another user's dataset)"}]}


def test_only_this_processs_openings_are_shown_while_it_waits():
    client, out = FakeClient(), io.StringIO()
    with _opening.shown(client, every=0.01, out=out):
        while "mine" not in out.getvalue():  # Until a poll has been shown.
            client.polled.wait(5)
            client.polled.clear()
    shown = out.getvalue()
    assert shown.splitlines()[0] == "stoker: opening mine: 1 of 2 shards"
    assert "other" not in shown


def test_a_quick_open_shows_nothing():
    client, out = FakeClient(), io.StringIO()
    with _opening.shown(client, every=60, out=out):
        pass
    assert out.getvalue() == "" and client.calls == 0
