"""Notebook 8 ("going further") headless against a real local stack, small settings. The student
edition stops at exercise 8.1's check with one sentence; the solved edition runs top to bottom:
the ensemble's step mapping is loaded and served, the three paths and the second preprocess
instance are measured with per-step statistics, the live view samples the ramp, and the Model
Analyzer command runs a tiny local search whose report the notebook reads. Notebook 7 is not run
here, so the comparison with its hand-tuned result must say it is absent (the comparison itself:
tests/test_model_analyzer_results.py).

As in tests/test_notebooks.py: a measured claim that does not hold on this machine is its finding
(reported), a fact that does not hold stops the notebook (LAB_STRICT_CLAIMS=facts).
"""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
from launcher_cli import run_launcher
from test_notebooks import (
    assert_stops_at_first_exercise,
    findings,
    run_solved,
    stack_env,
    up_with_triton,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
# the search's space, on top of the small settings every notebook test uses
SEARCH = {"GF_MA_INSTANCES": "1,2", "GF_MA_MAX_BATCH": "8", "GF_MA_CONCURRENCY": "4"}


def test_notebook_8_runs_top_to_bottom(tmp_path, built_artifacts):
    state, results = tmp_path / "lab", tmp_path / "results"
    env = stack_env(
        tmp_path, LAB_GF_MA_WINDOW_MS="1000", **{f"LAB_{k}": v for k, v in SEARCH.items()}
    )
    up_with_triton(env)
    try:
        sentence = assert_stops_at_first_exercise("08_going_further", tmp_path, env)
        assert sentence.startswith("8.1: ") and "config.pbtxt fragment" in sentence, sentence
        start = time.monotonic()
        run_solved("08_going_further", tmp_path, env)
        print(f"notebook 8 (solved edition) ran in {time.monotonic() - start:.0f} s")
    finally:
        run_launcher(state, "down", extra_env=env)
    out = results / "going_further"
    summary = pd.read_csv(out / "summary.csv")
    rate = [r for r in summary["run"] if r.startswith("8.2 ensemble ") and r.endswith("/s")]
    assert len(rate) == 1, list(summary["run"])
    per_second = rate[0].split(" ")[-1]
    assert list(summary["run"]) == [
        "8.2 ensemble closed",
        "8.2 python closed",
        "8.2 client_onnx closed",
        f"8.2 ensemble {per_second}",
        f"8.2 python {per_second}",
        f"8.2 client_onnx {per_second}",
        "8.4 ensemble, 2 preprocess",
        "8.5 ramp",
    ]
    assert summary["command"].str.startswith("perf_analyzer -m food_classifier").all()
    ensemble_rows = summary[summary["run"].str.contains("ensemble")]
    for step in ("preprocess", "food_classifier_onnx"):
        assert (ensemble_rows[f"{step}_compute_ms"] > 0).all(), step
    claims = pd.read_csv(out / "claims.csv", keep_default_na=False)
    findings(claims, "notebook 8")
    facts = claims[claims["claim"].str.startswith(("8.1:", "8.3: every request"))]
    assert len(facts) == 2 and (facts["verdict"] == "holds").all(), facts
    compared = claims[claims["claim"].str.startswith("8.6: the search against notebook 7")]
    assert list(compared["verdict"]) == ["not checked here"]  # notebook 7 did not run here
    live = pd.read_csv(out / "live_8.5.csv")
    assert (live["preprocess:infer_per_s"] > 0).sum() >= 6
    search = json.loads((out / "model_analyzer" / "search.json").read_text())
    assert search["launch"] == "local" and search["points"] == 3
    for png in ("stages.png", "live_8.5.png", "model_analyzer_vs_hand_tuned.png"):
        assert (out / png).stat().st_size > 10_000, png
    predictions = pd.read_csv(out / "predictions.csv")
    assert len(predictions) == 4 and predictions["value"].notna().all()
