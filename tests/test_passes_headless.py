"""The prepare pass of notebooks 3-6, headless, where a student without the node runs it: a venv
made by notebook 0's commands (requirements/review.txt and JupyterLab: tests/review_venv.py), no
service, no model files. Notebook 0's last command opens JupyterLab there, with the lab's kernel.
Every prediction is kept with its time and every exercise line is checked; the student edition
stops at its first unwritten exercise with one sentence; a review with no bundle to read says so
in one sentence and writes nothing. (The review of a measured bundle: tests/test_notebooks.py.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time

import pytest
import requests
import review_venv as venvs

from labstack import editions, launcher
from servelab.paths import REPO_ROOT

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


def test_notebook_0s_last_command_opens_jupyterlab_with_the_labs_kernel(review_venv, tmp_path):
    """`LAB_PASS=prepare .venv-review/bin/jupyter lab notebooks/`, as notebook 0 writes it (plus
    a port and a token, as a test must, and --allow-root where the tests run as root): JupyterLab
    answers, and its kernel is the venv's python, which imports the lab."""
    line = next(c for c in venvs.notebook_0_commands() if "jupyter lab" in c)
    words = [w.replace(venvs.VENV, str(review_venv.parent.parent)) for w in shlex.split(line)]
    env = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    argv = [w for w in words if w.split("=", 1)[0] not in env]
    port, token = launcher.free_port(), "journey"
    argv += ["--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1"]
    argv += [f"--IdentityProvider.token={token}"] + (["--allow-root"] if os.geteuid() == 0 else [])
    home = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], **env}
    server = subprocess.Popen(
        argv, cwd=REPO_ROOT, env=home, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        specs = None
        for _ in range(240):
            try:
                got = requests.get(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}")
                specs = got.json() if got.status_code == 200 else None
            except requests.ConnectionError:
                pass
            if specs or server.poll() is not None:
                break
            time.sleep(0.5)
        assert specs and specs["default"] == "python3", specs
        lab = requests.get(f"http://127.0.0.1:{port}/lab?token={token}")
        assert lab.status_code == 200 and "JupyterLab" in lab.text
    finally:
        if server.poll() is None:
            os.killpg(server.pid, 15)
        server.wait(timeout=30)
    assert env == {"LAB_PASS": "prepare"}
    imports = subprocess.run(
        [str(review_venv), "-c", "import servelab.passes, sys; print(sys.prefix)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert imports.stdout.strip() == str(review_venv.parent.parent), imports.stderr


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
