"""How a decision is judged: on your own rows, never against a fixed answer.

Introduced in notebook 4 (judgement.decide hands each decision to its judge here, through the
table of steps, servelab/exercises/steps.py).

A decision names a goal (a latency objective at a load, the resource that limited a run, whether
a difference is more than noise) and you choose, with your reason beside the choice. It is judged
on the rows you measured: the same choice can be right on one machine and wrong on another, and a
wrong one is answered with the numbers that make it wrong. Noise decides nothing: where a
number's interval straddles a line, either side is accepted.

    real_or_noise     is a difference between two runs more than their windows' spread?
    cheapest          the cheapest option whose latency meets an objective (else the fallback)
    bottleneck        which resource limited a run: instances, GPU, CPU, or the load itself
    fewest_near_best  the fewest workers or replicas that serve nearly the best (notebook 9)
    number_in         a number between the rows that bound it

Each decision is kept with your reason (decisions.csv beside claims.csv).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from servelab import claims
from servelab.exercises.answers import NotYet, blank


def _reason(reason, step: str) -> str:
    if blank(reason):
        raise NotYet(
            f"{step}: write your reason beside your choice, in the quotes under it: a sentence "
            "that names the numbers of your rows you decided on."
        )
    # the solved edition's reason keeps nbgrader's markers around it: not part of the reason
    lines = [ln for ln in str(reason).splitlines() if not ln.strip().startswith("### ")]
    return "\n".join(lines).strip()


def _picked(answer, options, step: str, what: str):
    """The option `answer` names: compared as text in any case, numbers as numbers (2.0 is 2)."""
    if blank(answer):
        listed = ", ".join(repr(o) for o in options)
        raise NotYet(f"{step}: replace the `...` in the cell above with {what} (one of {listed}).")
    for option in options:
        if str(option).lower() == str(answer).strip().lower() or _same_number(option, answer):
            return option
    raise NotYet(f"{step}: {answer!r} is not one of {', '.join(map(repr, options))}.")


def _same_number(option, answer) -> bool:
    try:
        return not isinstance(option, str) and float(answer) == float(option)
    except (TypeError, ValueError):
        return False


def choice(
    answer,
    step: str,
    what: str,
    options,
    right: Callable,
    why: Callable,
    reason=None,
    numbers: str = "",
):
    """A choice among `options` (text in any case, numbers as numbers), judged by right(choice)
    on your numbers; why(choice) says, with those numbers, what makes a wrong one wrong. With a
    `reason` (not None), it must be written, and is kept beside the choice with `numbers`, the
    rows it was judged on."""
    picked = _picked(answer, options, step, what)
    said = None if reason is None else _reason(reason, step)
    if not right(picked):
        raise NotYet(f"{step}: not {picked!r}: {why(picked)}")
    print(f"{step}: {what}: {picked!r}, as your rows say.")
    if said is not None:
        claims.decided(step, what, picked, said, numbers)
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
    interval reaches `share` of the best's and no smaller one surely does. (Notebook 9.)"""
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


# ---------------------------------------------------------------- the judges of notebooks 4 and 6


def _interval(m, unit: str = "") -> str:
    return f"{m.value:.1f}{unit} (windows {m.lo:.1f} to {m.hi:.1f})"


def real_or_noise(answer, reason, step: str, what: str, runs: dict):
    """Is the difference between two measured numbers ({name: claims.Measured}) real, or could
    noise explain it? Real when their intervals do not overlap, noise when they do."""
    (name_a, a), (name_b, b) = runs.items()
    apart = a.hi < b.lo or b.hi < a.lo

    def why(picked):
        numbers = f"{name_a} {_interval(a, '/s')}, {name_b} {_interval(b, '/s')}"
        if picked == "real":
            low, high = max(a.lo, b.lo), min(a.hi, b.hi)
            return (
                f"{numbers}: the two overlap from {low:.1f} to {high:.1f}, so noise could put "
                "either above the other."
            )
        return f"{numbers}: no window of one reached the other's, so noise cannot explain it."

    right = {"real": apart, "noise": not apart}
    numbers = f"{name_a} {_interval(a, '/s')}, {name_b} {_interval(b, '/s')}"
    question = f"{what}: real or noise"
    return choice(answer, step, question, ("real", "noise"), right.get, why, reason, numbers)


def cheapest(
    answer,
    reason,
    step: str,
    what: str,
    options: dict,
    objective: float,
    measure: str,
    fallback: str,
    per: str = "",
):
    """The cheapest of `options` ({option: claims.Measured latency in ms, or None where it was not
    measured at the load}, cheapest first) whose latency meets `objective` (ms), or `fallback`
    when none does (`per`: what a number option counts, " per device"). A choice is right when
    its interval reaches under the objective and no cheaper option's whole interval is under it;
    the fallback, when no option's is."""
    order = list(options)
    measured = {o: m for o, m in options.items() if m is not None}

    def right(picked):
        cheaper = order if picked == fallback else order[: order.index(picked)]
        could = picked == fallback or (picked in measured and measured[picked].lo <= objective)
        return could and not any(c in measured and measured[c].hi <= objective for c in cheaper)

    said = _Latencies(options, objective, measure, per)
    return choice(answer, step, what, (*order, fallback), right, said.why, reason, said.numbers)


class _Latencies:
    """cheapest()'s sentences: each option's latency against the objective, in your numbers."""

    def __init__(self, options: dict, objective: float, measure: str, per: str):
        self.options, self.objective, self.measure, self.per = options, objective, measure, per
        shown = "; ".join(
            f"{self.named(n)}: {_interval(m, ' ms') if m else 'not measured at this load'}"
            for n, m in options.items()
        )
        self.numbers = f"{shown}; objective {objective:.1f} ms ({measure})"

    def named(self, option) -> str:
        return f"{option}{self.per}" if not isinstance(option, str) else option

    def why(self, picked) -> str:
        goal, options = f"the objective of {self.objective:.1f} ms", self.options
        if picked in options and options[picked] is None:
            return f"your rows have no run of {self.named(picked)} at this load or above."
        if picked in options and options[picked].lo > self.objective:
            shown = _interval(options[picked], " ms")
            return f"with {self.named(picked)} your {self.measure} was {shown}, over {goal}."
        met = [c for c, m in options.items() if m and m.hi <= self.objective] or [picked]
        kept = f"your {self.measure} at {_interval(options[met[0]], ' ms')}, under {goal}"
        if met[0] == picked:  # a right choice: what it kept
            return f"{self.named(picked)} kept {kept}."
        return f"{self.named(met[0])} already kept {kept}, and costs less."


RESOURCES = ("instances", "GPU", "CPU", "load")
DEVICES = ("GPU", "CPU")
FULL, NEARLY = 0.9, 0.8  # busy this share of the time: surely full; perhaps full


def bottleneck(answer, reason, step: str, row: dict):
    """Which resource limited a run (its row): a device, "GPU" (the busiest GPU) or "CPU" (the
    machine's cores), where one was full; "instances" (each busy nearly all the time, busy_U)
    where the instances were busy and no device was full (an instance waiting for a full device
    is busy too: the device is the limit then); "load" where none of them was full (too little
    work offered). A resource busy 80 to 90 % of the time may be named, or not."""
    busy, numbers = _busy(row)
    known = [v for v in busy.values() if v is not None]

    def full(resource, share=FULL):
        return busy[resource] is not None and busy[resource] >= share

    def right(picked):
        if picked == "load":
            return not any(v >= FULL for v in known)
        if picked == "instances":
            return full("instances", NEARLY) and not any(full(d) for d in DEVICES)
        return full(picked, NEARLY)

    def why(picked):
        if picked == "load":
            verdict = "one of them was full"
        elif busy[picked] is None:
            verdict = f"the run reported no {picked} utilisation"
        elif picked == "instances" and full("instances", NEARLY):
            device = next(d for d in DEVICES if full(d))
            verdict = f"the {device} was full, and an instance waiting for it is busy too"
        else:
            verdict = f"{'the instances were' if picked == 'instances' else f'the {picked} was'}"
            verdict += " not full"
        return f"during your run {numbers}: {verdict}."

    return choice(answer, step, "the bottleneck", RESOURCES, right, why, reason, numbers)


def _busy(row: dict) -> tuple[dict, str]:
    """Each resource's busy share in a run's row (None where the run did not report it), and the
    row's numbers in words."""

    def read(column, scale=1.0):
        value = row.get(column)
        return None if value is None or value != value else value / scale

    gpus = {c: read(c, 100) for c in sorted(row) if re.fullmatch(r"gpu\d+_util_pct", c)}
    gpus = {c: v for c, v in gpus.items() if v is not None}
    busy = {
        "instances": read("busy_U"),
        "GPU": max(gpus.values()) if gpus else None,
        "CPU": read("cpu_util_pct", 100),
    }
    shown = [f"{c[:-9].replace('gpu', 'GPU ')} {v:.0%}" for c, v in gpus.items()]
    if busy["instances"] is not None:
        shown.insert(0, f"each instance was busy {busy['instances']:.0%} of the time (busy_U)")
    shown += [f"the CPU {busy['CPU']:.0%}"] if busy["CPU"] is not None else []
    if read("waiting_N") is not None:
        shown += [f"{read('waiting_N'):.1f} requests waited on average (waiting_N)"]
    return busy, ", ".join(shown)
