"""The Python recipes of the README and docs/pipelines.md run as written
(against a test daemon)."""

import os
import re

import pytest

pytest.importorskip("numpy")
pytest.importorskip("torch")
pytest.importorskip("h5py")
pytest.importorskip("PIL")

from conftest import ROOT

RECIPES = [code for doc in ("README.md", os.path.join("docs", "pipelines.md"))
           for code in re.findall(r"```python\n(.*?)```",
                                  open(os.path.join(ROOT, doc)).read(), re.S)]


@pytest.mark.parametrize("code", [c for c in RECIPES if "fields=" in c],
                         ids=lambda c: c.split("\n")[0][:40])
def test_recipe_runs(code, daemon, monkeypatch):
    monkeypatch.setenv("STOKER_SOCKET", daemon.socket)
    scope = {}
    exec(compile(code, "README recipe", "exec"), scope)
    batch = scope["batch"]
    assert isinstance(batch, dict) and batch  # It iterated and got fields.
