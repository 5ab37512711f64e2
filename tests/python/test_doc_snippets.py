"""Every Python example in README.md and docs/ runs as written, against a
real daemon ($STOKER_SOCKET), each in a fresh interpreter. The README's
quick start reads /data/train, which this machine lacks: it runs on a
generated ImageFolder put in that path's place, nothing else changed."""

import glob
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("numpy")
pytest.importorskip("torch")

from conftest import ROOT


def snippets():
    out = []
    for path in ["README.md"] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        text = open(os.path.join(ROOT, path)).read()
        for m in re.finditer(r"```python\n(.*?)```", text, re.S):
            line = text.count("\n", 0, m.start()) + 1
            out.append(pytest.param(m.group(1), id=f"{os.path.basename(path)}:{line}"))
    return out


ALL = snippets()


def test_the_docs_have_examples():
    assert len(ALL) >= 6  # The README's quick start and docs/pipelines.md's.


@pytest.mark.parametrize("code", ALL)
def test_an_example_runs_as_written(code, daemon, dataset, tmp_path):
    needs = [m for m in ("h5py", "nibabel", "PIL", "torchvision") if f"import {m}" in code
             or f"{m} as" in code or f"from {m}" in code or f", {m}" in code]
    for module in needs:
        pytest.importorskip(module)
    code = code.replace('"/data/train"', repr(dataset))
    env = dict(os.environ, STOKER_SOCKET=daemon.socket,
               PYTHONPATH=os.path.join(ROOT, "client", "python"))
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr


def c_snippets():
    text = open(os.path.join(ROOT, "README.md")).read()
    return re.findall(r"```c\n(.*?)```", text, re.S)


def test_the_c_quick_start_builds_from_the_release_and_reads_an_epoch(daemon, dataset,
                                                                       tmp_path):
    """The README's C program, built with its own command line in the
    unpacked release tarball, reads one epoch of the dataset and ends."""
    import tarfile
    from test_dist import artifact
    (code,) = c_snippets()
    build = re.search(r"^ \*   (cc .*)$", code, re.M).group(1)
    with tarfile.open(artifact("stoker-*-linux-*.tar.gz")) as tar:
        tar.extractall(tmp_path)
    (top,) = os.listdir(tmp_path)
    folder = tmp_path / top
    (folder / "app.c").write_text(code.replace('\\"/data/train\\"', f'\\"{dataset}\\"'))
    out = subprocess.run(["bash", "-c", build], cwd=folder, capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, STOKER_SOCKET=daemon.socket))
    assert out.returncode == 0, out.stdout + out.stderr
    images = sum(len(files) for _, _, files in os.walk(dataset))
    assert out.stdout == f"{images} images\n", out.stdout + out.stderr
