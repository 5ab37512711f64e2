"""Every session setting's default and range is the schema's (spec.proto,
handed out by stoker_session_settings_json): the daemon checks them (its own
test, proto/schema_test.cc), and here stokerctl's help, the Loader's
docstring and the docs are held to them; no code outside the schema writes
a setting's default or range as a number."""

import ast
import os
import re
import subprocess

import pytest

import stoker
from conftest import ROOT, STOKERCTL

SETTINGS = stoker.session_settings()

# Loader arguments that are settings, by the setting's path.
LOADER = {"batch_size": "batch_size", "image_size": "image_size",
          "ring_slots": "ring_slots", "partitions": "partitions",
          "exchange": "exchange", "priority": "priority"}
# stokerctl read's options that set one setting each.
STOKERCTL_READ = {"batch-size": "batch_size", "size": "image_size",
                  "world-size": "world_size", "ring-slots": "ring_slots",
                  "partitions": "partitions", "exchange": "exchange"}


def number(v):
    """As the daemon writes it: 1 and 0.05, not 1.0."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def range_text(s):
    return f"{number(s['min'])}..{number(s['max'])}" if "min" in s and "max" in s else None


def test_the_settings_are_the_schemas():
    assert SETTINGS["ring_slots"] == {"default": 4, "min": 2, "max": 256}
    assert SETTINGS["batch_size"] == {"min": 1, "max": 65536}
    assert SETTINGS["client_decode.max_bytes"]["default"] == 256 << 10
    for path, s in SETTINGS.items():
        assert set(s) <= {"default", "min", "max", "preset"}, path
        if "default" in s and "min" in s and not isinstance(s["default"], list):
            assert s["min"] <= s["default"] <= s.get("max", s["default"]), path


def test_stokerctl_help_states_each_setting():
    out = subprocess.run([STOKERCTL, "read", "--help"], capture_output=True, text=True,
                         timeout=60)
    text = " ".join((out.stdout + out.stderr).split())
    for flag, path in STOKERCTL_READ.items():
        s = SETTINGS[path]
        words = []
        if range_text(s):
            words.append(range_text(s))
        elif "min" in s:
            words.append(f"at least {number(s['min'])}")
        if "default" in s:
            words.append(f"default {number(s['default'])}")
        m = re.search(rf"--{flag}\b[^-]*?\(([^)]*)\)", text)
        assert m, f"--{flag} not in {text}"
        assert m.group(1) == "; ".join(words), (flag, m.group(1))


def loader_paragraphs():
    """The Loader docstring's argument paragraphs, by argument name."""
    doc = stoker.Loader.__doc__.split("Args:", 1)[1]
    out = {}
    for m in re.finditer(r"^      (\w+(?:, \w+)*): (.*?)(?=^      \w[\w, ]*: |\Z)", doc,
                         re.M | re.S):
        for name in m.group(1).split(", "):
            out[name] = " ".join(m.group(2).split())
    return out


def test_the_loaders_docstring_states_each_setting():
    paragraphs = loader_paragraphs()
    for arg, path in LOADER.items():
        s, text = SETTINGS[path], paragraphs[arg]
        if range_text(s):
            assert range_text(s) in text, (arg, range_text(s), text)
        if "default" in s:
            assert f"None: {number(s['default'])}" in text, (arg, s, text)
        # No other range or default is written beside it.
        for lo, hi in re.findall(r"\b(\d[\d.]*)\.\.(\d[\d.]*)\b", text):
            assert f"{lo}..{hi}" == range_text(s), (arg, text)


# The names a setting goes by in the docs.
def names(path):
    leaf = path.rsplit(".", 1)[-1]
    return {leaf, leaf.replace("_", "-")}


def test_the_docs_state_each_setting_as_the_schema():
    """A default or range written in README.md or docs/ right after a
    setting's name is the schema's."""
    texts = [os.path.join(ROOT, "README.md")] + [
        os.path.join(ROOT, "docs", f) for f in sorted(os.listdir(os.path.join(ROOT, "docs")))
        if f.endswith(".md")]
    checked = 0
    for path in texts:
        text = " ".join(open(path).read().split())
        for setting, s in SETTINGS.items():
            for name in names(setting):
                for m in re.finditer(rf"`{re.escape(name)}`|\b{re.escape(name)}=", text):
                    near = text[m.end():m.end() + 80]
                    said = re.match(r"[^.;`]*?\((?:[^)]*?\b(\d[\d.]*\.\.\d[\d.]*)\b)?"
                                    r"[^)]*?\bdefault (\d[\d.]*)\b", near)
                    if not said:
                        continue
                    checked += 1
                    where = f"{os.path.relpath(path, ROOT)}: {name}{near}"
                    assert "default" in s and said.group(2) == number(s["default"]), where
                    if said.group(1):
                        assert said.group(1) == range_text(s), where
    assert checked >= 3  # priority, partitions, exchange at least.


CODE = ["server", "client", "shm", "util"]


def docstring_lines(source):
    """The line numbers of a Python file's docstrings."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def test_no_code_writes_a_settings_default_or_range():
    """A line of code naming a setting never holds its default or range end
    as a literal (as `ring_slots() == 0 ? 4` did): the schema's are read."""
    literals = {}
    for path, s in SETTINGS.items():
        values = [s[k] for k in ("default", "min", "max") if k in s]
        # 0 and 1 are everywhere; a list default (mean) has its own test.
        literals[path] = {number(v) for v in values
                          if not isinstance(v, list) and v not in (0, 1)}
    found = []
    for top in CODE:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith((".cc", ".h", ".py")) or "_test" in f or "testing" in f:
                    continue
                file = os.path.join(folder, f)
                text = open(file, errors="replace").read()
                skip = docstring_lines(text) if f.endswith(".py") else set()
                for n, line in enumerate(text.split("\n"), 1):
                    if n in skip:  # Pinned by the docstring test above.
                        continue
                    if f.endswith((".cc", ".h")) and line.lstrip().startswith(("*", "/*")):
                        continue  # A comment block's line.
                    code = line.split("//")[0] if f.endswith((".cc", ".h")) else \
                        line.split("#")[0]
                    for path, values in literals.items():
                        if not any(re.search(rf"\b{re.escape(x)}\b", code) for x in names(path)):
                            continue
                        for v in values:
                            if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", code):
                                found.append(f"{os.path.relpath(file, ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("kw", [dict(ring_slots=1), dict(partitions=0), dict(priority=0)])
def test_a_zero_or_one_is_a_value_not_the_default(kw, tmp_path):
    """One way to say "absent": None; 0 is checked against the range."""
    (tmp_path / "c").mkdir()
    with pytest.raises(ValueError, match=rf"{next(iter(kw))} \d must be in"):
        stoker.Loader(str(tmp_path), batch_size=2, transform="val", **kw)
