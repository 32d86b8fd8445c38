"""Notebook 7 ("how close to the hardware", optional) headless against a real local Triton, small
settings: the student edition stops at its first exercise; the solved edition runs top to bottom,
each step measured against the best the machine does with any runtime of the lab (the limit), the
served/limit ratio and its command saved for the stability reruns. In the extended tier: the class's
path (notebooks 5 and 6) runs in make test, and notebook 7 also runs in make test-docker's Jupyter
container.

As in tests/test_notebooks.py: a measured claim that does not hold on this machine is its finding
(reported), a fact that does not hold stops the notebook (LAB_STRICT_CLAIMS=facts).
"""

from __future__ import annotations

import json
import warnings

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

from servelab.triton import config_text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def test_notebook_7_runs_top_to_bottom(tmp_path, built_artifacts):
    state, results = tmp_path / "lab", tmp_path / "results"
    env = stack_env(tmp_path)
    up_with_triton(env)
    try:
        run_solved("07_how_close_to_the_hardware", tmp_path, env)
        assert_stops_at_first_exercise("07_how_close_to_the_hardware", tmp_path, env)
    finally:
        run_launcher(state, "down", extra_env=env)
    hardware = pd.read_csv(results / "hardware" / "summary.csv")
    # on a CPU the GPU-only steps (7.5 fp16 + CUDA graphs, 7.7 compile) measure nothing
    assert set(hardware["step"].astype(str)) == {"7.2", "7.3", "7.4", "7.6", "7.8"}
    assert (hardware["served_over_limit"] > 0).all()
    assert (hardware["in_flight_N"] > 0).all() and (hardware["instance_busy_U"] > 0).all()
    shm = hardware[hardware["run"].str.contains("shm")]
    assert len(shm) == 1 and shm["command"].str.contains("--shared-memory system").all()
    claims = pd.read_csv(results / "hardware" / "claims.csv")
    findings(claims, "notebook 7")
    not_checked = claims[claims["verdict"] == "not checked here"]
    assert {"7.5", "7.7", "goal"} <= {c.split(":")[0].split(" ")[0] for c in not_checked["claim"]}
    ratio = json.loads((results / "hardware" / "served_over_limit.json").read_text())
    best = hardware[hardware["step"].astype(str) != "7.8"][
        "throughput_infer_s"
    ].max()  # 7.8 repeats the best
    assert ratio["served_over_limit"] == pytest.approx(
        best / ratio["limit"]["images_per_s"], rel=0.01
    )
    assert ratio["limit"]["path"].startswith(
        "onnxruntime"
    )  # on a CPU, the fastest runtime of the model
    # what maintainers/reference/run_reference.py's stability part serves again on fresh servers
    assert ratio["command"].startswith("perf_analyzer -m food_classifier_tuned")
    best_config = config_text.parse_config(ratio["best_config"])
    assert best_config.name == "food_classifier_tuned" and best_config.input[0].data_type
    assert ratio["transport"]["chosen"] in ("HTTP", "gRPC", "gRPC + shared memory")
    assert all(len(runs) == 2 for runs in ratio["transport"]["runs_infer_s"].values())
    # 7.8: the best run and one repeat in the same server start
    assert len(ratio["repeats_served_over_limit"]) == 2
    # on idle cores no run serves above the limit (the best runtime alone); on busy ones it can
    above = [
        r for r in [*hardware["served_over_limit"], *ratio["repeats_served_over_limit"]] if r > 1
    ]
    if above:
        warnings.warn(f"notebook 7: served above the measured limit on this machine: {above}")
    for png in ("steps_vs_limit.png", "sweep.png", "latency_split.png"):
        assert (results / "hardware" / png).stat().st_size > 10_000
