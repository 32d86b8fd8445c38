""""What to notice" claims, checked against the numbers just measured.

Introduced in notebook 4.

Each notebook states a claim, then calls `check(...)` with the measured values: the cell prints
the numbers it judged and whether the claim held on this machine. All checks of a run are saved
to claims.csv for the summary page. With LAB_STRICT_CLAIMS=1 (the tests) a claim that does not
hold stops the notebook; otherwise it is reported, since a student's hardware may differ.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

RESULTS: list[dict] = []


class ClaimFailed(AssertionError):
    pass


def check(claim: str, holds: bool, numbers: dict, needs: str = "") -> bool:
    shown = ", ".join(f"{k} = {v:.3g}" if isinstance(v, float) else f"{k} = {v}" for k, v in numbers.items())
    verdict = "HOLDS" if holds else "DOES NOT HOLD"
    print(f"[{verdict}] {claim}\n    measured: {shown}" + (f"\n    note: {needs}" if needs else ""))
    RESULTS.append({"claim": claim, "holds": bool(holds), "measured": shown, "note": needs})
    if not holds and os.environ.get("LAB_STRICT_CLAIMS") == "1":
        raise ClaimFailed(f"claim did not hold: {claim} ({shown})")
    return bool(holds)


def not_checkable(claim: str, reason: str) -> None:
    """A claim this hardware cannot show (e.g. two GPUs on a CPU machine): say so, do not pretend."""
    print(f"[NOT CHECKED HERE] {claim}\n    why: {reason}")
    RESULTS.append({"claim": claim, "holds": "", "measured": "", "note": f"not checked here: {reason}"})


def save(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["claim", "holds", "measured", "note"])
        writer.writeheader()
        writer.writerows(RESULTS)
    return path
