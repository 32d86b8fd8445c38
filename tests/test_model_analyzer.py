"""Model Analyzer (notebook 8), for real, in both launch modes on a tiny manual search of the ONNX
stand-in: local (the command notebook 8 runs: Model Analyzer starts the lab's tritonserver 2.51
per configuration and drives tritonclient's perf_analyzer 2.51) and remote (the Docker stack's
way: the configurations are loaded into a running Triton whose repository API wants the node's
secret). Its results are read with servelab.model_analyzer, as the notebook reads them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from triton_helpers import start_local_triton

from labstack import model_analyzer as search_tool
from servelab import model_analyzer as ma
from servelab.paths import REPO_ROOT
from servelab.triton import triton_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]
VARIANTS = {
    "food_classifier_onnx_config_default",
    "food_classifier_onnx_config_0",
    "food_classifier_onnx_config_1",
}
# the default configuration (as staged) + instances 1 and 2 at max batch 8, at concurrency 2
TINY = ["--instances", "1", "2", "--max-batch-sizes", "8", "--concurrency", "2"]


def test_the_pinned_release_is_installed():
    # 1.45.0 (Triton 24.10 / 2.51) is not on PyPI; 1.44.0 has the same code (labstack's docstring)
    assert search_tool.installed_version() == "1.44.0"


@pytest.fixture(scope="module")
def local_report(built_artifacts, tmp_path_factory):
    """The command as notebook 8 runs it, then the notebook's reading of what it wrote."""
    workdir = tmp_path_factory.mktemp("model_analyzer")
    cmd = [sys.executable, "-m", "labstack.model_analyzer", "--workdir", str(workdir), *TINY]
    done = subprocess.run(
        [*cmd, "--window-ms", "1000"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(done.stdout[-1500:])
    assert "best under p99 <= 100 ms" in done.stdout and "Pareto front" in done.stdout
    return ma.load(workdir)


def test_search_measures_every_configuration(local_report):
    table = local_report.table
    assert len(table) == local_report.search["points"] == 3
    assert set(table["variant"]) == VARIANTS and (table["concurrency"] == 2).all()
    assert (table["throughput_infer_s"] > 0).all() and (table["p99_ms"] >= table["p95_ms"]).all()
    assert {"server_queue_ms", "server_compute_infer_ms"} <= set(table.columns)
    assert sorted(ma.instances(table)) == [1, 1, 2]
    two = local_report.variant_config("food_classifier_onnx_config_1")
    assert "count: 2" in two and "KIND_CPU" in two and "max_batch_size: 8" in two
    assert local_report.summary_report is not None
    assert local_report.summary_report.stat().st_size > 1000
    assert local_report.search["launch"] == "local" and local_report.search["seconds"] > 0
    assert (local_report.workdir / "pareto.png").stat().st_size > 10_000


def test_best_per_objective_respects_the_budget(local_report):
    table = local_report.table
    best = ma.best_per_objective(table, p99_budget_ms=float(table["p99_ms"].max()) + 1)
    assert list(best["objective"])[:2] == ["max throughput", "min p99"]
    assert best.iloc[0]["throughput_infer_s"] == table["throughput_infer_s"].max()
    assert best.iloc[1]["p99_ms"] == table["p99_ms"].min()
    # a budget below every measured p99: nothing qualifies, and the answer says so (empty)
    assert ma.best_per_objective(table, p99_budget_ms=float(table["p99_ms"].min()) / 2).empty
    front = ma.pareto_front(table)
    assert 1 <= len(front) <= len(table)
    assert front["throughput_infer_s"].is_monotonic_increasing


def test_remote_launch_mode_against_a_running_triton(built_artifacts, tmp_path):
    """The Docker stack's way, on a local Triton with the same restricted repository API: every
    configuration is loaded into the running server (the secret carried by the child process),
    measured, and at the end the model is back on its own config.pbtxt."""
    server = start_local_triton(tmp_path / "triton", timeout=90)
    try:
        # as notebook 8 runs it: `python -m`, so the child must import this module by its name
        cmd = [sys.executable, "-m", "labstack.model_analyzer", "--launch", "remote", *TINY]
        cmd += ["--url", server.url, "--metrics-url", server.metrics_url, "--repo", server.repo]
        cmd += ["--workdir", tmp_path / "search", "--window-ms", "1000", "--timeout", "360"]
        done = subprocess.run(
            [str(part) for part in cmd], cwd=REPO_ROOT, capture_output=True, text=True, timeout=400
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        report = ma.load(tmp_path / "search")
        table = report.table
        assert set(table["variant"]) == VARIANTS and (table["throughput_infer_s"] > 0).all()
        assert report.search["launch"] == "remote" and report.search["triton"] == server.url
        log = server.log.read_text(errors="replace")
        # Triton itself loaded the 2-instance variant (one server, no restart)
        assert "food_classifier_onnx_0_1" in log, server.log_tail()
        served = triton_config.served_config("food_classifier_onnx", server.url)
        assert served["max_batch_size"] == 16 and served["instance_group"][0]["count"] == 1
    finally:
        server.stop()
