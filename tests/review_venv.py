"""The prepare and review passes as a student without the node runs them: a fresh virtual
environment with requirements/review.txt only, plus Jupyter's own kernel and runner (ipykernel,
nbclient), and the solved notebooks executed there headless (issue 41).

    python = build(folder)                       # once per session (about a minute)
    out = run(python, "04_fastapi_benchmarks", tmp_path, {"LAB_PASS": "review", ...})
    same_as_measured(measured_notebook, measured_results, reviewed_notebook, reviewed_results)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd

from labstack import editions, lab
from servelab.paths import REPO_ROOT

# what a pass prints when it decides: a decision judged on the student's rows, a claim's verdict
DECIDED = re.compile(
    r"^(\S+: .*(?:as your rows say|within what your rows allow).*|\[[A-Z ]+\] .*)$"
)


def build(folder: Path) -> Path:
    """A new venv in `folder` with requirements/review.txt, ipykernel and nbclient (pinned by
    requirements/constraints.txt); returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
    python = folder / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", "requirements/review.txt"]
        + ["-c", "requirements/constraints.txt", "ipykernel", "nbclient"],
        cwd=REPO_ROOT,
        check=True,
        timeout=900,
        capture_output=True,
    )
    return python


def lacks(python: Path, module: str) -> bool:
    found = f"import importlib.util as u; print(u.find_spec({module!r}) is None)"
    done = subprocess.run([str(python), "-c", found], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() == "True"


def run(python: Path, name: str, folder: Path, env: dict, edition: str = "solved") -> tuple:
    """Notebook `name` (its solved or student edition) executed headless by `python`'s own kernel
    in notebooks/, with only `env` (and PATH, HOME) set; (exit code, the executed notebook)."""
    source = (
        editions.solved_notebook(name, folder / "solved")
        if edition == "solved"
        else editions.STUDENT / f"{name}.ipynb"
    )
    out = folder / f"{name}_{edition}_{env.get('LAB_PASS', 'measure')}.ipynb"
    clean = {
        "PATH": os.environ["PATH"],
        "HOME": str(folder / "home"),  # no kernel of this user's but the venv's own
        "PYTHONPATH": str(REPO_ROOT),
        "LAB_PREDICTIONS": json.dumps(lab.SCRIPTED_PREDICTIONS),
        "LAB_STRICT_CLAIMS": "facts",
        **env,
    }
    done = subprocess.run(
        [str(python), "-m", "labstack.notebook_runner", str(source), str(out)]
        + ["--cwd", str(editions.STUDENT)],
        env=clean,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done.returncode, nbformat.read(out, as_version=4), done.stdout + done.stderr


def printed(nb) -> list[str]:
    """Every line the notebook's cells printed."""
    return [
        line
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.output_type == "stream"
        for line in o.text.splitlines()
    ]


def errors(nb) -> list[tuple[int, dict]]:
    return [
        (i, o)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "error"
    ]


def decided(nb) -> list[str]:
    """The verdicts and decisions a run printed, in order."""
    return [line for line in printed(nb) if DECIDED.match(line)]


def same_claims(measured_csv: Path, reviewed_csv: Path) -> pd.DataFrame:
    """Every claim the measure pass judged, judged the same in review (the review's notes say
    where a claim only the node could judge comes from); returns them."""
    key = ["claim", "verdict", "value", "interval", "rule"]
    measured = pd.read_csv(measured_csv, keep_default_na=False)[key]
    reviewed = pd.read_csv(reviewed_csv, keep_default_na=False)[key]
    pd.testing.assert_frame_equal(
        measured.sort_values("claim").reset_index(drop=True),
        reviewed.sort_values("claim").reset_index(drop=True),
    )
    return measured
