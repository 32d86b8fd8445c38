"""Checks of a config.pbtxt you write: a fragment in a cell, or an edit made in an editor on the
file itself; each judged by Triton's own schema and by where Triton would put the instances.

Introduced in notebook 6; the notebooks call these as exercises.config_fragment(text, "6.3d")
and exercises.file_edit(path, before, "6.3a"): what each step needs is in
servelab/exercises/steps.py.

A config.pbtxt text is parsed with Triton's ModelConfig schema (servelab.triton.config_text), so a
misspelt field is answered before Triton sees it; an instance_group is judged by where Triton
puts the instances it asks for (servelab.exercises.step_needs.Instances), whatever its spelling;
preferred batch sizes in any order. An edit of the file changes what its step asks and nothing
else: a field changed beyond that is refused with the lines that changed it.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from google.protobuf import json_format, text_format

from servelab import passes
from servelab.exercises import step_needs, steps
from servelab.exercises.answers import NotYet, written_text
from servelab.exercises.step_needs import AnyOrder, Instances, Wrong
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
    if isinstance(want, AnyOrder):  # a set to Triton: [8, 6, 4] is [4, 6, 8]
        return sorted(set(got)) == sorted(set(want))
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
    what: str | None = None,
    needs: dict[str, object] | None = None,
    where: str = "the text above it shows the fields",
) -> str:
    """Your config.pbtxt fragment, parsed with Triton's own schema; stops unless it sets every
    field of `needs` ({dotted field: value}, value None: set at all; a repeated message counts by
    its first element, e.g. "instance_group.count"). Without `what`, the step's own."""
    if what is None:
        known = steps.step(step, steps.Fragment)
        what, needs = known.what, steps.needs_of(known.needs)
    text = written_text(text, step, "your config.pbtxt fragment, in quotes", what, where)
    config = _schema(text, step, "your fragment", "the config.pbtxt shown above")
    _config_needs(config, needs or {}, step, what, "your fragment")
    record.line(step, what, text)
    return text


def file_edit(
    path,
    before: str,
    step: str,
    what: str | None = None,
    needs: dict[str, object] | None = None,
) -> str:
    """A config.pbtxt you edited in an editor: stops while it is unchanged, unparsable for Triton,
    without the fields of `needs`, or changed beyond them; returns the unified diff of your edit.
    Without `what`, the step's own. In the measure pass the file is the node's (its diff kept in
    the bundle, read back by the review pass); in the prepare pass it is this notebook's copy of
    the model's config (servelab.triton.triton_config.to_edit), checked here."""
    if what is None:
        known = steps.step(step, steps.Edit)
        what, needs = known.what, steps.needs_of(known.needs)
    edited = lambda: _edited(Path(path), before, step, what, needs or {})  # noqa: E731
    if passes.current() == passes.PREPARE:
        diff = edited()
        record.edit(step, before, Path(path).read_text())
    else:
        key = f"{step} edit of {Path(path).parent.name}/{Path(path).name}"
        diff = passes.on_node(key, "value", edited)
    record.line(step, what, diff)
    return diff


def _edited(path: Path, before: str, step: str, what: str, needs: dict) -> str:
    after = path.read_text()
    if after == before:
        raise NotYet(
            f"{step}: {path} is unchanged: open it in JupyterLab's editor (File, Open from "
            f"Path) or nano, {what}, save it, then run this cell again."
        )
    config = _schema(after, step, "the file", "the file before your edit (the diff)")
    _config_needs(config, needs, step, what, "the file")
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{path.name} (before)",
            tofile=f"{path.name} (your edit)",
        )
    )
    _only_what_was_asked(config_text.parse_config(before), config, needs, diff, step, what)
    return diff


def _fields(config) -> dict[str, object]:
    """A ModelConfig as {dotted field: value}; a list (instance_group, preferred sizes) whole."""
    flat: dict[str, object] = {}

    def walk(value, path: str) -> None:
        if isinstance(value, dict) and value:
            for key, inner in value.items():
                walk(inner, f"{path}.{key}" if path else key)
        else:
            flat[path] = value

    walk(json_format.MessageToDict(config, preserving_proto_field_name=True), "")
    return flat


def _only_what_was_asked(before, after, needs: dict, diff: str, step: str, what: str) -> None:
    """Stops when the edit changed a field the step did not ask for, with the diff's lines that
    changed it: a run under the step's name would otherwise measure something else."""
    asked = {
        path.split(".")[0] if isinstance(want, Instances) else path for path, want in needs.items()
    }
    old, new = _fields(before), _fields(after)
    extra = sorted(
        path
        for path in set(old) | set(new)
        if old.get(path) != new.get(path)
        and not any(
            path == a or f"{path}.".startswith(f"{a}.") or a.startswith(f"{path}.") for a in asked
        )
    )
    if not extra:
        return
    changed = _lines_about(diff, extra, asked)
    lines = "; ".join(f"`{c}`" for c in changed) or "see the diff"
    raise NotYet(
        f"{step}: {what}: your edit also changes {', '.join(extra)} ({lines}): the step asks for "
        "nothing else, so put the rest back as it was."
    )


def _lines_about(diff: str, extra: list[str], asked: set[str]) -> list[str]:
    """The diff's changed lines that belong to no asked field (else those naming an extra one)."""
    words = {part for path in asked for part in path.split(".")}
    if "instance_group" in asked:
        words |= {"count", "kind", "gpus"}
    lines = [
        f"{ln[0]} {ln[1:].strip()}"
        for ln in diff.splitlines()[2:]
        if ln[:1] in "+-" and re.search(r"\w", ln) and not ln[1:].strip().startswith("#")
    ]
    mine = [ln for ln in lines if not any(w in ln for w in words)]
    return mine or [ln for ln in lines if any(p.split(".")[-1] in ln for p in extra)]
