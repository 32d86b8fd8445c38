"""The prepare pass of notebooks 3-6, headless, where a student without the node runs it: a venv
with requirements/review.txt only (tests/review_venv.py), no service, no model files. Every
prediction is kept with its time and every exercise line is checked; the student edition stops at
its first unwritten exercise with one sentence; a review with no bundle to read says so in one
sentence and writes nothing. (The review of a measured bundle: tests/test_notebooks.py.)"""

from __future__ import annotations

import json
import re

import pytest
import review_venv as venvs

from labstack import editions

pytestmark = pytest.mark.slow  # builds a venv and runs notebooks

NOTEBOOKS = ("03_fastapi_setup", "04_fastapi_benchmarks", "05_triton_setup", "06_triton_benchmarks")
# what notebooks 3-6 ask the student to predict and write, counted from their sources: each line
# and each edit of a config.pbtxt (made on the prepare pass's copy of the file) is kept
LINE_CHECKS = re.compile(r"exercises\.(?:perf_line|curl_line|config_fragment|file_edit)\(")


def prepare_env(tmp_path) -> dict:
    return {
        "LAB_PASS": "prepare",
        "LAB_RESULTS_DIR": str(tmp_path / "results"),
        "LAB_ARTIFACTS_DIR": str(tmp_path / "no_model_files"),  # before `make artifacts`
    }


def test_the_passes_without_the_node_have_none_of_its_tools(review_venv):
    for module in ("tritonclient", "torch", "onnxruntime", "ray"):
        assert venvs.lacks(review_venv, module), module
    assert not venvs.lacks(review_venv, "ipykernel")


def offline_checks(nb) -> list[int]:
    """The cells that check an exercise in every pass: the code cell after each solution region
    that the prepare pass runs (its first line names no pass), but an answer's (written to be
    read beside the verdict, in the measure or review pass)."""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    found = []
    for here, after in zip(code, code[1:]):
        exercise, check = nb.cells[here].source, nb.cells[after].source
        answer = "judgement.verdict_after(" in check
        if "### BEGIN SOLUTION" in exercise and not exercise.startswith("%%runs_in") and not answer:
            assert not check.startswith("%%runs_in"), f"cell {after}: its check needs the node"
            found.append(after)
    return found


def test_prepare_checks_every_line_and_prediction_with_no_node(review_venv, tmp_path):
    env = prepare_env(tmp_path)
    for name in NOTEBOOKS:
        code, nb, log = venvs.run(review_venv, name, tmp_path, env)
        assert code == 0 and not venvs.errors(nb), log[-4000:]
        checks = offline_checks(nb)
        assert checks and all(nb.cells[i].get("execution_count") for i in checks), name
        source = editions.source_of(name).read_text()
        prepared = tmp_path / "results" / "bundles" / name / "prepared.json"
        kept = json.loads(prepared.read_text()) if prepared.is_file() else {}
        predictions = kept.get("predictions", {})
        assert len(predictions) == source.count("claims.predict("), (name, predictions)
        assert all(p["made"] and p["pass"] == "prepare" for p in predictions.values())
        assert len(kept.get("lines", {})) == len(LINE_CHECKS.findall(source)), (name, kept)
        assert not (prepared.parent / "manifest.json").exists(), "prepare measured something"
        skipped = [line for line in venvs.printed(nb) if line.startswith("(LAB_PASS=prepare:")]
        assert skipped, f"{name}: no cell said it runs in another pass"


def test_the_student_edition_in_prepare_stops_at_its_first_exercise(review_venv, tmp_path):
    """Notebook 4 (notebook 3's stops the same way in the measure pass: test_notebooks.py)."""
    name, step = "04_fastapi_benchmarks", "4.2"
    code, nb, log = venvs.run(review_venv, name, tmp_path, prepare_env(tmp_path), "student")
    assert code != 0, log[-2000:]
    [(cell, error)] = venvs.errors(nb)
    assert error["ename"] == "NotYet" and len(error["traceback"]) == 1, error
    sentence = error["traceback"][0]
    assert sentence.startswith(f"{step}: replace the `...`") and "\n" not in sentence, sentence
    assert "exercises." in nb.cells[cell].source  # the check of the first exercise


def test_a_review_with_no_bundle_says_so_and_writes_nothing(review_venv, tmp_path):
    bundles = tmp_path / "elsewhere"
    env = {**prepare_env(tmp_path), "LAB_PASS": "review", "LAB_BUNDLE": str(bundles)}
    code, nb, log = venvs.run(review_venv, "04_fastapi_benchmarks", tmp_path, env)
    assert code != 0
    [(cell, error)] = venvs.errors(nb)
    assert error["ename"] == "Stop" and len(error["traceback"]) == 1, error
    assert "there is no bundle at" in error["traceback"][0] and cell == next(
        i for i, c in enumerate(nb.cells) if c.cell_type == "code"
    )
    assert not bundles.exists() and not (tmp_path / "results").exists()
