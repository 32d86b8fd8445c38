"""Markers, the figures' registry, and the rewriting of every text that quotes a figure."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from servelab.paths import REPO_ROOT

# In prose (Markdown, a notebook's markdown cells): <!--fig NAME-->the figure<!--/fig-->, on one
# line; both comments are hidden where the text is rendered. In a notebook's code, a string
# literal alone on its line: "the figure"  # fig NAME
PROSE = re.compile(r"<!--fig ([\w.+-]+)-->([^\n]*?)<!--/fig-->")
CODE = re.compile(r'^(\s*)"([^"\n]*)"(\s*# fig ([\w.+-]+))$', re.M)
OPENED = re.compile(r"<!--fig ([\w.+-]+)-->(?![^\n]*?<!--/fig-->)")

FIGURES: dict[str, Callable[[], str]] = {}


def figure(name: str):
    """Register a function as the figure NAME: it returns the text, computed from a page."""

    def register(compute: Callable[[], str]) -> Callable[[], str]:
        if name in FIGURES:
            raise ValueError(f"two figures named {name!r}")
        FIGURES[name] = compute
        return compute

    return register


def texts(root: Path = REPO_ROOT) -> list[Path]:
    """Every text that may quote a figure: the Markdown pages (the GPU reference's README, the
    maintainers' plan of device runs, too) and the notebooks' sources."""
    found = [root / "README.md", root / "maintainers" / "reference" / "README.md"]
    found += sorted((root / "docs").rglob("*.md"))
    found += sorted((root / "notebook_sources").glob("*.py"))
    return [p for p in found if p.is_file()]


def render(text: str, where: str = "text") -> tuple[str, set[str]]:
    """(the text with every marked figure computed afresh, the names it quotes)."""
    used: set[str] = set()

    def value(name: str) -> str:
        if name not in FIGURES:
            raise KeyError(f"{where}: no figure named {name!r} (maintainers/figures/)")
        used.add(name)
        return FIGURES[name]()

    if OPENED.search(text):
        name = OPENED.search(text)[1]
        raise ValueError(f"{where}: figure {name!r} has no <!--/fig--> on the same line")
    text = PROSE.sub(lambda m: f"<!--fig {m[1]}-->{value(m[1])}<!--/fig-->", text)
    text = CODE.sub(lambda m: f'{m[1]}"{value(m[4])}"{m[3]}', text)
    return text, used


def stale(root: Path = REPO_ROOT) -> dict[Path, str]:
    """Each text whose figures are not those of the current pages, with its fresh version."""
    fresh = {}
    for path in texts(root):
        text = path.read_text()
        new, _ = render(text, str(path.relative_to(root)))
        if new != text:
            fresh[path] = new
    return fresh


def unused(root: Path = REPO_ROOT) -> list[str]:
    """Registered figures that no text quotes (a text lost its marker, or a figure is dead)."""
    used: set[str] = set()
    for path in texts(root):
        used |= render(path.read_text(), str(path))[1]
    return sorted(set(FIGURES) - used)
