"""What a notebook asks of the node, kept by the measure pass and given back by the review pass.

Introduced in notebook 3 (servelab's runs and readings of the services go through it).

    run = passes.on_node("perf 6.1 c8", "perf", lambda: ..., save=..., load=...)
    passes.change("edit food_classifier ...", lambda: ...)   # done, not read back

measure: the call runs; with a bundle open, its result and what it printed are kept under its key
(a run's name, or the reading and its arguments). review: nothing runs; what it printed is
printed again and its result read back, so every later cell computes what it computed in the
measure pass. prepare: a call that needs the node is a mistake of the notebook (its cell should
say `%%runs_in measure`), and stops with that sentence. With no pass started (a script, a test),
the call just runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

from servelab.passes import bundle as bundles
from servelab.passes import cut_short
from servelab.passes.choice import MEASURE, REVIEW, Stop

PRINTED = "printed.txt"
VALUE = "value.json"
# the notebook's pass and bundle, once its first cell ran passes.start (None: no pass started)
STATE: dict = {"pass": None, "notebook": None, "bundle": None, "inside": 0}


class _Tee(io.TextIOBase):
    """Writes to the notebook as usual and keeps a copy."""

    def __init__(self, out):
        self.out, self.kept = out, io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def save_json(value, folder: Path) -> None:
    bundles.write_json(folder / VALUE, value)


def load_json(folder: Path):
    return json.loads((folder / VALUE).read_text())


def on_node(
    key: str,
    kind: str,
    call: Callable,
    save: Callable = save_json,
    load: Callable = load_json,
):
    """call()'s result, from the node (measure, kept in the bundle) or from the bundle (review)."""
    lab_pass, bundle = STATE["pass"], STATE["bundle"]
    if lab_pass is None or STATE["inside"]:  # no pass, or a part of a call already kept
        return call()
    if lab_pass == REVIEW:
        return _replayed(bundle, key, load)
    if lab_pass != MEASURE:
        raise Stop(
            f"{key}: this needs the node, which the {lab_pass} pass does not reach: its cell "
            "runs in the measure pass (a notebook error: its first line should say so)."
        )
    tee = _Tee(sys.stdout)
    STATE["inside"] += 1
    try:
        with contextlib.redirect_stdout(tee):
            result = call()
    finally:
        STATE["inside"] -= 1
    folder = bundle.entry_folder(key, kind)
    folder.mkdir(parents=True, exist_ok=True)
    save(result, folder)
    (folder / PRINTED).write_text(tee.kept.getvalue())
    bundle.kept(key, kind)
    return result


def change(key: str, call: Callable):
    """A change made on the node (a config reloaded, a service switched): done in the measure
    pass, what it printed kept; in the review pass printed again, and nothing returned."""
    return on_node(key, "change", call, save=lambda result, folder: None, load=lambda folder: None)


def _replayed(bundle: bundles.Bundle, key: str, load: Callable):
    folder = bundle.files_of(key)
    if folder is None:
        known = bundle.entry(key) is not None
        if cut_short.STATE["on"]:
            why = (
                "its files are not in the bundle" if known else "the measure pass stopped before it"
            )
            raise cut_short.not_measured(key, why)
        raise Stop(
            f"the bundle at {bundle.folder} lists {key!r} but its files are gone."
            if known
            else f"the bundle at {bundle.folder} has no {key!r}: the measure pass that made it "
            "did not measure it (was the notebook changed since?)."
        )
    printed = folder / PRINTED
    if printed.is_file():
        print(printed.read_text(), end="", flush=True)
    return load(folder)


def kept_by_pass() -> bundles.Bundle | None:
    """The bundle of a measure pass (None in the other passes, or with no pass started)."""
    return STATE["bundle"] if STATE["pass"] == MEASURE else None


def setting(part: str, name: str, value):
    """A setting of the measure pass (part "settings": a LAB_ parameter; "urls": a service's
    address): kept in its manifest, and what the review pass uses in its place."""
    lab_pass, bundle = STATE["pass"], STATE["bundle"]
    if lab_pass == REVIEW:
        return bundle.manifest.get(part, {}).get(name, value)
    if lab_pass == MEASURE and bundle.manifest.get(part, {}).get(name) != value:
        bundle.manifest.setdefault(part, {})[name] = value
        bundle.save()
    return value
