"""The student library by its readers: one idea per file, files grouped by idea.

- servelab's top level stays short (at most 25 entries): what belongs together is one package,
  named after its idea (perf/, exercises/, triton/, ...), not a size cap's halves side by side.
- Each package says what it offers: its __init__.py defines nothing (it hands names on) and its
  docstring names every file in it, so a reader who opens the package finds each room.
- Every module opens with the sentence that says its one idea. A file may be as long as its
  one idea needs; a function stays short enough to read at once (40 lines), and each code cell
  of a notebook's student edition at most 15 lines (a cell does one thing).

How a cell's lines are counted: the lines a student reads, blank ones left out, with an import
statement counting as one line however `ruff format` wraps its names (a list of names, not a
step), and a `%%` cell marker line left out. The student edition is what is measured: a solution
region is the student's and shows as `...` there.

Any exception is listed below with its reason; keep the list short.
"""

import ast

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from labstack import editions
from servelab.paths import REPO_ROOT

SERVELAB = REPO_ROOT / "servelab"
TOP_LEVEL_ENTRIES, FUNCTION_LINES, CELL_LINES = 25, 40, 15
# servelab/serving/ runs inside the services (another reader): its files are not the student's
MODULES = sorted(
    p for p in SERVELAB.rglob("*.py") if "serving" not in p.relative_to(SERVELAB).parts
)
PACKAGES = sorted(p.parent for p in SERVELAB.glob("*/__init__.py") if p.parent.name != "serving")
# what may exceed the budget, and why: "servelab/<path>.py:<function>" for a function's lines,
# "<notebook>[<cell>]" for a cell's
EXCEPTIONS: dict[str, str] = {}


def test_the_top_level_is_short():
    entries = [
        p.name for p in SERVELAB.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()
    ]
    assert len(entries) <= TOP_LEVEL_ENTRIES, sorted(entries)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_each_package_says_what_it_offers(package):
    init = package / "__init__.py"
    tree = ast.parse(init.read_text())
    defined = [
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    ]
    assert not defined, f"{init} defines {defined}: it only hands names on"
    doc = ast.get_docstring(tree) or ""
    files = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    unnamed = [name for name in files if name not in doc]
    assert not unnamed, f"{init}'s docstring does not name {unnamed}"


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(SERVELAB)))
def test_each_module_opens_with_its_idea(module):
    doc = ast.get_docstring(ast.parse(module.read_text()))
    assert doc, f"{module.relative_to(REPO_ROOT)} has no docstring saying what it is"
    first = doc.split("\n\n")[0]
    assert first.rstrip().endswith((".", ":", ")")), first


def _function_lengths(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield node.name, node.end_lineno - start + 1


def _over_budget() -> list[str]:
    over = []
    for path in MODULES:
        name = str(path.relative_to(REPO_ROOT))
        for function, length in _function_lengths(path):
            if length > FUNCTION_LINES:
                over.append(f"{name}:{function}: {length} lines (budget {FUNCTION_LINES})")
    return over


def read_lines(source: str) -> int:
    """The lines of a cell a student reads: not blank, an import statement counted once."""
    lines = source.splitlines()
    if lines and lines[0].startswith("%%"):  # a cell marker (%%runs_in ...), not a step
        lines = [""] + lines[1:]
        source = "\n".join(lines)
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


def test_each_function_is_short_enough_to_read_at_once():
    over = _not_excepted(_over_budget())
    assert not over, "functions over the budget (split them, or list one with its reason):\n" + (
        "\n".join(over)
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
