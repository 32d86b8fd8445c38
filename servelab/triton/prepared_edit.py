"""The measure pass makes the config.pbtxt edits you made in the prepare pass, in the node's file.

Introduced in notebook 6 (triton_config.to_edit calls it in the measure pass; notebook 2 carries
each notebook's prepared.json, with your edits, to the node).

    before = prepared_edit.make(path, "6.3a")   # the node's file before; your edit now in it

In the prepare pass you edited a copy of the model's config made from models_staging/; the
node's file holds more (the `parameters { key: "weights" ... }` block its repository adds) and, by
the time of a later step, what the lease loaded in between (6.3d's "all on GPU 0" before 6.3f).
So the edit is made as a change of fields, read with Triton's schema (config_change.py): the
fields you changed get your values, everything else stays as the node's file has it. Before
anything is written, the result is checked: it must be config.pbtxt that Triton accepts, and the
change may touch only the fields that say how the model is served (SERVING), never what runs (a
backend, a model file, a parameter); otherwise nothing is written and the cell says why, with
your prepared diff, to make by hand. The cell after it checks the file as the step does.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from google.protobuf import text_format

from servelab.passes import node_calls, record
from servelab.triton import config_change, config_text

# what a prepared edit may change for you: how the model is served, not what runs
SERVING = ("instance_group", "dynamic_batching", "max_batch_size", "response_cache")
MADE = "made_edits.json"  # in the bundle: each prepared edit this measure pass made, before/after


def make(path: Path, step: str) -> str:
    """Your prepare pass's edit for `step` made in the node's file `path`, where it can be; the
    file's text before it (also when the cell runs again after the edit was made)."""
    text = path.read_text()
    prepared = record.prepared_edit(step)
    if prepared is None:
        return text
    bundle = node_calls.STATE["bundle"]
    made = bundle.read(MADE).get(step) if bundle is not None else None
    if made and made.get("after") == text:  # made already: this cell ran before
        return made["before"]
    try:
        new_text, change = _made(prepared, text)
    except _ByHand as why:
        _ask_by_hand(step, prepared, str(why))
        return text
    path.write_text(new_text)
    if bundle is not None:
        bundle.record(MADE, step, {"before": text, "after": new_text, "fields": change.fields})
    print(
        f"{step}: your prepare pass's edit (made {prepared.get('made', 'before the lease')}) is "
        f"now in {path}: {', '.join(change.fields)} as you wrote it, the rest as this node's "
        "file has it:"
    )
    print(_diff(text, new_text, "the node's file", "with your edit"), end="")
    return text


class _ByHand(Exception):
    """Why the measure pass leaves this edit to you."""


def _made(prepared: dict, node_text: str) -> tuple[str, config_change.Change]:
    """The node's text with the prepared change made, checked; _ByHand says why it cannot be."""
    before, after = prepared.get("before"), prepared.get("after")
    if not isinstance(before, str) or not isinstance(after, str):
        raise _ByHand("prepared.json does not hold that edit's text before and after it")
    try:
        change = config_change.between(before, after)
    except text_format.ParseError as exc:
        raise _ByHand(f"the prepared edit is not config.pbtxt that Triton accepts ({exc})")
    others = [f for f in change.top_level if f not in SERVING]
    if others:
        raise _ByHand(
            f"it changes {', '.join(others)}, which decides what Triton runs; the measure pass "
            f"changes for you only how the model is served ({', '.join(SERVING)})"
        )
    if not change.paths:
        raise _ByHand("the prepared copy was not changed")
    try:
        new_text = change.made_in(node_text)
    except config_change.CannotMake as exc:
        raise _ByHand(str(exc)) from None
    except text_format.ParseError as exc:
        raise _ByHand(f"this node's file is not config.pbtxt that Triton accepts ({exc})")
    if "instance_group" in change.top_level and _runs_on_cpu(node_text):
        new_text = config_text.to_cpu(new_text)
        print("(this model runs on the CPU here, no GPU: KIND_GPU written as KIND_CPU)")
    config_text.parse_config(new_text)  # checked before it is written
    return new_text, change


def _runs_on_cpu(text: str) -> bool:
    """Does this file's model run on the CPU only (a node without GPU: local mode rewrote it)?"""
    kinds = {
        g.DESCRIPTOR.fields_by_name["kind"].enum_type.values_by_number[g.kind].name
        for g in config_text.parse_config(text).instance_group
    }
    return "KIND_CPU" in kinds and "KIND_GPU" not in kinds


def _ask_by_hand(step: str, prepared: dict, why: str) -> None:
    print(
        f"{step}: your prepared edit is not made here ({why}), so make it in the editor; what "
        "you changed then:"
    )
    before, after = (str(prepared.get(k, "")) for k in ("before", "after"))
    print(_diff(before, after, "before", "your prepared edit"), end="")


def _diff(old: str, new: str, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True), old_name, new_name)
    return "".join(lines)
