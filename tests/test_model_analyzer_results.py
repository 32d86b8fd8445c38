"""Reading Model Analyzer's results beside notebook 7's (fast, no server): the Pareto front, and
the comparison with the hand-tuned best under the p99 budget, from files shaped like the ones
notebook 7 writes (results/hardware/served_over_limit.json and summary.csv)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from servelab import model_analyzer as ma

SEARCH = pd.DataFrame(
    {
        "variant": ["m_config_default", "m_config_0", "m_config_1"],
        "concurrency": [4, 4, 4],
        "instance_group": ["1:CPU", "1:CPU", "2:CPU"],
        "max_batch_size": [16, 8, 8],
        "throughput_infer_s": [100.0, 120.0, 150.0],
        "p99_ms": [40.0, 30.0, 130.0],
    }
)


def test_pareto_front_on_known_points():
    table = pd.DataFrame(
        {"variant": list("abcd"), "throughput_infer_s": [10, 20, 15, 30], "p99_ms": [5, 10, 12, 40]}
    )
    assert list(ma.pareto_front(table)["variant"]) == ["a", "b", "d"]  # c: slower and less than b


def write_notebook_7(folder, repeats=(0.40, 0.50)):
    folder.mkdir(parents=True, exist_ok=True)
    limit = {"images_per_s": 200.0, "path": "onnxruntime cpu", "batch": 16}
    record = {"limit": limit, "device": "cpu", "repeats_served_over_limit": list(repeats)}
    (folder / "served_over_limit.json").write_text(json.dumps(record))
    runs = pd.DataFrame(
        {
            "run": ["7.2 start", "7.7 a", "7.7 b"],
            "throughput_infer_s": [40.0, 90.0, 110.0],
            "p99_ms": [50.0, 80.0, 400.0],  # the fastest run is over the budget
            "command": ["pa 1", "pa 2", "pa 3"],
        }
    )
    runs.to_csv(folder / "summary.csv", index=False)


def test_absent_notebook_7_is_said_so(tmp_path):
    assert ma.hand_tuned(tmp_path / "hardware", 100) is None
    table = ma.comparison(SEARCH, 100, None)
    assert "served_over_limit" not in table and not table["who"].str.contains("notebook 7").any()


def test_hand_tuned_best_under_the_budget(tmp_path):
    write_notebook_7(tmp_path)
    hand = ma.hand_tuned(tmp_path, 100)
    # 7.7 b serves more but misses the budget: 7.7 a is notebook 7's answer to "p99 < 100 ms"
    assert hand["run"] == "7.7 a" and hand["served_over_limit"] == pytest.approx(0.45)
    # the spread of notebook 7's repeats (median 0.50, lowest 0.40: -20%), applied to this run
    assert hand["lo"] == pytest.approx(0.45 * 0.8) and hand["hi"] == pytest.approx(0.45)
    table = ma.comparison(SEARCH, 100, hand).set_index("who")
    assert table.loc["notebook 7, hand-tuned", "served_over_limit"] == pytest.approx(0.45)
    best = table.loc["Model Analyzer, max throughput"]
    assert best["throughput_infer_s"] == 120.0  # 150 infer/s had p99 130 ms: over the budget
    assert best["served_over_limit"] == pytest.approx(0.6)
    assert ma.hand_tuned(tmp_path, 10)["run"] is None  # nothing of notebook 7 under 10 ms
