"""Notebook 8's checks: your step mapping as Triton would read it (8.1), and the claims of 8.2 and
8.4 judged on your runs.

Introduced in notebook 8.
"""

from __future__ import annotations

from google.protobuf import text_format

from servelab import claims, config_text
from servelab.answers import NotYet, blank
from servelab.ensemble import ENSEMBLE, INPUT, OUTPUT, STEPS
from servelab.paths import STAGING


def _config(folder: str):
    return config_text.parse_config((STAGING / folder / "config.pbtxt").read_text())


def _maps_its_model(s, step: str) -> None:
    """A step's input_map and output_map keys are its model's own input and output names (the
    config.pbtxt files notebook 8 shows)."""
    model = _config(s.model_name)
    for kind, mapped, names in (
        ("input", s.input_map, {t.name for t in model.input}),
        ("output", s.output_map, {t.name for t in model.output}),
    ):
        if set(mapped) != names:
            raise NotYet(
                f"{step}: {s.model_name}'s {kind}_map has keys {sorted(mapped)}; the keys are "
                f"the model's own {kind} names: {sorted(names)}."
            )


def check_step_mapping(text, step: str = "8.1") -> str:
    """Your ensemble_scheduling block, checked as Triton would read it and answered in one
    sentence (exercises.NotYet): it parses as config.pbtxt, names the two steps, maps every input
    and output of each step's model, and chains them (the ensemble's input -> preprocess ->
    food_classifier_onnx -> the ensemble's output). Returns the text when it does."""
    if blank(text):
        raise NotYet(
            f"{step}: replace the `...` above with the ensemble_scheduling block (two steps, each "
            "with model_name, model_version, input_map and output_map), in quotes."
        )
    try:
        steps = list(config_text.parse_config(text).ensemble_scheduling.step)
    except text_format.ParseError as exc:
        raise NotYet(f"{step}: not config.pbtxt that Triton accepts ({exc}).") from None
    if [s.model_name for s in steps] != list(STEPS):
        raise NotYet(
            f"{step}: the steps name {[s.model_name for s in steps]}; the ensemble needs "
            f"{list(STEPS)}, in that order."
        )
    available = {t.name for t in _config(ENSEMBLE).input}  # what exists when a step would run
    for s in steps:
        _maps_its_model(s, step)
        for value in s.input_map.values():
            if value not in available:
                raise NotYet(
                    f"{step}: {s.model_name} reads `{value}`, which nothing produces before it: "
                    f"use the ensemble's input ({INPUT}) or a name an earlier output_map wrote."
                )
        available |= set(s.output_map.values())
    if OUTPUT not in available:
        raise NotYet(
            f"{step}: no output_map writes the ensemble's output `{OUTPUT}`: the last step's "
            "output must be mapped to it."
        )
    return text


def three_paths(runs: dict, rate: float) -> None:
    """8.2: the ensemble against the Python-backend model and the client path (closed loop, your
    predictions beside them), and at the offered rate: the ensemble keeps it, the Python model
    cannot."""
    ens, py, onnx = (
        runs[f"8.2 {p} closed"].throughput for p in ("ensemble", "python", "client_onnx")
    )
    claims.compare_prediction("8.2 ensemble / Python-backend model throughput (x)", ens / py)
    claims.compare_prediction("8.2 ensemble / client-side ONNX throughput (x)", ens / onnx)
    claims.at_least(
        "8.2: the ensemble serves more than the Python model that decodes and runs PyTorch",
        ens / py,
        1.0,
    )
    offered = runs[f"8.2 ensemble {rate}/s"]
    claims.at_least(
        f"8.2: at {rate} requests/s the ensemble keeps the offered rate (>= 95%)",
        offered.throughput / rate,
        0.95,
        {"sent late %": offered.row["delayed_pct"]},
    )
    claims.at_least(
        f"8.2: {rate} requests/s is more than the Python model can serve (U = rate x "
        "service time > 1: its queue only grows)",
        claims.Measured.exact(rate) / py,
        1.0,
    )


def a_second_decoder(one, two, slow: str) -> None:
    """8.4: two preprocess instances (run `two`) against one (`one`), your prediction beside the
    gain; preprocess's own queue judged only where it queued for a good part of its own work (a
    queue of a millisecond or two moves with anything else the cores do); where the requests
    still wait, by `slow`, the step with the longer queue in 8.3."""
    gain = two.throughput / one.throughput
    claims.compare_prediction("8.4 throughput, 2 preprocess instances / 1 (x)", gain)
    shorter = "8.4: a second preprocess instance shortens preprocess's own queue"
    queued, work = one.row["preprocess_queue_ms"], one.row["preprocess_compute_ms"]
    if queued >= 0.25 * work:
        ratio = two.measured("preprocess_queue_ms") / one.measured("preprocess_queue_ms")
        claims.at_most(shorter, ratio, 1.0)
    else:
        claims.not_checkable(
            shorter,
            f"preprocess hardly queued with one instance ({queued} ms against {work} ms of its "
            "own work)",
        )
    if slow != "food_classifier_onnx":
        claims.at_least("8.4: requests waited for decoding: a second decoder serves more", gain, 1)
        return
    claims.at_least(
        "8.4: with two decoders the requests still wait at the classifier (its queue "
        "stays longer than preprocess's)",
        two.measured("food_classifier_onnx_queue_ms") / two.measured("preprocess_queue_ms"),
        1.0,
        note="throughput moves with whatever else the cores do; the queues say where",
    )
