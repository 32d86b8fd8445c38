"""Machine minutes measured on the GPU reference: a notebook's cells' seconds on its reference
page, carried over to the notebook as it is now by the runs it makes.

The page (maintainers/reference/run_reference.py) records every cell's seconds at the class's
settings (`<notebook>_cell_times.json`) and keeps one file per run (`perf_*.csv`, `requests_*.csv`).
The notebook changes after the page ran (a run added or removed), so its machine time is the page's
total scaled by its runs now over the page's runs: the time per run is what the page measured.
A run is a top-level call of the notebook's run helpers in a cell of the lease; a call in a loop
over a literal (or a slice of a list made from one) counts once per item; a run under
`if N_GPUS >= 2` counts, as the class's node has two GPUs.

The page of a notebook is the first of PAGES that has its cell times: docs/results/<setup>/
<notebook>/, one current page per notebook and setup (docs/results/README.md); a notebook whose
current version ran on another setup (CURRENT) takes that page first. Notebook 7's loops
run as many times as settings made in other cells say: its page's seconds count as measured.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

from maintainers.timing.notebook import Cell
from servelab.passes.choice import MEASURE
from servelab.paths import REPO_ROOT

RESULTS = REPO_ROOT / "docs" / "results"
PAGES = ("h100/{notebook}",)  # the class's 5 s windows
# notebook 7 as it is now ran on one H200 (2026-11-28, 3 s windows like the H100's page, which ran
# its version of 2026-11-24)
CURRENT = {"07_how_close_to_the_hardware": "h200/{notebook}"}
CLASS_WINDOW_MS = "5000"  # the class's windows (servelab.perf.command.measurement_settings)
RUNNERS = {"measure", "watched", "onnx_run", "run_line"}  # the notebooks' run helpers
PART = {
    "04_fastapi_benchmarks": "fastapi",
    "06_triton_benchmarks": "triton",
    "07_how_close_to_the_hardware": "hardware",
}
RUN_FILES = {
    "04_fastapi_benchmarks": "requests_*.csv",
    "06_triton_benchmarks": "perf_*.csv",
    "07_how_close_to_the_hardware": "results/hardware/perf_*.csv",
}
# notebooks whose runs the source cannot count (loops over settings made in other cells): their
# page's seconds as measured, not scaled, shared among the runs the source shows
AS_MEASURED = {"07_how_close_to_the_hardware": "its rounds, sweep and repeats loop over settings"}


@dataclass(frozen=True)
class Machine:
    notebook: str
    seconds: float  # for the notebook as it is now
    page_seconds: float  # what the page measured
    runs_now: int
    runs_page: int
    page: Path | None
    note: str
    output_words: int = 0  # what the page's run printed (its log), progress bars left out

    @property
    def per_run(self) -> float:
        return self.page_seconds / self.runs_page if self.runs_page else 0.0

    @property
    def words_per_run(self) -> float:
        return self.output_words / self.runs_page if self.runs_page else 0.0


def printed_words(log: Path) -> int:
    """Words a run printed, from its log: the lines a student sees, progress bars left out."""
    if not log.is_file():
        return 0
    lines = [line for line in log.read_text().splitlines() if "it/s]" not in line]
    return sum(len(line.split()) for line in lines)


def page_of(notebook: str, results: Path = RESULTS) -> Path | None:
    for pattern in ([CURRENT[notebook]] if notebook in CURRENT else []) + list(PAGES):
        page = results / pattern.format(notebook=notebook)
        if (page / f"{notebook}_cell_times.json").is_file():
            return page
    return None


def _length(node: ast.AST, assigned: dict[str, ast.AST]) -> int | None:
    """How many items a loop goes over, when the source says it."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return len(node.elts)
    if isinstance(node, ast.ListComp) and len(node.generators) == 1:
        return _length(node.generators[0].iter, assigned)
    if isinstance(node, ast.Name) and node.id in assigned:
        return _length(assigned[node.id], assigned)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        whole = _length(node.value, assigned)
        bounds = [node.slice.lower, node.slice.upper]
        if whole is None or not all(b is None or isinstance(b, ast.Constant) for b in bounds):
            return None
        return len(range(whole)[slice(*(b.value if b else None for b in bounds))])
    return None


def runs_in(code: str, assigned: dict[str, ast.AST]) -> int:
    """The runs one cell makes: its top-level calls of RUNNERS, loops multiplied out."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return 0

    def count(nodes, times: int) -> int:
        total = 0
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                if isinstance(node.targets[0], ast.Name):
                    assigned[node.targets[0].id] = node.value
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.For):
                total += count(node.body, times * (_length(node.iter, assigned) or 1))
                continue
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
            names = [getattr(c.func, "id", getattr(c.func, "attr", "")) for c in calls]
            total += times * sum(name in RUNNERS for name in names)
        return total

    return count(tree.body, 1)


def runs_by_cell(cells: list[Cell]) -> dict[int, int]:
    """{cell index: runs} over the lease's code cells of the class path."""
    assigned: dict[str, ast.AST] = {}
    code = [c for c in cells if c.kind == "code" and c.class_path and MEASURE in c.passes]
    return {c.index: runs_in(c.code.replace("await ", ""), assigned) for c in code}


def machine(notebook: str, cells: list[Cell], results: Path = RESULTS) -> Machine:
    page = page_of(notebook, results)
    runs_now = sum(runs_by_cell(cells).values())
    if page is None or notebook not in PART:
        note = "no measurement cells" if notebook not in PART else "not measured: no page"
        return Machine(notebook, 0.0, 0.0, runs_now, 0, page, note)
    times = json.loads((page / f"{notebook}_cell_times.json").read_text())
    seconds = sum(c["seconds"] for c in times)
    runs_page = len(list(page.rglob(RUN_FILES[notebook])))
    settings = (
        json.loads((page / "runs.json").read_text()).get(PART[notebook], {}).get("settings", {})
    )
    window = settings.get("LAB_PERF_INTERVAL_MS", CLASS_WINDOW_MS)
    where = page.relative_to(REPO_ROOT) if page.is_relative_to(REPO_ROOT) else page
    note = f"measured: {where}, {seconds:.0f} s of cells, {runs_page} runs"
    if window != CLASS_WINDOW_MS:
        note += f", at {window} ms windows, NOT the class's {CLASS_WINDOW_MS}"
    if notebook in AS_MEASURED:
        note += f"; as measured ({AS_MEASURED[notebook]})"
        return Machine(notebook, seconds, seconds, runs_now, max(runs_now, 1), page, note, 0)
    scaled = seconds * runs_now / runs_page if runs_page else seconds
    if runs_page and runs_now != runs_page:
        note += f"; the notebook now makes {runs_now} runs: {scaled:.0f} s at its time per run"
    words = printed_words(page / f"{notebook}.log")
    return Machine(notebook, scaled, seconds, runs_now, runs_page, page, note, words)
