"""Command-line behaviour a script relies on: help and version on stdout with
status 0, JSON numbers as numbers, no escape codes in a pipe, useless
values refused with a reason."""

import json
import subprocess

from conftest import ROOT_FLAG, STOKERCTL, STOKERD

import pytest
import stoker


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True,
                          timeout=60, **kw)


def test_help_and_version():
    out = run(STOKERCTL, "--help")
    assert out.returncode == 0 and "Usage: stokerctl [OPTIONS] SUBCOMMAND" in out.stdout
    for command in ("read", "warm", "stats", "top", "close", "resize"):
        assert f"  {command}" in out.stdout
    out = run(STOKERCTL, "read", "--help")
    assert out.returncode == 0 and "--batch-size" in out.stdout
    out = run(STOKERCTL, "read", "--batch-size", "4", "--no-such-flag")
    assert out.returncode == 2 and "--no-such-flag" in out.stderr
    out = run(STOKERCTL, "--version")
    assert out.returncode == 0
    assert out.stdout.startswith(f"stokerctl {stoker.__version__} (")
    out = run(STOKERD, "--help")
    assert out.returncode == 0 and "usage: stokerd" in out.stdout
    assert "max_image_pixels" in out.stdout
    out = run(STOKERD, "--version")
    assert out.returncode == 0
    assert out.stdout.startswith(f"stokerd {stoker.__version__} (")


def test_stats_json_has_numbers_and_top_in_a_pipe_has_no_escapes(daemon, dataset):
    run(STOKERCTL, "--socket", daemon.socket, "read", "--dataset", dataset,
        "--batch-size", "4", "--size", "32")
    out = run(STOKERCTL, "--socket", daemon.socket, "stats", "--json")
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert isinstance(stats["samples_decoded"], int)
    assert stats["samples_decoded"] >= 24
    assert isinstance(stats["pid"], int) and isinstance(stats["uptime_seconds"], float)
    out = run(STOKERCTL, "--socket", daemon.socket, "top", "--frames", "1",
              stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "POOL" in out.stdout


def test_useless_values_are_refused_with_a_reason(daemon, dataset, tmp_path):
    out = run(STOKERCTL, "--socket", daemon.socket, "read", "--dataset", dataset,
              "--batch-size", "4", "--ring-slots", "1")
    assert out.returncode == 1
    assert "INVALID_ARGUMENT" in out.stderr and "ring_slots 1" in out.stderr
    with pytest.raises(ValueError, match="ring_slots"):
        stoker.Loader(dataset, batch_size=4, transform="train", ring_slots=1,
                      socket=daemon.socket)
    out = run(STOKERCTL, "--socket", daemon.socket, "read", "--dataset", dataset,
              "--batch-size", "4", "--first-epoch", "whole")
    assert out.returncode == 2 and "--first-epoch must be canonical or windows" in out.stderr
    out = run(STOKERD, "--socket", str(tmp_path / "s.sock"), "--l2-path",
              str(tmp_path / "l2"), "--l2-max-bytes", "0", *ROOT_FLAG)
    assert out.returncode == 2 and "--l2-max-bytes" in out.stderr


def test_read_takes_a_whole_spec_as_json(daemon, dataset, tmp_path):
    """--spec: the same schema every client uses (short enum names too);
    the checksum equals the flags' for the same preset."""
    by_flags = json.loads(run(STOKERCTL, "--socket", daemon.socket, "read",
                              "--dataset", dataset, "--batch-size", "4",
                              "--size", "32", "--epochs", "2").stdout)
    spec = {"dataset": {"folder": {"path": dataset}}, "batch_size": 4,
            "transform": "val", "image_size": 32}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    by_spec = json.loads(run(STOKERCTL, "--socket", daemon.socket, "read",
                             "--spec", str(tmp_path / "spec.json"),
                             "--epochs", "2").stdout)
    assert by_spec["checksum"] == by_flags["checksum"]
    assert by_spec["samples"] == 48
    custom = {k: v for k, v in spec.items() if k not in ("transform", "image_size")}
    custom["fields"] = [{"name": "image", "kind": "image", "shape": [16, 16, 3]},
                        {"name": "label", "kind": "label", "dtype": "int64"}]
    custom["pipeline"] = [{"random_crop": {"width": 16, "height": 16}}]
    out = run(STOKERCTL, "--socket", daemon.socket, "read", "--spec", "-",
              input=json.dumps(custom))
    assert out.returncode == 0 and json.loads(out.stdout)["samples"] == 24
    custom["pipeline"] = [{"random_crop": {"width": 17, "height": 16}}]
    out = run(STOKERCTL, "--socket", daemon.socket, "read", "--spec", "-",
              input=json.dumps(custom))
    assert out.returncode == 1
    assert "INVALID_ARGUMENT" in out.stderr and "makes it 16x17" in out.stderr
