"""The house has no import circle, counting imports inside functions (issue 56): the table of
steps (servelab/exercises/steps.py) sits on top of the checks, which never import it; the
import-linter contract of pyproject.toml says so for servelab.exercises, and this test for every
package of the lab."""

from __future__ import annotations

import sys

import grimp
import pytest

PACKAGES = ("servelab", "labstack")


def circles(graph) -> list[list[str]]:
    """The import graph's strongly connected parts of more than one module (Tarjan's)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            part = []
            while True:
                other = stack.pop()
                on.discard(other)
                part.append(other)
                if other == module:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_a_circle_held_by_an_import_inside_a_function_is_found(tmp_path, monkeypatch):
    package = tmp_path / "knot"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "table.py").write_text("from knot import check\n")
    (package / "check.py").write_text("def look():\n    from knot import table\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert circles(grimp.build_graph("knot")) == [["knot.check", "knot.table"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package):
    assert circles(grimp.build_graph(package)) == []


def test_the_checks_never_import_the_table():
    graph = grimp.build_graph("servelab")
    above = {"servelab.exercises.steps", "servelab.exercises.judgement"}
    for module in graph.find_descendants("servelab.exercises"):
        if module in above or module == "servelab.exercises.answer_key":
            continue
        assert not above & graph.find_upstream_modules(module, as_package=False), module
