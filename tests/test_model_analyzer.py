"""Model Analyzer (issue 26) in local launch mode, for real: it starts the lab's tritonserver (the
nvidia-pytriton wheel's 2.51) and drives tritonclient's perf_analyzer 2.51 on a tiny manual search
of the ONNX stand-in; its CSV is parsed and the best configuration under a p99 budget chosen.
"""
from __future__ import annotations

import pandas as pd
import pytest

from servelab import model_analyzer as ma

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def test_the_pinned_release_is_installed():
    # 1.45.0 (Triton 24.10 / 2.51) is not on PyPI; 1.44.0 has the same code (see the module docstring)
    assert ma.installed_version() == "1.44.0"


@pytest.fixture(scope="module")
def search_result(built_artifacts, tmp_path_factory):
    search = ma.Search(instances=[1, 2], max_batch_sizes=[8], concurrency=[2], window_ms=1000, p99_budget_ms=100)
    result = ma.run(search, tmp_path_factory.mktemp("model_analyzer"), timeout=360)
    print(f"model-analyzer: {len(result.table)} measurements in {result.seconds:.0f} s")
    return search, result


def test_search_measures_every_configuration(search_result):
    search, result = search_result
    table = result.table
    # the default configuration (as staged) + instances 1 and 2 at max batch 8, at concurrency 2
    assert len(table) == search.points == 3
    assert set(table["variant"]) == {"food_classifier_onnx_config_default", "food_classifier_onnx_config_0",
                                     "food_classifier_onnx_config_1"}
    assert (table["concurrency"] == 2).all()
    assert (table["throughput_infer_s"] > 0).all() and (table["p99_ms"] >= table["p95_ms"]).all()
    assert {"server_queue_ms", "server_compute_infer_ms"} <= set(table.columns)
    two = result.variant_config("food_classifier_onnx_config_1")
    assert "count: 2" in two and "KIND_CPU" in two and "max_batch_size: 8" in two
    assert result.summary_report is not None and result.summary_report.stat().st_size > 1000


def test_best_per_objective_respects_the_budget(search_result):
    _, result = search_result
    table = result.table
    best = ma.best_per_objective(table, p99_budget_ms=float(table["p99_ms"].max()) + 1)
    assert list(best["objective"])[:2] == ["max throughput", "min p99"]
    assert best.iloc[0]["throughput_infer_s"] == table["throughput_infer_s"].max()
    assert best.iloc[1]["p99_ms"] == table["p99_ms"].min()
    # a budget below every measured p99: nothing qualifies, and the answer says so (empty)
    assert ma.best_per_objective(table, p99_budget_ms=float(table["p99_ms"].min()) / 2).empty
    front = ma.pareto_front(table)
    assert 1 <= len(front) <= len(table)
    assert front["throughput_infer_s"].is_monotonic_increasing


def test_pareto_front_on_known_points():
    table = pd.DataFrame({"variant": list("abcd"), "throughput_infer_s": [10, 20, 15, 30],
                          "p99_ms": [5, 10, 12, 40]})
    assert list(ma.pareto_front(table)["variant"]) == ["a", "b", "d"]  # c: slower and less than b
