"""Checks of a config.pbtxt you write: a fragment in a cell, or an edit made in an editor on the
file itself; each judged by Triton's own schema and by where Triton would put the instances.

Introduced in notebook 6; the notebooks call these through the table of steps
(exercises.config_fragment(text, "6.3d"), exercises.file_edit(path, before, "6.3a"),
servelab/exercises/steps.py), which hands each check what its step needs.

A config.pbtxt text is parsed with Triton's ModelConfig schema (servelab.triton.config_text), so a
misspelt field is answered before Triton sees it; an instance_group is judged by where Triton
puts the instances it asks for (instances per device), whatever its spelling; preferred batch
sizes in any order. A fragment, like an edit of the file, sets what its step asks and nothing
else: a field beyond that is refused, an edit's with the lines that changed it. A field that
differs is answered with what yours says and where to look, never with the step's value.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from google.protobuf import json_format, text_format

from servelab import passes
from servelab.exercises.answers import NotYet, section, written_text
from servelab.exercises.key import Needs, Plain, number
from servelab.exercises.step_needs import AnyOrder, Wrong, devices, placed
from servelab.passes import record
from servelab.triton import config_text

INSTANCES = "instance_group"
AS_A_SET = ("dynamic_batching.preferred_batch_size",)  # Triton keeps it as a set


def canonical(path: str, value, n_gpus: int = 0) -> tuple:
    """A field's value in one spelling: instances as Triton places them on a server with `n_gpus`
    GPUs ({"GPU 0": 2, ...}, or a need that says so: step_needs.Every, OnFirst, Instances),
    numbers as numbers, a set's numbers sorted, a list in its order; a need of None: set."""
    if path == INSTANCES:
        where = value.placed(n_gpus) if hasattr(value, "placed") else value
        return (f"n={n_gpus}", *(w for d, n in sorted(where.items()) for w in (d, number(n))))
    if value is None:
        return ("set",)
    if isinstance(value, AnyOrder) or (path in AS_A_SET and isinstance(value, (list, tuple))):
        return tuple(sorted({number(v) for v in value}, key=lambda v: (len(v), v)))
    if isinstance(value, (list, tuple)):
        return tuple(number(v) for v in value)
    return (number(value),)


def _needs(step: str, needs, values) -> Needs:
    return needs if isinstance(needs, Needs) else Plain(step, needs or {}, values)


def _paths(config) -> list[str]:
    """Every field path a ModelConfig sets, leaves and the messages above them (a repeated
    message by its elements' fields, as "input.name"; a map by its keys, as
    "parameters.precision.string_value")."""
    found: dict[str, None] = {}

    def walk(value, path: str) -> None:
        if path:
            found[path] = None
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{path}.{key}" if path else key)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                walk(item, path)

    walk(json_format.MessageToDict(config, preserving_proto_field_name=True), "")
    return list(found)


def _leaves(paths: list[str]) -> list[str]:
    return [p for p in paths if not any(q.startswith(f"{p}.") for q in paths)]


def _config_needs(config, needs: Needs, step: str, whose: str) -> None:
    """Each field the step asks for, as `needs` says; every one of them set."""
    where = f"{section(step)} says which"
    paths = _paths(config)
    asked = needs.fields(paths)
    for path in asked:
        if path == INSTANCES:
            try:
                got = placed(config, needs.n_gpus)
            except Wrong as exc:
                raise NotYet(f"{step}: {whose} {exc}.") from None
            if not needs.meets(path, canonical(path, got, needs.n_gpus), canonical):
                raise NotYet(
                    f"{step}: {whose} puts {devices(got)}, not where the step puts them: "
                    f"{section(step)} says where (a KIND_GPU group puts `count` instances on "
                    "each GPU of its `gpus`, or on every GPU without one)."
                )
            continue
        got = config_text.field_value(config, path)
        if not (
            needs.meets(path, canonical(path, got), canonical)
            or needs.meets(path, ("set",), canonical)
        ):
            raise NotYet(
                f"{step}: {whose} has `{path}: {_pbtxt(got)}`, not what the step asks: {where}."
            )
    if len(asked) < needs.count:
        raise NotYet(f"{step}: {whose} does not set everything the step asks: {where}.")


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
    needs: Needs | dict,
    where: str = "the text above it shows the fields",
    values: dict | None = None,
) -> str:
    """Your config.pbtxt fragment, parsed with Triton's own schema; stops unless it sets every
    field the step asks for (`needs`: a key.Needs, or {dotted field: value}, value None: set at
    all; a repeated message by its first element, e.g. "input.data_type"; an instance_group by
    where Triton puts it), to the step's value, and nothing else."""
    needs = _needs(step, needs, values)
    text = written_text(text, step, "your config.pbtxt fragment, in quotes", what, where)
    config = _schema(text, step, "your fragment", "the config.pbtxt shown above")
    extra = [p for p in _leaves(_paths(config)) if not needs.covers(p)]
    if extra:
        raise NotYet(
            f"{step}: your fragment also sets `{extra[0]}`, which the step does not ask for: a "
            "fragment, like an edit of the file, changes what its step asks and nothing else."
        )
    _config_needs(config, needs, step, "your fragment")
    record.line(step, what, text)
    return text


def file_edit(
    path,
    before: str,
    step: str,
    what: str,
    needs: Needs | dict,
    values: dict | None = None,
) -> str:
    """A config.pbtxt you edited in an editor: stops while it is unchanged, unparsable for Triton,
    without the fields the step asks for (`needs`, as config_fragment's), or changed beyond them;
    returns the unified diff of your edit. In the measure pass the file is the node's (its diff
    kept in the bundle, read back by the review pass); in the prepare pass it is this notebook's
    copy of the model's config (servelab.triton.triton_config.to_edit), checked here."""
    needs = _needs(step, needs, values)
    edited = lambda: _edited(Path(path), before, step, what, needs)  # noqa: E731
    if passes.current() == passes.PREPARE:
        diff = edited()
        record.edit(step, before, Path(path).read_text())
    else:
        key = f"{step} edit of {Path(path).parent.name}/{Path(path).name}"
        diff = passes.on_node(key, "value", edited)
    record.line(step, what, diff)
    return diff


def _edited(path: Path, before: str, step: str, what: str, needs: Needs) -> str:
    after = path.read_text()
    if after == before:
        raise NotYet(
            f"{step}: {path} is unchanged: open it in JupyterLab's editor (File, Open from "
            f"Path) or nano, {what}, save it, then run this cell again."
        )
    config = _schema(after, step, "the file", "the file before your edit (the diff)")
    _config_needs(config, needs, step, "the file")
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{path.name} (before)",
            tofile=f"{path.name} (your edit)",
        )
    )
    _only_what_was_asked(config_text.parse_config(before), config, needs, diff, step)
    return diff


def _fields(config) -> dict[tuple[str, str], object]:
    """A ModelConfig's leaves as {(dotted field, where in a repeated message): value}: the first
    instance group's count is ("instance_group.count", "0"); a list of numbers stays whole."""
    flat: dict[tuple[str, str], object] = {}

    def walk(value, path: str, at: str = "") -> None:
        if isinstance(value, dict) and value:
            for key, inner in value.items():
                walk(inner, f"{path}.{key}" if path else key, at)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                walk(item, path, f"{at}.{i}")
        else:
            flat[(path, at)] = value

    walk(json_format.MessageToDict(config, preserving_proto_field_name=True), "")
    return flat


def _only_what_was_asked(before, after, needs: Needs, diff: str, step: str) -> None:
    """Stops when the edit changed a field the step did not ask for, with the diff's lines that
    changed it: a run under the step's name would otherwise measure something else."""
    old, new = _fields(before), _fields(after)
    extra = sorted(
        {
            path
            for path, at in set(old) | set(new)
            if old.get((path, at)) != new.get((path, at)) and not needs.covers(path)
        }
    )
    if not extra:
        return
    changed = _lines_about(diff, extra)
    lines = "; ".join(f"`{c}`" for c in changed) or "see the diff"
    raise NotYet(
        f"{step}: your edit also changes {', '.join(extra)} ({lines}): the step asks for "
        "nothing else, so put the rest back as it was."
    )


def _lines_about(diff: str, extra: list[str]) -> list[str]:
    """The diff's changed lines that name a field it should not have changed (else every changed
    line that is not a comment)."""
    lines = [
        f"{ln[0]} {ln[1:].strip()}"
        for ln in diff.splitlines()[2:]
        if ln[:1] in "+-" and re.search(r"\w", ln) and not ln[1:].strip().startswith("#")
    ]
    words = {p.split(".")[-1] for p in extra} | {p.split(".")[0] for p in extra}
    return [ln for ln in lines if any(w in ln for w in words)] or lines
