"""Every notebook is valid, compiles, matches its jupytext source; the benchmark notebooks run headless."""
import os
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from conftest import run_launcher
from servelab import notebook_runner, notebook_sync
from servelab.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SMALL = {"N_SEQUENTIAL": 20, "N_CONCURRENT": 96, "CONCURRENCY": 16}


def test_the_numbered_series_is_there():
    numbers = {p.name[:2] for p in NOTEBOOKS}
    assert {"04"} <= numbers, numbers


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_valid_and_code_compiles(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    transform = TransformerManager().transform_cell  # turns %magics and !shell lines into Python
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            compile(transform(cell.source), f"{path.name}[cell {i}]", "exec")
            assert not cell.get("outputs"), f"{path.name} cell {i}: commit notebooks without outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_ipynb_matches_its_jupytext_source(path):
    source = path.with_suffix(".py")
    assert source.exists(), f"{path.name} has no .py source"
    expected = notebook_sync.render(source)
    actual = nbformat.read(path, as_version=4)
    assert [(c.cell_type, c.source) for c in actual.cells] == [(c.cell_type, c.source) for c in expected.cells], \
        f"{path.name} is out of date: run `make notebooks`"
    assert path.read_text() == nbformat.writes(expected) + "\n", f"{path.name}: run `make notebooks`"


def test_fastapi_benchmark_notebook_runs_top_to_bottom(tmp_path, built_artifacts):
    state, results = tmp_path / "lab", tmp_path / "results"
    env = {"LAB_STATE_DIR": str(state), "LAB_RESULTS_DIR": str(results), "LAB_STRICT_CLAIMS": "1"}
    up = run_launcher(state, "up", "--no-triton")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        notebook_runner.execute(REPO_ROOT / "notebooks/04_fastapi_benchmarks.ipynb", tmp_path / "executed.ipynb",
                                params=SMALL, extra_env=env)
    finally:
        run_launcher(state, "down")
    summary = pd.read_csv(results / "fastapi" / "summary.csv")
    assert list(summary["run"]) == ["pytorch_sequential", "onnx_sequential", "onnx_concurrent_16",
                                    "pytorch_concurrent_16"]
    assert (summary["errors"] == 0).all() and (summary["requests"] == [20, 20, 96, 96]).all()
    claims = pd.read_csv(results / "fastapi" / "claims.csv")
    assert len(claims) == 5 and claims["holds"].all()
    for png in ("fastapi_runs.png", "fastapi_breakdown.png"):
        assert (results / "fastapi" / png).stat().st_size > 10_000
