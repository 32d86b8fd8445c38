"""The prepare and review passes as a student without the node runs them: a fresh virtual
environment made as notebook 0 tells a student on a computer of their own (its ```bash block:
`python3 -m venv`, then `pip install -r requirements/review.txt jupyterlab`), and the notebooks
executed there headless by that environment's own kernel (issues 41 and 50).

    python = build(folder)                       # once per session (a few minutes)
    out = run(python, "04_fastapi_benchmarks", tmp_path, {"LAB_PASS": "review", ...})
    same_as_measured(measured_notebook, measured_results, reviewed_notebook, reviewed_results)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
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
VENV = ".venv-review"  # the folder notebook 0's commands make


def notebook_0_commands() -> list[str]:
    """The commands notebook 0 gives for a computer of one's own, as a student copies them."""
    source = editions.source_of("00_how_to_use_this_lab").read_text()
    block = re.search(r"^# ```bash\n(.*?)^# ```", source, flags=re.M | re.S)
    assert block, "notebook 0 has no ```bash block of commands"
    return [line.removeprefix("#").strip() for line in block.group(1).splitlines()]


def built_once(cache: Path) -> Path:
    """build() in cache/<digest>/, reused while what it is made from is the same: notebook 0's
    commands, requirements/review.txt and requirements/constraints.txt (make test's journey and
    passes tests share one venv, and so do runs of one clone, instead of making it again), and
    this clone's folder, which the venv installs the lab from (another clone's may be gone)."""
    made_from = (
        sys.version
        + str(REPO_ROOT)
        + "\n".join(notebook_0_commands())
        + "".join(
            (REPO_ROOT / "requirements" / name).read_text()
            for name in ("review.txt", "constraints.txt")
        )
    )
    folder = cache / hashlib.sha256(made_from.encode()).hexdigest()[:16]
    python, done = folder / "venv" / "bin" / "python", folder / "complete"
    if not done.exists():  # none yet, or one cut short: made anew
        shutil.rmtree(folder, ignore_errors=True)
        build(folder / "venv")
        done.touch()
    return python


def build(folder: Path) -> Path:
    """A new venv in `folder`, made by notebook 0's own commands run in the repository's folder
    (the venv's folder and this interpreter in place of `.venv-review` and `python3`); returns
    its python."""
    commands = notebook_0_commands()
    make = next(c for c in commands if " -m venv " in c)
    install = next(c for c in commands if "/pip install " in c)
    for command in (make, install):
        words = [
            sys.executable if w == "python3" else w.replace(VENV, str(folder))
            for w in shlex.split(command)
        ]
        subprocess.run(words, cwd=REPO_ROOT, check=True, timeout=1200, capture_output=True)
    return folder / "bin" / "python"


def lacks(python: Path, module: str) -> bool:
    found = f"import importlib.util as u; print(u.find_spec({module!r}) is None)"
    done = subprocess.run([str(python), "-c", found], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() == "True"


def run(
    python: Path,
    name: str,
    folder: Path,
    env: dict,
    edition: str = "solved",
    notebook: Path | None = None,
    root: Path = REPO_ROOT,
) -> tuple:
    """Notebook `name` (its solved or student edition, or the file `notebook`) executed headless
    by `python`'s own kernel in `root`'s notebooks/ (the lab's folder: its servelab imported),
    with only `env` (and PATH, HOME) set; (exit code, the executed notebook, what it printed)."""
    source = notebook or (
        editions.solved_notebook(name, folder / "solved")
        if edition == "solved"
        else editions.STUDENT / f"{name}.ipynb"
    )
    out = folder / f"{name}_{edition}_{env.get('LAB_PASS', 'measure')}.ipynb"
    clean = {
        "PATH": os.environ["PATH"],
        "HOME": str(folder / "home"),  # no kernel of this user's but the venv's own
        "PYTHONPATH": str(root),
        "LAB_PREDICTIONS": json.dumps(lab.SCRIPTED_PREDICTIONS),
        "LAB_STRICT_CLAIMS": "facts",
        **env,
    }
    done = subprocess.run(
        # the runner as a file: a class edition (root) has no labstack/notebook_runner.py
        [str(python), str(REPO_ROOT / "labstack" / "notebook_runner.py"), str(source), str(out)]
        + ["--cwd", str(root / "notebooks")],
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
