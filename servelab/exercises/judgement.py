"""Your judgement: an explanation before the lab's verdict, and decisions made from your numbers.

Introduced in notebook 4.

    answer_45 = \"\"\" your explanation \"\"\"            # an answer cell
    with judgement.verdict_after(answer_45, "4.5"):    # the verdict cell after it
        claims.at_least(...)                           # printed once your answer is there

    count = judgement.fewest_near_best(count, "6.3", "the instances to deploy", {1: m1, 2: m2})
    where = judgement.bottleneck(where, "6.4", busy_u=0.98, device_pct=77.0, device="GPU 0")
    rate = judgement.number_in(rate, "6.6", "the highest rate under the budget", 273, 455,
                               why="...")

A verdict cell always computes (later cells use what it finds) but shows its output only once the
answer cell above it holds text, so you write what you see before reading what the lab says. A
decision is checked against the rows you measured, not against a fixed answer: the same choice
can be right on one machine and wrong on another, and a wrong one is answered with the numbers
that make it wrong.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

from servelab.exercises.answers import NotYet, blank


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


def choice(answer, step: str, what: str, options, right: Callable, why: Callable):
    """A choice among `options` (compared as text, case-insensitive), judged by right(choice)
    on your numbers; why(choice) says, with those numbers, what makes a wrong one wrong."""
    names = {str(o).lower(): o for o in options}
    if blank(answer):
        listed = ", ".join(repr(o) for o in options)
        raise NotYet(f"{step}: replace the `...` in the cell above with {what} (one of {listed}).")
    picked = names.get(str(answer).strip().lower())
    if picked is None:
        raise NotYet(f"{step}: {answer!r} is not one of {', '.join(map(repr, options))}.")
    if not right(picked):
        raise NotYet(f"{step}: not {picked!r}: {why(picked)}")
    print(f"{step}: {what}: {picked!r}, as your rows say.")
    return picked


def number_in(answer, step: str, what: str, low: float, high: float, why: str):
    """A number judged against your rows: accepted from `low` up to (not including) `high`; `why`
    says where those bounds come from."""
    if blank(answer):
        raise NotYet(f"{step}: replace the `...` in the cell above with {what} (a number).")
    try:
        value = float(answer)
    except (TypeError, ValueError):
        raise NotYet(f"{step}: {what} is a number, not {answer!r}.") from None
    if not low <= value < high:
        side = "too low" if value < low else "too high"
        raise NotYet(f"{step}: {value:g} is {side}: {why}")
    print(f"{step}: {what}: {value:g}, within what your rows allow ({low:g} to below {high:g}).")
    return value


def fewest_near_best(answer, step: str, what: str, measured: dict, share: float = 0.9):
    """The fewest of `measured`'s keys (instances, workers: {n: claims.Measured throughput}) that
    serve at least `share` of the best. Noise decides nothing: a choice is right when its
    interval reaches `share` of the best's and no smaller one surely does."""
    best = max(measured.values(), key=lambda m: m.value)

    def enough(n):
        return measured[n].hi >= share * best.lo

    def surely(n):
        return measured[n].lo >= share * best.hi

    def why(n):
        if not enough(n):
            return (
                f"{n} served {measured[n].value:.0f}/s, under {share:.0%} of the best "
                f"({best.value:.0f}/s)."
            )
        fewer = [f"{k} {measured[k].value:.0f}/s" for k in measured if k < n and surely(k)]
        return (
            f"fewer already serve {share:.0%} of the best ({best.value:.0f}/s): {', '.join(fewer)}."
        )

    return choice(
        answer,
        step,
        what,
        options=tuple(sorted(measured)),
        right=lambda n: enough(n) and not any(surely(k) for k in measured if k < n),
        why=why,
    )


def bottleneck(answer, step: str, busy_u: float, device_pct: float | None, device: str):
    """What limited a run: "instances" (each busy at least 90 % of the time, U = X·S), "device"
    (the busiest device at least 90 % busy) or "neither" (the load itself). Both can be right."""
    full = {"instances": busy_u >= 0.9, "device": (device_pct or 0) >= 90}
    full["neither"] = not any(full.values())
    shown = "not reported" if device_pct is None else f"{device_pct:.0f} %"

    def why(picked):
        return (
            f"each instance was busy {busy_u:.0%} of the time (busy_U) and {device} {shown}: "
            f"{'it' if picked != 'neither' else 'one of them'} "
            f"{'was not' if picked != 'neither' else 'was'} near full."
        )

    return choice(
        answer,
        step,
        "the bottleneck",
        ("instances", "device", "neither"),
        right=lambda c: full[c],
        why=why,
    )
