"""Checks of a config.pbtxt you write: a fragment in a cell, or an edit made in an editor on the
file itself; each judged by Triton's own schema and by where Triton would put the instances.

Introduced in notebook 6; the notebooks call these as exercises.config_fragment and
exercises.file_edit.

A config.pbtxt text is parsed with Triton's ModelConfig schema (servelab.triton.config_text), so a
misspelt field is answered before Triton sees it; an instance_group is judged by where Triton
puts the instances it asks for (servelab.exercises.step_needs.Instances), whatever its spelling.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from google.protobuf import text_format

from servelab import passes
from servelab.exercises import step_needs
from servelab.exercises.answers import NotYet, written_text
from servelab.exercises.step_needs import Instances, Wrong
from servelab.passes import record
from servelab.triton import config_text


def _config_needs(config, needs: dict[str, object], step: str, what: str, whose: str) -> None:
    for path, want in needs.items():
        if isinstance(want, Instances):  # judged by where Triton puts them
            try:
                step_needs.check_instances(config, want)
            except Wrong as exc:
                raise NotYet(f"{step}: {what}: {whose} {exc}.") from None
            continue
        got = config_text.field_value(config, path)
        if got is None or got == [] or (want is not None and not _equal(got, want)):
            shown = path if want is None else f"{path}: {_pbtxt(want)}"
            has = "has no" if got is None or got == [] else f"has `{path}: {_pbtxt(got)}`, not"
            raise NotYet(f"{step}: {what}: {whose} {has} `{shown}`.")


def _equal(got, want) -> bool:
    if isinstance(want, (list, tuple)):
        return list(got) == list(want)
    return got == want or str(got) == str(want)


def _pbtxt(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[ " + ", ".join(str(v) for v in value) + " ]"
    return str(value)


def _schema(text: str, step: str, whose: str, where: str):
    try:
        return config_text.parse_config(text)
    except text_format.ParseError as exc:
        raise NotYet(
            f"{step}: {whose} is not config.pbtxt that Triton accepts "
            f"({str(exc).rstrip('.')}): compare it with {where}."
        ) from None


def config_fragment(
    text,
    step: str,
    what: str,
    needs: dict[str, object] | None = None,
    where: str = "the text above it shows the fields",
) -> str:
    """Your config.pbtxt fragment, parsed with Triton's own schema; stops unless it sets every
    field of `needs` ({dotted field: value}, value None: set at all; a repeated message counts by
    its first element, e.g. "instance_group.count")."""
    text = written_text(text, step, "your config.pbtxt fragment, in quotes", what, where)
    config = _schema(text, step, "your fragment", "the config.pbtxt shown above")
    _config_needs(config, needs or {}, step, what, "your fragment")
    record.line(step, what, text)
    return text


def file_edit(
    path,
    before: str,
    step: str,
    what: str,
    needs: dict[str, object] | None = None,
) -> str:
    """A config.pbtxt you edited in an editor: stops while it is unchanged, unparsable for Triton
    or without the fields of `needs`; returns the unified diff of your edit. The file is the
    node's: the measure pass keeps the diff, the review pass reads it back."""
    edited = lambda: _edited(Path(path), before, step, what, needs)  # noqa: E731
    diff = passes.on_node(
        f"{step} edit of {Path(path).parent.name}/{Path(path).name}", "value", edited
    )
    record.line(step, what, diff)
    return diff


def _edited(path: Path, before: str, step: str, what: str, needs) -> str:
    after = path.read_text()
    if after == before:
        raise NotYet(
            f"{step}: {path} is unchanged: open it in JupyterLab's editor (File, Open from "
            f"Path) or nano, {what}, save it, then run this cell again."
        )
    config = _schema(after, step, "the file", "the file before your edit (the diff)")
    _config_needs(config, needs or {}, step, what, "the file")
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{path.name} (before)",
            tofile=f"{path.name} (your edit)",
        )
    )
