"""What you wrote, kept with the time you wrote it: your predictions, your checked lines and your
file edits.

Introduced in notebook 4 (claims.predict and the exercise checks keep them through it).

A prediction is made before the measurement it predicts. The prepare pass requires each one and
keeps it with its time in prepared.json; the measure pass keeps it in the bundle (with the time
of prepare's when you did not change it since); the review pass reads it from the bundle, and a
value changed after measuring does not replace it (it would not be a prediction).

A config.pbtxt edit made and checked in the prepare pass is kept as the file before and after it;
the measure pass makes the same change of fields in the node's file, whatever else that file
holds (servelab/triton/prepared_edit.py), so the lease runs what you wrote instead of having you
type it again.
"""

from __future__ import annotations

from servelab.passes import bundle as bundles
from servelab.passes.choice import MEASURE, PREPARE, REVIEW, Stop
from servelab.passes.node_calls import STATE

PREPARED = "prepared.json"
PREDICTIONS = "predictions.json"
LINES = "lines.json"


def prediction(key: str, value, why: str) -> dict:
    """Your prediction for `key` as this pass keeps it: {prediction, value, why, made, pass}."""
    lab_pass, bundle = STATE["pass"], STATE["bundle"]
    made = {"prediction": key, "value": value, "why": why, "made": bundles.now(), "pass": lab_pass}
    if lab_pass is None:
        return made
    if lab_pass == REVIEW:
        return _as_measured(bundle, key, value)
    if value is None and lab_pass == PREPARE:
        raise Stop(
            f"{key}: write your prediction in place of None (a number, or a word where the text "
            "asks for one); the prepare pass keeps every prediction before the lease."
        )
    if lab_pass == PREPARE:
        bundle.record(PREPARED, "predictions", _with(bundle.read(PREPARED), "predictions", made))
        return made
    earlier = bundle.read(PREPARED).get("predictions", {}).get(key)
    if earlier and earlier["value"] == value and value is not None:
        made = {**earlier, "pass": PREPARE}  # made before the lease, unchanged since
    if value is not None or bundle.read(PREDICTIONS).get(key) is None:
        bundle.record(PREDICTIONS, key, made)
    return made


def _with(prepared: dict, part: str, item: dict) -> dict:
    return {**prepared.get(part, {}), item.get("prediction") or item["step"]: item}


def _as_measured(bundle: bundles.Bundle, key: str, value) -> dict:
    """The prediction the measure pass kept; for a step it never reached (a bundle cut short),
    the one the prepare pass kept, else this one: no measurement came after it either way."""
    kept = bundle.read(PREDICTIONS).get(key)
    if kept is None:
        prepared = bundle.read(PREPARED).get("predictions", {}).get(key)
        return prepared or {
            "prediction": key,
            "value": value,
            "why": "",
            "made": bundles.now(),
            "pass": REVIEW,
        }
    if value is not None and value != kept["value"]:
        print(
            f"(the bundle keeps the prediction you made before measuring, {kept['value']!r}; "
            f"{value!r}, written after, is not a prediction)"
        )
    return kept


def line(step: str, what: str, text: str) -> None:
    """A line you wrote, as its check accepted it (perf_analyzer, curl, config.pbtxt)."""
    lab_pass, bundle = STATE["pass"], STATE["bundle"]
    if lab_pass not in (PREPARE, MEASURE):
        return
    item = {"step": f"{step}: {what}", "text": str(text), "made": bundles.now(), "pass": lab_pass}
    if lab_pass == PREPARE:
        bundle.record(PREPARED, "lines", _with(bundle.read(PREPARED), "lines", item))
    else:
        bundle.record(LINES, item["step"], item)


def edit(step: str, before: str, after: str) -> None:
    """Your edit of a file for `step` as its check accepted it in the prepare pass."""
    if STATE["pass"] != PREPARE:
        return
    bundle = STATE["bundle"]
    made = {"step": step, "before": before, "after": after, "made": bundles.now()}
    bundle.record(PREPARED, "edits", _with(bundle.read(PREPARED), "edits", made))


def prepared_edit(step: str) -> dict | None:
    """{step, before, after, made} of your prepare pass's edit for `step`, if it made one."""
    bundle = STATE["bundle"]
    if bundle is None:
        return None
    return bundle.read(PREPARED).get("edits", {}).get(step)
