"""Write notebooks/NN_*.ipynb from their jupytext sources NN_*.py, reproducibly (`make notebooks`).

Cell ids are derived from the cell's position, not random, so regenerating an unchanged notebook
changes nothing and a real change shows as a small diff.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat

from servelab.paths import REPO_ROOT


def render(source: Path) -> nbformat.NotebookNode:
    nb = jupytext.read(source)
    nb.metadata.pop("jupytext", None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        cell.metadata.pop("lines_to_next_cell", None)
    return nb


def sync(folder: Path = REPO_ROOT / "notebooks") -> list[Path]:
    written = []
    for source in sorted(folder.glob("[0-9][0-9]_*.py")):
        target = source.with_suffix(".ipynb")
        text = nbformat.writes(render(source)) + "\n"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            written.append(target)
    return written


if __name__ == "__main__":
    changed = sync()
    print("\n".join(f"wrote {p.relative_to(REPO_ROOT)}" for p in changed) or "notebooks up to date")
    sys.exit(0)
