"""The check of your ensemble's step mapping (notebook 8, 8.1), as Triton would read it.

Introduced in notebook 8; the notebook calls it as exercises.step_mapping.
"""

from __future__ import annotations

from google.protobuf import text_format

from servelab.ensemble import ENSEMBLE, INPUT, OUTPUT, STEPS
from servelab.exercises.answers import NotYet, blank
from servelab.paths import STAGING
from servelab.triton import config_text


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


def step_mapping(text, step: str) -> str:
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
