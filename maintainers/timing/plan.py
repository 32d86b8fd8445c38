"""The rule-based lease plan: each notebook's steps (steps.py) at the rules' minutes (rules.py),
plus the machine minutes measured on the GPU reference (machine.py), per pass.

Reading done in the lease (notebook 2's, read while the node boots, as notebook 0 says) costs
the lease only what the boot does not cover. The image build notebook 2 starts in the background
costs the lease only what is left of it where a notebook waits for it (background.py, one rule
for both estimates). Two measure figures: the node as notebook 2 leaves it (a fresh image: every
download and build in the lease), and on the class's prepared image (docs/instructors.md, "Images
that are already there").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from maintainers.timing import background, rules
from maintainers.timing.machine import Machine, machine
from maintainers.timing.notebook import cells
from maintainers.timing.steps import Step, find
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
    "background": "waits",
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
    """A step's minutes by the rules (a wait's: its work alone; background.py says what the
    lease pays for it)."""
    if step.kind == "background":
        return 0.0
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
    costs: list[float] = field(default_factory=list)  # what each step cost, the background's too

    def total(self, pass_: str) -> float:
        return sum(m for (p, _), m in self.by.items() if p == pass_)


def machine_steps(name: str, all_cells, found: Machine) -> list[Step]:
    """The measured machine time, one step per cell that runs, by its runs."""
    from maintainers.timing.machine import runs_by_cell

    by_cell = {c.index: c for c in all_cells}
    return [
        Step(name, i, by_cell[i].section, MEASURE, "machine", runs * found.per_run, "runs")
        for i, runs in runs_by_cell(all_cells).items()
        if runs
    ]


def found(name: str, prepared_image: bool = False) -> tuple[list[Step], Machine]:
    """A notebook's steps and its measured machine time."""
    all_cells = cells(name)
    measured = machine(name, all_cells)
    return find(all_cells, prepared_image) + machine_steps(name, all_cells, measured), measured


def tally(steps: list[Step], costs: list[float]) -> dict:
    """Minutes by (pass, category); reading in the lease happens during the lease's waits of the
    same notebook (free hands)."""
    by: dict = defaultdict(float)
    for step, cost in zip(steps, costs):
        by[(step.pass_, category(step))] += cost
    read_in_lease = sum(
        c for s, c in zip(steps, costs) if s.pass_ == MEASURE and s.kind in ("read", "read code")
    )
    by[(MEASURE, "reading")] -= min(read_in_lease, by[(MEASURE, "waits")])
    return dict(by)


def timed(names, prepared_image: bool = False) -> tuple[list[Notebook], background.Timeline]:
    """The notebooks, in this order, by the rules, the background build beside the lease."""
    each = {name: found(name, prepared_image) for name in names}
    steps = [s for name in names for s in each[name][0]]
    timeline = background.lease(steps, minutes, list(names))
    out, at = [], 0
    for name in names:
        mine, measured = each[name]
        costs = timeline.costs[at : at + len(mine)]
        at += len(mine)
        out.append(Notebook(name, mine, measured, tally(mine, costs), costs))
    return out, timeline


def notebook(name: str, prepared_image: bool = False) -> Notebook:
    """One notebook on its own (a background build is counted only from a start it has)."""
    return timed([name], prepared_image)[0][0]


def plan(prepared_image: bool = False) -> list[Notebook]:
    return timed(NOTEBOOKS, prepared_image)[0]


def totals(notebooks: list[Notebook]) -> dict[str, float]:
    return {p: sum(nb.total(p) for nb in notebooks) for p in PASSES}
