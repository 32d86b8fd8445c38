"""The student wing under a size budget (a module a student opens is short, a cell does one thing):
each servelab/*.py module outside serving/ at most 300 lines and each of its functions at most 40,
and each code cell of a notebook's student edition at most 15 lines. A failure names what breaks
it.

How a cell's lines are counted: the lines a student reads, blank ones left out, with an import
statement counting as one line however `ruff format` wraps its names (a list of names, not a
step). Plain data and plotting calls count as any other code: where they made a cell long, they
went into a cell of their own. The student edition is what is measured: a solution region is the
student's and shows as `...` there.

Any exception is listed below with its reason; keep the list short: split instead.
"""

import ast

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from labstack import editions
from servelab.paths import REPO_ROOT

MODULE_LINES, FUNCTION_LINES, CELL_LINES = 300, 40, 15
MODULES = sorted((REPO_ROOT / "servelab").glob("*.py"))
# what may exceed the budget, and why: "servelab/<module>.py" for a module's lines,
# "servelab/<module>.py:<function>" for a function's, "<notebook>[<cell>]" for a cell's
EXCEPTIONS: dict[str, str] = {}


def _function_lengths(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield node.name, node.end_lineno - start + 1


def _over_budget() -> list[str]:
    over = []
    for path in MODULES:
        name = f"servelab/{path.name}"
        lines = len(path.read_text().splitlines())
        if lines > MODULE_LINES:
            over.append(f"{name}: {lines} lines (budget {MODULE_LINES})")
        for function, length in _function_lengths(path):
            if length > FUNCTION_LINES:
                over.append(f"{name}:{function}: {length} lines (budget {FUNCTION_LINES})")
    return over


def read_lines(source: str) -> int:
    """The lines of a cell a student reads: not blank, an import statement counted once."""
    lines = source.splitlines()
    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return sum(1 for line in lines if line.strip())
    wrapped = {
        n
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for n in range(node.lineno + 1, node.end_lineno + 1)
    }
    return sum(1 for i, line in enumerate(lines, 1) if line.strip() and i not in wrapped)


def _long_cells() -> list[str]:
    over = []
    for path in sorted(editions.STUDENT.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            n = read_lines(cell.source) if cell.cell_type == "code" else 0
            if n > CELL_LINES:
                first = cell.source.strip().splitlines()[0][:60]
                over.append(f"{path.stem}[{i}]: {n} lines (budget {CELL_LINES}): {first}")
    return over


def _not_excepted(found: list[str]) -> list[str]:
    return [f for f in found if f.split(": ", 1)[0] not in EXCEPTIONS]


def test_each_student_module_and_function_keeps_the_budget():
    over = _not_excepted(_over_budget())
    assert not over, "over the size budget (split it, or list it with its reason):\n" + "\n".join(
        over
    )


def test_each_code_cell_a_student_reads_keeps_the_budget():
    over = _not_excepted(_long_cells())
    assert not over, "cells over the budget (move the logic into a module function):\n" + "\n".join(
        over
    )


def test_every_exception_is_still_needed():
    """An exception that no longer exceeds the budget leaves the list."""
    found = {f.split(": ", 1)[0] for f in _over_budget() + _long_cells()}
    assert not set(EXCEPTIONS) - found, f"no longer over budget: {set(EXCEPTIONS) - found}"


@pytest.mark.parametrize(
    "source, lines",
    [
        ("import os\n\nfrom servelab import (\n    claims,\n    perf,\n)\nx = 1\n", 3),
        ("x = 1\n# a comment is read\n\n!ls\n", 3),
    ],
)
def test_how_a_cells_lines_are_counted(source, lines):
    assert read_lines(source) == lines
