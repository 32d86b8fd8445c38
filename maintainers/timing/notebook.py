"""A notebook's source as a student meets it: its cells in order, each with its section, the
passes it runs in, and what in it is read, written or run.

A cell runs in the passes its first line names (`%%runs_in measure review`,
servelab/passes/cells.py), else in every pass; a notebook without the passes (notebook 2, run in
Chameleon's Jupyter during the lease) runs in the lease only. A `## ` heading that says
"(optional" starts an optional section (going further, the open exercises), one that says
"Local mode" a section the class's Docker route skips; either lasts up to the next `## `.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

import jupytext

from servelab.passes.cells import MARKER
from servelab.passes.choice import MEASURE, PASSES
from servelab.paths import REPO_ROOT

SOURCES = REPO_ROOT / "notebook_sources"
SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION\n?", re.M | re.S)
HIDDEN_TESTS = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS\n?", re.M | re.S)
WORD = re.compile(r"[A-Za-z0-9][\w'.-]*")
# notebook 0's note saying which code of the notebooks with passes (3 to 6) to read
NOTEBOOK_0, READING_NOTE = "00_how_to_use_this_lab", "What to read in the code"
WORTH_READING = "# Worth reading"  # a code cell that note asks the student to read


@dataclass(frozen=True)
class Cell:
    notebook: str
    index: int  # position in the notebook
    kind: str  # "markdown" or "code"
    source: str  # as the notebook shows it (a code cell's `%%runs_in` line included)
    section: str  # the `## ` heading it sits under ("" before the first)
    passes: tuple[str, ...]  # the passes that run it (a markdown cell: those that show it)
    hidden: bool  # a folded cell (its source hidden: the verdict's plumbing)
    says_what_to_read: bool = False  # notebook 0's note "What to read in the code" covers it

    @property
    def optional(self) -> bool:
        return "(optional" in self.section

    @property
    def class_path(self) -> bool:
        """On the path a class runs: the core, on Chameleon's Docker route."""
        return not self.optional and "Local mode" not in self.section

    @cached_property
    def code(self) -> str:
        """A code cell's code without its pass line."""
        lines = self.source.splitlines()
        if lines and lines[0].startswith(MARKER):
            lines = lines[1:]
        return "\n".join(lines) + "\n"

    @cached_property
    def solutions(self) -> list[str]:
        """What the student writes here: each solution region's text."""
        return [m.group(1) for m in SOLUTION.finditer(self.source)] if self.kind == "code" else []

    def words(self) -> int:
        return len(WORD.findall(self.source)) if self.kind == "markdown" else 0

    @property
    def worth_reading(self) -> bool:
        """Is this code worth reading, as notebook 0 says under "What to read in the code"?
        The cells the student writes in, the Setup section's (where each name used later comes
        from), each `def`, and a cell marked `# Worth reading`; the others call the lab's
        helpers to run, tabulate or plot: run, and what they print read (run cell). In a
        notebook without that note, every cell."""
        return bool(
            not self.says_what_to_read
            or self.solutions
            or self.section == "Setup"
            or re.search(r"^\s*(async\s+)?def ", self.code, re.M)
            or WORTH_READING in self.code
        )

    def read_lines(self) -> list[str]:
        """The code lines a student reads: a cell worth reading's, not a folded cell's, not what
        they write themselves (a solution region), not a check hidden from them; blank lines
        left out."""
        if self.kind != "code" or self.hidden or not self.worth_reading:
            return []
        shown = HIDDEN_TESTS.sub("", SOLUTION.sub("", self.code))
        return [line for line in shown.splitlines() if line.strip()]


def cells(notebook: str) -> list[Cell]:
    """The cells of notebook_sources/<notebook>.py, in order; a markdown cell with `## ` headings
    inside is cut at each, so every part has its own section."""
    source = SOURCES / f"{notebook}.py"
    return list(_cells(notebook, source.read_text()))


@lru_cache(maxsize=64)
def _cells(notebook: str, text: str) -> tuple[Cell, ...]:
    nb = jupytext.reads(text, fmt="py:percent")
    with_passes = any("passes.start(" in c.source for c in nb.cells if c.cell_type == "code")
    note = SOURCES / f"{NOTEBOOK_0}.py"
    says = with_passes and note.is_file() and READING_NOTE in note.read_text()
    out, section = [], ""
    for i, c in enumerate(nb.cells):
        first = c.source.splitlines()[0] if c.source else ""
        named = tuple(first[len(MARKER) :].split()) if first.startswith(MARKER) else PASSES
        hidden = bool(c.metadata.get("jupyter", {}).get("source_hidden"))
        parts = [c.source]
        if c.cell_type == "markdown":
            parts = [p for p in re.split(r"^(?=## )", c.source, flags=re.M) if p.strip()]
        for part in parts:
            heading = re.match(r"## (.*)", part) if c.cell_type == "markdown" else None
            section = heading.group(1).strip() if heading else section
            passes = named if with_passes else (MEASURE,)
            out.append(Cell(notebook, i, c.cell_type, part, section, passes, hidden, says))
    return tuple(out)
