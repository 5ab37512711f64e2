"""docs/operating.md's flag table is the daemon's `--help`: every flag it
prints has a row, every row is a flag, and a literal default in the table is
the one the daemon uses."""

import json
import os
import re
import subprocess

from conftest import ROOT, STOKERD


def help_flags():
    out = subprocess.run([STOKERD, "--help"], capture_output=True, text=True,
                         timeout=60)
    text = out.stdout + out.stderr
    flags = {m.group(1).replace("_", "-"): m.group(2).strip('"')
             for m in re.finditer(r"--(\w+) \(.*?\);\s+default: (.*?);", text, re.S)}
    assert len(flags) > 20, text
    return flags


def doc_flags():
    text = open(os.path.join(ROOT, "docs", "operating.md")).read()
    section = text.split("## Running the daemon", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `--([a-z0-9-]+)[^`]*` \| ([^|]*) \|", section, re.M)
    assert rows, "no flag table under 'Running the daemon'"
    return dict(rows)


def seconds(value):
    m = re.fullmatch(r"(\d+)(s|m|h)", value)
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)] if m else None


def same_default(doc, code):
    doc = doc.strip().strip("`")
    if doc in ("off", "none"):
        return code in ("", "false", "0")
    if doc == "on":
        return code == "true"
    if seconds(doc) is not None:
        return seconds(doc) == seconds(code)
    return doc == code


def test_the_flag_table_is_the_daemons_help():
    code, doc = help_flags(), doc_flags()
    assert sorted(set(code) - set(doc)) == [], "flags without a row in docs/operating.md"
    assert sorted(set(doc) - set(code)) == [], "rows of docs/operating.md that are no flag"
    literal = {name: d for name, d in doc.items()
               if re.fullmatch(r"`[^`]*`|\d+|off|on|none", d.strip())}
    assert len(literal) > 20
    wrong = {name: (d, code[name]) for name, d in literal.items()
             if not same_default(d, code[name])}
    assert wrong == {}, "defaults in docs/operating.md that the daemon does not use"


def test_the_dtype_table_is_the_librarys():
    """docs/pipelines.md's element-type table is the one the C ABI hands
    out: every field dtype a row, with its size, class and numpy/torch
    names."""
    from stoker._native import DTYPES
    text = open(os.path.join(ROOT, "docs", "pipelines.md")).read()
    rows = re.findall(r"^\| (\w+) \| (\d) \| (yes|no) \| (\w+)[^|]* \| (\w+)[^|]* \|$",
                      text, re.M)
    doc = {name: (int(size), cls == "yes", numpy, torch)
           for name, size, cls, numpy, torch in rows}
    code = {name: (d["bytes"], d["float"], d["numpy"], d["torch"])
            for name, d in DTYPES.items()}
    assert doc == code


def _default_cell(defaults, prefix=""):
    """An op's defaults as docs/pipelines.md writes them: `name` value,
    by name; a (min, max) range as min..max; nested messages dotted."""
    out = []
    for k in sorted(defaults):
        v = defaults[k]
        if isinstance(v, dict) and set(v) == {"min", "max"}:
            out.append(f"`{prefix}{k}` {json.dumps(v['min'])}..{json.dumps(v['max'])}")
        elif isinstance(v, dict):
            out += _default_cell(v, f"{prefix}{k}.")
        else:
            out.append(f"`{prefix}{k}` {json.dumps(v)}")
    return out


def test_the_op_table_is_the_schemas():
    """Every op the daemon knows has a row, every row is an op, and its
    defaults column is the schema's (the defaults the daemon applies)."""
    import stoker
    text = open(os.path.join(ROOT, "docs", "pipelines.md")).read()
    table = text.split("| op | does | defaults of unset parameters |", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| [^\n]* \| ([^|\n]*) \|$", table, re.M))
    schema = stoker.op_defaults()
    assert len(schema) > 10
    assert sorted(rows) == sorted(schema)
    assert {op: cell.strip() for op, cell in rows.items()} == \
        {op: ", ".join(_default_cell(d)) for op, d in schema.items()}


def test_op_helpers_write_no_default():
    """The Python helpers cover every op and send only what a caller gave:
    no default of an op is written in Python."""
    import inspect
    import stoker
    from stoker import pipeline
    for op in stoker.op_defaults():
        helper = getattr(pipeline, op)
        for p in inspect.signature(helper).parameters.values():
            assert p.default in (inspect.Parameter.empty, None, False), (op, p.name)
    assert pipeline.flip() == {"flip": {}}
    assert pipeline.rot90() == {"rot90": {}}
    assert pipeline.random_erasing() == {"random_erasing": {}}
    assert pipeline.random_resized_crop(8) == {"random_resized_crop": {"width": 8, "height": 8}}


def test_every_list_of_source_kinds_is_the_schemas():
    """docs/pipelines.md and stokerctl --help (built from the schema) list
    the kinds a dataset may name, each list the schema's (DatasetSpec's
    sources, from the C ABI); the README, the Loader's docstring and stoker.h
    point to the schema's list instead of restating it, so a new kind is
    written down once in the docs."""
    import stoker
    from conftest import STOKERCTL
    kinds = stoker.source_kinds()
    assert "nifti" in kinds and len(kinds) >= 6
    listing = {
        "docs/pipelines.md": open(os.path.join(ROOT, "docs", "pipelines.md")).read(),
        "stokerctl --help": subprocess.run([STOKERCTL, "read", "--help"], capture_output=True,
                                           text=True, timeout=60).stdout,
    }
    pointing = {
        "README.md": open(os.path.join(ROOT, "README.md")).read(),
        "Loader": stoker.Loader.__doc__,
        "stoker.h": open(os.path.join(ROOT, "client", "c", "stoker.h")).read(),
    }
    for where, text in {**listing, **pointing}.items():
        lists = [found for found in re.findall(r'"\w+"(?:\s*\|\s*"\w+")+', " ".join(text.split()))
                 if set(re.findall(r'"(\w+)"', found)) & set(kinds)]  # Not "train"|"val".
        assert bool(lists) == (where in listing), where
        for found in lists:
            assert re.findall(r'"(\w+)"', found) == kinds, (where, found)
        if where in pointing:
            assert "source_kinds" in text, where
