"""The notebooks' two editions, made from one source each.

    notebook_sources/NN_*.py   the source (jupytext): each answer a student writes sits in an
                               nbgrader solution region (### BEGIN SOLUTION / ### END SOLUTION),
                               a check that should not show in ### BEGIN / END HIDDEN TESTS
    notebooks/NN_*.ipynb       the student edition (committed; what Trovi publishes and a student
                               opens): nbgrader's own ClearSolutions and ClearHiddenTests leave
                               `...` where each answer was and drop the hidden checks
    solutions/NN_*.ipynb       the solved edition (git-ignored, for instructors): the source as it
                               is, markers included; what `make lab`, `make test` and
                               `make test-docker` execute, with notebooks/ as the working folder

    python -m labstack.editions student    # `make notebooks`
    python -m labstack.editions solved     # `make solutions`

Cell ids come from the cell's position, not chance, so regenerating an unchanged notebook changes
nothing and a real change shows as a small diff.
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys
from pathlib import Path

import jupytext
import nbformat

from servelab.paths import NOTEBOOKS, REPO_ROOT

SOURCES = REPO_ROOT / "notebook_sources"
STUDENT = NOTEBOOKS  # the folder students open; lab_settings.py lives there too
SOLVED = REPO_ROOT / "solutions"
# what the student edition shows in place of an answer: Python's `...`, which
# servelab.exercises recognises as "not written yet"
BLANK = "..."


def sources() -> list[Path]:
    return sorted(SOURCES.glob("[0-9][0-9]_*.py"))


def source_of(name: str) -> Path:
    """notebook_sources/<name>.py for a name such as 04_fastapi_benchmarks (or its .ipynb)."""
    return SOURCES / f"{Path(name).stem}.py"


def solved(source: Path) -> nbformat.NotebookNode:
    """The solved edition: the source as a notebook, solution markers included (a copy of its
    own: the caller may change it)."""
    return copy.deepcopy(_solved(str(source), Path(source).read_text(encoding="utf-8")))


@functools.lru_cache(maxsize=32)
def _solved(source: str, text: str) -> nbformat.NotebookNode:
    """Read once per text: jupytext checks every cell against nbformat's schema as it reads (about
    a second of CPU per notebook), and the tests and the editions read each source many times."""
    nb = jupytext.reads(text, fmt={"extension": Path(source).suffix})
    nb.metadata.pop("jupytext", None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        cell.metadata.pop("lines_to_next_cell", None)
    return nb


def student(source: Path) -> nbformat.NotebookNode:
    """The student edition: nbgrader's ClearSolutions and ClearHiddenTests over the solved one.

    The cells carry no nbgrader metadata (the lab is not graded by nbgrader), so the
    preprocessors are told not to require it (enforce_metadata=False).
    """
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions  # slow import: here

    nb = solved(source)
    resources: dict = {}
    clear = ClearSolutions(code_stub={"python": BLANK}, enforce_metadata=False)
    nb, resources = clear.preprocess(nb, resources)
    nb, resources = ClearHiddenTests(enforce_metadata=False).preprocess(nb, resources)
    return nb


def text(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def _write(path: Path, content: str) -> bool:
    if path.exists() and path.read_text() == content:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return True


def write_student(folder: Path = STUDENT) -> list[Path]:
    """notebooks/NN_*.ipynb from every source; returns the files that changed."""
    return [
        folder / f"{s.stem}.ipynb"
        for s in sources()
        if _write(folder / f"{s.stem}.ipynb", text(student(s)))
    ]


def write_solved(folder: Path = SOLVED) -> list[Path]:
    """solutions/NN_*.ipynb from every source; returns the files that changed."""
    return [
        folder / f"{s.stem}.ipynb"
        for s in sources()
        if _write(folder / f"{s.stem}.ipynb", text(solved(s)))
    ]


def solved_notebook(name: str, folder: Path = SOLVED) -> Path:
    """The solved edition of one notebook (04_fastapi_benchmarks), written when missing or older
    than its source: what the runners execute, so a run never takes a stale one."""
    path = folder / f"{Path(name).stem}.ipynb"
    _write(path, text(solved(source_of(name))))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("edition", choices=["student", "solved"])
    args = parser.parse_args(argv)
    changed = write_student() if args.edition == "student" else write_solved()
    print(
        "\n".join(f"wrote {p.relative_to(REPO_ROOT)}" for p in changed)
        or f"{args.edition} edition up to date"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
