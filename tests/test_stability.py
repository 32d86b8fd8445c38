"""maintainers/reference/stability.py without a server: the best configuration with one change and
the stubs' phase clock, where a changed configuration's starts are kept (never in the same median),
what one start's gap is made of (from a real start of the H100 execution-cost page), and the
page's section, whose lines for the H100 page's starts stay as they were. A start on a CPU, for
real: test_a_start_on_a_cpu (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from maintainers.reference import stability
from servelab.paths import REPO_ROOT

H100 = REPO_ROOT / "docs/results/h100"
BEST = H100 / "07_how_close_to_the_hardware/results/hardware/served_over_limit.json"
FRESH = H100 / "execution_costs/fresh_start/starts.json"


def test_a_change_is_set_on_the_best_configuration_and_the_clock_turned_on(tmp_path):
    best = json.loads(BEST.read_text())["best_config"]
    text = stability.config_with(best, {"direct_inputs": "on", "compile": "off"}, tmp_path)
    assert (
        text.count('key: "compile"') == 1 and 'key: "compile" value { string_value: "off" }' in text
    )
    assert 'key: "direct_inputs" value { string_value: "on" }' in text
    assert f'key: "profile_dir" value {{ string_value: "{tmp_path}" }}' in text
    assert "count: 8, kind: KIND_GPU" in text  # the rest as it was


def test_a_changed_configuration_keeps_its_own_starts(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_STABILITY_CHANGE", raising=False)
    assert stability.record_path(tmp_path).name == "starts.json"
    monkeypatch.setenv("LAB_STABILITY_CHANGE", "direct_inputs=on")
    assert stability.change() == {"direct_inputs": "on"}
    assert stability.record_path(tmp_path).name == "starts_direct_inputs-on.json"
    assert stability.record_path(tmp_path, {}).name == "starts.json"


def test_what_a_start_is_made_of():
    """One start of the H100 execution-cost page (server B): served/limit is the GPU's busy share
    times what it served per busy second over the limit."""
    record = json.loads(FRESH.read_text())
    start = record["starts"][0]
    parts = stability.gap_parts(start["detail"], record["limit_images_per_s"])
    assert parts["gpu_busy"] == pytest.approx(0.789)
    product = parts["gpu_busy"] * parts["served_per_busy_s_over_limit"]
    assert product == pytest.approx(start["served_over_limit"], abs=0.002)
    assert list(parts["cycle_ms"]) == list(stability.PHASES)
    assert parts["cycle_ms"]["between"] == pytest.approx(8.62, abs=0.01)
    assert parts["mean_batch"] == pytest.approx(50.0, abs=0.05)


def _record(ratios, changed=None, parts=None):
    starts = [
        {
            "start": i + 1,
            "started": "2026-11-29 10:00:00 UTC",
            "load_s": 60.0,
            "warm_up_infer_s": 30000.0,
            "infer_s": r * 54918.5,
            "served_over_limit": r,
            "mode": "windows",
            "seconds": 90,
            **({"parts": parts} if parts else {}),
        }
        for i, r in enumerate(ratios)
    ]
    return {
        "best": "7.7 compiled, 8 inst, max batch 64, delay 500 us, c1024",
        "best_record": "served_over_limit.json",
        "command": "perf_analyzer ...",
        "limit_images_per_s": 54918.5,
        "limit_source": "LAB_STABILITY_LIMIT",
        "change": changed or {},
        "window_ms": 3000,
        "starts": starts,
    }


def test_the_section_shows_each_configuration_with_its_own_median(tmp_path):
    folder = tmp_path / "results" / "stability"
    folder.mkdir(parents=True)
    detail = json.loads(FRESH.read_text())["starts"][0]["detail"]
    parts = stability.gap_parts(detail, 54918.5)
    (folder / "starts.json").write_text(json.dumps(_record([0.55, 0.60, 0.57], parts=parts)))
    changed = _record([0.62, 0.64, 0.63], {"direct_inputs": "on"})
    (folder / "starts_direct_inputs-on.json").write_text(json.dumps(changed))
    text = "\n".join(stability.report_lines(tmp_path, 0.70))
    assert "served/limit over 3 separately started servers: median 0.570, min 0.550" in text
    assert "### The same with one change: direct_inputs: on" in text
    assert "median 0.630, min 0.620, max 0.640" in text
    assert f"Median against the configuration as it is: {0.63 / 0.57:.3f}x." in text
    assert "limit 54918 images/s (LAB_STABILITY_LIMIT)" in text
    assert "| 1 | 0.789 |" in text  # the gap's parts of each start that has them


def test_the_h100_pages_section_is_as_it_was():
    """Its starts have no parts and no limit source: the section reads as before issue 54."""
    page = H100 / "07_how_close_to_the_hardware"
    text = "\n".join(stability.report_lines(page, 0.70))
    assert text and text in (page / "README.md").read_text()
    assert "Where the gap goes" not in text


@pytest.mark.slow
def test_a_start_on_a_cpu(tmp_path):
    """run_reference.py --parts stability on this machine: a fresh tritonserver with the best
    configuration's CPU form, its warm-up and counted runs over gRPC with shared memory (the
    node's secret through perf_analyzer's environment), the server stopped, the start kept with
    its parts; a second configuration's start in its own file."""
    env = {
        **os.environ,
        "LAB_STABILITY_BEST": str(BEST),
        "LAB_STABILITY_LIMIT": "54918.5",
        "LAB_PERF_MAX_TRIALS": "4",
        "LAB_PERF_STABILITY": "1000",
    }
    done = subprocess.run(
        [
            sys.executable,
            "maintainers/reference/run_reference.py",
            "--out",
            str(tmp_path),
            "--parts",
            "stability",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((tmp_path / "results/stability/starts.json").read_text())
    (start,) = record["starts"]
    assert "error" not in start, start
    assert start["infer_s"] > 0 and record["limit_images_per_s"] == 54918.5
    assert start["parts"]["executions"] > 0 and start["parts"]["cycle_ms"]["device"] > 0
    assert "served/limit over 1 separately started servers" in (tmp_path / "README.md").read_text()
