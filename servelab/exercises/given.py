"""The notebook's values the checks compare your answers with, handed over once it has them.

Introduced in notebook 3:

    exercises.given(HOST=HOST, PERF_INPUT=PERF_INPUT)   # notebook 6's first cells

A step whose answer holds the notebook's HOST is met by an answer that holds HOST's value,
however you wrote it (an f-string with {HOST}, or the address typed out).
"""

from __future__ import annotations

from servelab.exercises.answers import NotYet

GIVEN: dict = {}


def given(**values) -> None:
    """Hand the checks the notebook's values its steps are written with (HOST, RATE, N_GPUS, ...):
    your lines are compared with the needs these make."""
    GIVEN.update(values)


def value(name: str):
    """One of the values, or NotYet when the notebook has not handed it over yet."""
    if name not in GIVEN:
        raise NotYet(f"run the cell that sets {name} first: the checks compare your lines with it.")
    return GIVEN[name]


def values(needed=(), **instead) -> dict:
    """The values the checks compare with (`instead` in place of some, e.g. RATE=308 for a sweep's
    line at that rate); NotYet while one of `needed` is not handed over."""
    for name in sorted(set(needed) - set(instead)):
        value(name)
    return {**GIVEN, **instead}
