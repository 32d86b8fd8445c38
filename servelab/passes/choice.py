"""Which pass this notebook runs: LAB_PASS, read once, and the one sentence that stops a cell.

Introduced in notebook 3 (its first cell, as every notebook's from there on).

    prepare   before the lease, no node: read, predict, write and check every exercise line
    measure   in the lease, on the node: run what you wrote and keep it in a results bundle
              (the default: `make lab`, the tests and a self-paced reader run every cell at once)
    review    after the lease, no node: every table, law, verdict and decision from the bundle
"""

from __future__ import annotations

import os

PREPARE, MEASURE, REVIEW = "prepare", "measure", "review"
PASSES = (PREPARE, MEASURE, REVIEW)
# what each pass is for, in the words the first cell prints
WHAT = {
    PREPARE: "before the lease, no node: read, predict, write and check each exercise line",
    MEASURE: "on the node: run what you wrote, keep every result in this notebook's bundle",
    REVIEW: "after the lease, no node: tables, laws, verdicts and decisions from the bundle",
}


class Stop(Exception):
    """One sentence that stops "Run All" at this cell, shown without a traceback (IPython shows
    what _render_traceback_() returns in place of one)."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def current() -> str:
    """The pass this kernel runs: LAB_PASS (default measure); Stop on any other word."""
    chosen = (os.environ.get("LAB_PASS") or MEASURE).strip().lower()
    if chosen not in PASSES:
        raise Stop(
            f"LAB_PASS is {chosen!r}: set it to prepare, measure or review "
            "(`%env LAB_PASS=prepare` in a cell, then run the first cell again)."
        )
    return chosen


def measures() -> bool:
    """Does this pass reach the node (run what needs a service)?"""
    return current() == MEASURE


def replays() -> bool:
    """Does this pass read the node's results from the bundle instead of the node?"""
    return current() == REVIEW
