"""Your judgement: an explanation before the lab's verdict, and decisions made from your numbers.

Introduced in notebook 4.

    answer_45 = \"\"\" your explanation \"\"\"            # an answer cell
    with judgement.verdict_after(answer_45, "4.5"):    # the verdict cell after it
        claims.at_least(...)                           # printed once your answer is there

    real = judgement.decide("4.7", real, why_47, one_worker, two_workers)

A verdict cell always computes (later cells use what it finds) but shows its output only once the
answer cell above it holds text, so you write what you see before reading what the lab says.

A decision names a goal and you choose, with your reason beside the choice; the table of steps
(servelab/exercises/steps.py) hands it to its judge (servelab/exercises/judges.py), which judges
it on the rows you measured. In the measure pass a decision still blank waits for the review
pass, where your rows come back from the bundle (the notebook goes on meanwhile).
"""

from __future__ import annotations

import contextlib
import io

from servelab.exercises.answers import blank
from servelab.exercises.judges import fewest_near_best, number_in
from servelab.exercises.steps import decide

__all__ = ["decide", "fewest_near_best", "number_in", "verdict_after"]


@contextlib.contextmanager
def verdict_after(answer, step: str):
    """Run the verdict's code; show what it printed only if `answer` is written."""
    if not blank(answer):
        yield
        return
    with contextlib.redirect_stdout(io.StringIO()):
        yield
    print(
        f"{step}: the lab's verdict is ready. Write your answer in the cell above, then run this "
        "cell again to see it."
    )
