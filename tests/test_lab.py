"""`make lab` (labstack.lab) end to end, with the stack and the notebook runs stood in: the order
it runs things, the settings it passes, that a failed notebook does not stop the others, and the
summary page it writes from the results the notebooks leave (the H100 reference pages',
docs/results/h100/<notebook>/results/)."""

import json
import os
import shutil

import pandas as pd

from labstack import editions, lab, launcher, notebook_runner
from servelab.paths import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "results" / "h100"
PAGES = {
    "fastapi": "04_fastapi_benchmarks",
    "triton": "06_triton_benchmarks",
    "hardware": "07_how_close_to_the_hardware",
}


def test_make_lab_runs_every_notebook_and_writes_the_summary(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    (results / "stale").mkdir(parents=True)  # a previous run's folder: removed first
    monkeypatch.setattr(lab, "RESULTS", results)
    monkeypatch.setattr(launcher, "LAB_DIR", tmp_path / "lab")
    monkeypatch.setenv("TRITON_MODEL_REPOSITORY", "restored after the test")
    monkeypatch.setenv("LAB_HW_CLIENTS", "4")  # a setting of yours wins over --quick's
    calls = []
    monkeypatch.setattr(launcher, "up", lambda **kw: calls.append(("up", kw)))
    monkeypatch.setattr(launcher, "down", lambda: calls.append(("down",)))
    monkeypatch.setattr(launcher, "read_state", lambda: {"services": {}})
    monkeypatch.setattr(launcher, "client_urls", lambda state: {"LAB_MODE": "local"})

    def execute(path, out, params, extra_env, echo, cwd):
        # the solved edition, run from the folder students open
        assert path.parent == editions.SOLVED and cwd == editions.STUDENT
        calls.append(("run", path.name, dict(params), extra_env))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("{}")
        folder = lab.BENCHMARK_NOTEBOOKS[path.name]
        if folder == "triton":
            raise RuntimeError("a cell failed")
        shutil.copytree(REFERENCE / PAGES[folder] / "results" / folder, results / folder)

    monkeypatch.setattr(notebook_runner, "execute", execute)

    assert lab.main(["--quick"]) == 1  # one notebook failed

    expected = {k: v for k, v in lab.QUICK_PARAMS.items() if k != "HW_CLIENTS"}
    assert calls[0] == ("up", {"jupyter": False}) and calls[-1] == ("down",)
    runs = [c for c in calls if c[0] == "run"]
    assert [r[1] for r in runs] == list(lab.BENCHMARK_NOTEBOOKS)
    assert all(r[2] == expected and r[3] == {"LAB_MODE": "local"} for r in runs)
    repository = tmp_path / "lab" / "make_lab_model_repository"
    assert os.environ["TRITON_MODEL_REPOSITORY"] == str(repository)
    assert not (results / "stale").exists()
    assert "06_triton_benchmarks.ipynb failed" in capsys.readouterr().err

    run = json.loads((results / "run.json").read_text())
    assert run["params"] == expected
    assert [e["status"] for e in run["executed"]] == ["ok", "FAILED: RuntimeError", "ok"]
    page = (results / "index.md").read_text()
    assert "| [06_triton_benchmarks.ipynb](notebooks/06_triton_benchmarks.ipynb) | FAILED" in page
    assert "LAB_N_SEQUENTIAL=20" in page and "LAB_HW_CLIENTS" not in page
    assert "## fastapi" in page and "## hardware" in page and "## triton" not in page
    assert "![fastapi_runs](fastapi/fastapi_runs.png)" in page
    assert "[summary.csv](hardware/summary.csv)" in page
    assert "| run " in page and " median_ms " in page and " throughput_infer_s " in page
    assert "**does not hold**" in page  # the reference's hardware claims include one that fails


def test_claims_table_keeps_every_verdict_and_bolds_a_failed_one():
    claims = REFERENCE / PAGES["hardware"] / "results" / "hardware" / "claims.csv"
    table = lab.claims_with_verdicts(claims)
    assert list(table.columns) == ["claim", "verdict", "value", "interval", "rule", "how", "note"]
    recorded = pd.read_csv(claims, keep_default_na=False)["verdict"]
    assert "does not hold" in set(recorded)  # the page has a failed claim to bold (the goal)
    assert list(table["verdict"]) == [
        "**does not hold**" if v == "does not hold" else v for v in recorded
    ]
