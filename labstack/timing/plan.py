"""The rule-based lease plan: each notebook's steps (steps.py) at the rules' minutes (rules.py),
plus the machine minutes measured on the GPU reference (machine.py), per pass.

Reading done in the lease (notebook 2's, read while the node boots, as notebook 0 says) costs
the lease only what the boot does not cover. Two measure figures: the node as notebook 2 leaves
it (a fresh image: every download and build in the lease), and on the class's prepared image
(docs/instructors.md, "Images that are already there").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from labstack.timing import rules
from labstack.timing.machine import Machine, machine
from labstack.timing.notebook import cells
from labstack.timing.steps import Step, find
from servelab.passes.choice import MEASURE, PASSES

NOTEBOOKS = (
    "02_provision",
    "03_fastapi_setup",
    "04_fastapi_benchmarks",
    "05_triton_setup",
    "06_triton_benchmarks",
)
GOALS = {"prepare": 75, "measure": 120, "review": 75}  # minutes, notebooks 2-6, median student
LEASE = 180
CATEGORY = {  # what each kind of step is, in the plan's table
    "read": "reading",
    "read code": "reading",
    "skim": "reading",
    **{
        k: "writing"
        for k in (
            "perf_line",
            "curl_line",
            "config_fragment",
            "result",
            "function",
            "other exercise",
            "prediction",
            "question",
            "try it",
        )
    },
    **{k: "answers and decisions" for k in ("answer", "decision", "hand-in", "observation")},
    **{k: "running cells" for k in ("run cell", "run cell offline", "open notebook", "output")},
    "wait": "waits",
    "machine": "machine (measured)",
}
CATEGORIES = (
    "reading",
    "writing",
    "answers and decisions",
    "browser, SSH, editor, terminal",
    "running cells",
    "waits",
    "machine (measured)",
)


def minutes(step: Step) -> float:
    """A step's minutes by the rules."""
    if step.kind == "read":
        return step.amount / rules.READING_WPM
    if step.kind == "read code":
        return step.amount / rules.CODE_LINES_PER_MIN
    if step.kind == "skim":
        return step.amount / rules.SKIM_WPM
    if step.kind == "wait":
        return step.amount
    if step.kind == "machine":
        return step.amount / 60
    base, per = rules.MINUTES[step.kind]
    return base + per * step.amount


def category(step: Step) -> str:
    return CATEGORY.get(step.kind, "browser, SSH, editor, terminal")


@dataclass
class Notebook:
    name: str
    steps: list[Step]
    machine: Machine
    by: dict = field(default_factory=dict)  # (pass, category) -> minutes

    def total(self, pass_: str) -> float:
        return sum(m for (p, _), m in self.by.items() if p == pass_)


def machine_steps(name: str, all_cells, found: Machine) -> list[Step]:
    """The measured machine time, one step per cell that runs, by its runs."""
    from labstack.timing.machine import runs_by_cell

    by_cell = {c.index: c for c in all_cells}
    return [
        Step(name, i, by_cell[i].section, MEASURE, "machine", runs * found.per_run, "runs")
        for i, runs in runs_by_cell(all_cells).items()
        if runs
    ]


def notebook(name: str, prepared_image: bool = False) -> Notebook:
    all_cells = cells(name)
    found = machine(name, all_cells)
    steps = find(all_cells, prepared_image) + machine_steps(name, all_cells, found)
    by: dict = defaultdict(float)
    for step in steps:
        by[(step.pass_, category(step))] += minutes(step)
    # reading in the lease happens during the lease's waits of the same notebook (free hands)
    read_in_lease = sum(
        minutes(s) for s in steps if s.pass_ == MEASURE and s.kind in ("read", "read code")
    )
    overlap = min(read_in_lease, by[(MEASURE, "waits")])
    by[(MEASURE, "reading")] -= overlap
    return Notebook(name, steps, found, dict(by))


def plan(prepared_image: bool = False) -> list[Notebook]:
    return [notebook(name, prepared_image) for name in NOTEBOOKS]


def totals(notebooks: list[Notebook]) -> dict[str, float]:
    return {p: sum(nb.total(p) for nb in notebooks) for p in PASSES}
