"""The lease plan: how many minutes notebooks 2-6 take a median student in each pass (prepare
before the lease, measure in it, review after it), counted from the notebooks' own sources and
checked by a second, independent estimate (`make timing`; docs/timing_plan.md).

    python -m maintainers.timing           # make timing: fills docs/timing_plan.md and the figures
                                        # quoted in notebook 0, docs/instructors.md and
                                        # docs/class_edition/README.md
    python -m maintainers.timing --check   # exit 1 if any of them no longer matches the notebooks

    notebook.py     a notebook's source as a student meets it: cells, sections, passes
    steps.py        what the student does in it, step by step, and in which pass
    rules.py        the plan's minutes per step, and each wait with its source
    machine.py      machine minutes measured on the GPU reference, carried over by runs
    background.py   the image build notebook 2 starts in the background, on the lease's clock:
                    what is left of it at each wait (one rule for both estimates)
    plan.py         the rule-based plan: steps at the rules' minutes, per pass
    walkthrough.py  the second estimate: the same steps timed cell by cell by other means
    pages.py        the tables and quoted figures, filled between markers

The counting reads the notebooks as they are: no marker was added to them. A line, an edit, a
question or a run added to a notebook is counted when it lands (rerun `make timing`).
"""

from maintainers.timing.pages import render, stale, write
from maintainers.timing.plan import GOALS, NOTEBOOKS, totals
from maintainers.timing.steps import Step, find, questions
from maintainers.timing.walkthrough import estimate

__all__ = [
    "GOALS",
    "NOTEBOOKS",
    "Step",
    "estimate",
    "find",
    "questions",
    "render",
    "stale",
    "totals",
    "write",
]
