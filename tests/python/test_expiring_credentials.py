"""Credentials that outlive their tokens: a loopback S3 API store
(expiring_store.py) that checks every signature and takes each session
token for 20 s only, read through the daemon for several epochs (no cache,
so every epoch's reads are signed anew) across several expiries. The
trainer's client resolves its credentials as AWS's tools do — a
profile's credential_process, or a container credentials endpoint —
refreshes them before they expire and signs each request itself: every
epoch has the first one's batches, no sample fails, and the store saw
several tokens. A trainer whose credential_process fails is told so,
naming the command and its words."""

import os

import pytest

import expiring_store
import stoker
from conftest import Daemon

torch = pytest.importorskip("torch")

ARGS = dict(batch_size=4, transform="val", image_size=32, shuffle=False, on_error="raise")


@pytest.fixture(scope="module")
def store(dataset):
    with expiring_store.ExpiringStore() as s:
        for dirpath, _, names in os.walk(dataset):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    s.put("photos", "train/" + os.path.relpath(path, dataset), f.read())
        yield s


@pytest.fixture()
def trainer(store, monkeypatch, tmp_path):
    """A trainer whose environment names the store and no key of its own."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
              "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL_S3", "AWS_REGION",
              "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
              "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", store.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    (tmp_path / "config").write_text("")
    return monkeypatch


def batches(ld):
    return [(x.clone(), y.clone()) for x, y in ld]


@pytest.mark.parametrize("provider", ["credential_process", "container"])
def test_epochs_outlive_many_tokens(store, trainer, tmp_path, provider):
    if provider == "credential_process":
        script = expiring_store.write_credential_process(str(tmp_path))
        (tmp_path / "config").write_text(f"[default]\ncredential_process = {script}\n")
        tokens_wanted = 4  # Three expiries at least.
    else:
        trainer.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI",
                       store.url + expiring_store.CONTAINER_PATH)
        trainer.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", store.container_token)
        tokens_wanted = 3
    d = Daemon(extra=["--object-store-endpoints", store.url, "--l1-bytes", "0",
                      "--decoded-cache-bytes", "0", "--pixel-cache-bytes", "0"])
    try:
        seen_before = set(store.tokens_used)
        ld = stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS)
        want = batches(ld)
        assert len(want) > 0
        epochs = 1
        # Epoch after epoch until the store has taken this many tokens:
        # the run has outlived every one of them but the last.
        while len(set(store.tokens_used) - seen_before) < tokens_wanted:
            got = batches(ld)
            epochs += 1
            assert len(got) == len(want)
            for (x, y), (wx, wy) in zip(got, want):
                assert torch.equal(x, wx) and torch.equal(y, wy)
            assert epochs < 400, dict(store.tokens_used)
    finally:
        d.stop()
    assert not any(code == "SignatureDoesNotMatch" for code in store.rejections), store.rejections


def test_a_failing_credential_process_is_named(store, trainer, tmp_path):
    """At the session's opening, in the trainer's own process: the error
    names the command and its words (which never reach the daemon; a
    later refresh's failure goes to the trainer's stderr, and the daemon
    hears only that it failed: session_signer_test)."""
    script = tmp_path / "broken-credentials"
    script.write_text("#!/bin/sh\necho 'token service unreachable' >&2\nexit 3\n")
    script.chmod(0o755)
    (tmp_path / "config").write_text(f"[default]\ncredential_process = {script}\n")
    d = Daemon(extra=["--object-store-endpoints", store.url])
    try:
        with pytest.raises(stoker.StokerError) as e:
            next(iter(stoker.Loader("s3://photos/train/", socket=d.socket, **ARGS)))
        assert "token service unreachable" in str(e.value), str(e.value)
        assert str(script) in str(e.value), str(e.value)
    finally:
        d.stop()
