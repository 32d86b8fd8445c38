"""Predictions before measurements, and "what to notice" claims judged on the numbers measured.

Introduced in notebook 4.

    guess = claims.predict("4.4 median ms", None, "...")  # your number (None: not predicted yet)
    lat = claims.Measured.from_samples(latencies_ms)      # a median with a 95% interval
    claims.compare_prediction(guess, lat)                 # the prediction itself, not its name
    claims.at_least("concurrent latency is >= 3x sequential", conc / seq, 3)

**How a claim gets its verdict.** Noise decides small differences, so every number comes with an
interval, and a claim is judged on the interval, not on the number:
- per-request samples (notebook 4's load generator): the 95% bootstrap interval of the median;
- perf_analyzer runs: the lowest and highest of the measurement windows it judged (it measures
  windows until the last three agree within its stability percentage, and reports those); a
  number perf_analyzer reports once (e.g. the server's queue time) gets the same relative spread
  as the run's throughput windows.
A claim "x >= t" **holds** when the whole interval of x is at or above t, **does not hold** when
the whole interval is below it, and is **inconclusive** when the interval straddles t: then the
measurement cannot decide it (measure longer, or on quieter hardware). Ratios of two measured
numbers take the extremes: [lo_a / hi_b, hi_a / lo_b].

A prediction is an object (claims.Prediction): the notebook holds what predict() returns and
hands it to the verdict beside the runs it predicts; its name is what the notebook and the saved
files call it, never a key the library looks it up by.

All verdicts of a run are saved to claims.csv, and predictions to predictions.csv, for the
summary page. With LAB_STRICT_CLAIMS=1 a claim that does not hold stops the notebook;
inconclusive never does. LAB_STRICT_CLAIMS=facts (the tests) stops only on a fact() that does not
hold: a claim with no noise in it is wrong by construction, while a measured one that does not
hold on a busy machine is that machine's finding, recorded in claims.csv. LAB_PREDICTIONS
(JSON {key: value}) answers prediction cells left at None, so a headless run has predictions to
compare.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from servelab import passes
from servelab.passes import node_calls, record

RESULTS: list[dict] = []
PREDICTIONS: list[Prediction] = []  # in the order made, for predictions.csv
DECISIONS: dict[str, dict] = {}  # step -> your choice and your reason (exercises.judgement)
HOLDS, FAILS, INCONCLUSIVE, NOT_CHECKED = (
    "holds",
    "does not hold",
    "inconclusive",
    "not checked here",
)


class ClaimFailed(AssertionError):
    pass


@dataclass(frozen=True)
class Measured:
    """A measured number with the interval the measurement supports."""

    value: float
    lo: float
    hi: float
    how: str = "one value"

    @classmethod
    def exact(cls, value: float, how: str = "one value") -> Measured:
        return cls(float(value), float(value), float(value), how)

    @classmethod
    def from_windows(cls, windows, value: float | None = None) -> Measured:
        """perf_analyzer's windows of one run: value = the reported one (default: their mean)."""
        w = [float(x) for x in windows]
        v = float(np.mean(w)) if value is None else float(value)
        return cls(v, min(w + [v]), max(w + [v]), f"{len(w)} measurement windows")

    @classmethod
    def from_samples(cls, samples, stat=np.median, rounds: int = 1000, seed: int = 0) -> Measured:
        """A statistic (default the median) of per-request samples, 95% bootstrap interval.

        `stat` takes an array and `axis` (np.median, or functools.partial(np.percentile, q=95)):
        the rounds are drawn as rows of one array, a block at a time, and reduced together (the
        same draws, in the same order, as one round at a time: the same interval, far faster)."""
        x = np.asarray(samples, dtype=float)
        rng = np.random.default_rng(seed)
        block = max(1, min(rounds, 1_000_000 // max(1, len(x))))  # rows of a block: <= 8 MB
        boots: list[float] = []
        for done in range(0, rounds, block):
            draws = rng.choice(x, size=(min(block, rounds - done), len(x)), replace=True)
            boots.extend(stat(draws, axis=1))
        lo, hi = np.percentile(boots, [2.5, 97.5])
        return cls(
            float(stat(x)), float(lo), float(hi), f"95% bootstrap interval, {len(x)} requests"
        )

    def with_spread_of(self, other: Measured) -> Measured:
        """This number with the relative spread of another from the same run."""
        if not other.value:
            return self
        down, up = (other.value - other.lo) / other.value, (other.hi - other.value) / other.value
        return Measured(
            self.value, self.value * (1 - down), self.value * (1 + up), f"spread of {other.how}"
        )

    def __truediv__(self, other: Measured) -> Measured:
        if not isinstance(other, Measured):
            other = Measured.exact(other)
        lo = self.lo / other.hi if other.hi else math.inf
        hi = self.hi / other.lo if other.lo else math.inf
        return Measured(
            self.value / other.value if other.value else math.inf, lo, hi, "ratio of intervals"
        )

    def __str__(self) -> str:
        if self.lo == self.hi:
            return f"{self.value:.3g}"
        return f"{self.value:.3g} [{self.lo:.3g}, {self.hi:.3g}]"


def _as_measured(x) -> Measured:
    return x if isinstance(x, Measured) else Measured.exact(x)


@dataclass
class Prediction:
    """Your prediction, as predict() kept it: the notebook holds it and hands it to the verdict
    beside the runs it predicts (compare_prediction sets the measurement beside it)."""

    name: str  # what the notebook calls it ("6.1 queue at c16 (ms)"): its row in predictions.csv
    value: object  # a number, or a word where the text asks for one; None: not predicted
    why: str = ""
    made: str = ""  # when you made it (the prepare pass's time when unchanged since)
    measured: str = ""  # the measurement beside it, once compared

    def row(self) -> dict:
        return {
            "prediction": self.name,
            "value": self.value,
            "why": self.why,
            "made": self.made,
            "measured": self.measured,
        }


def predict(name: str, value, why: str = "") -> Prediction:
    """Record your prediction before measuring, with the time you made it; returns it, to hand to
    the verdict. None = not predicted (yet): the prepare pass requires every prediction, the
    review pass reads the one the measure pass kept (servelab/passes/record.py)."""
    if value is None:
        scripted = json.loads(os.environ.get("LAB_PREDICTIONS") or "{}")
        value = scripted.get(name)
        why = why or ("(scripted answer of a headless run)" if value is not None else "")
    kept = record.prediction(name, value, why)
    made = Prediction(name, kept["value"], kept["why"], kept["made"])
    PREDICTIONS.append(made)
    print(
        f"your prediction for {name}: "
        f"{'(none yet: type a value, then run the cell)' if made.value is None else made.value}"
        + (f" - because {made.why}" if made.why and made.value is not None else "")
        + (f" (made {kept['made']}, {kept['pass']} pass)" if made.value is not None else "")
    )
    return made


def compare_prediction(prediction: Prediction, measured) -> str:
    """Set your prediction (what predict() returned) beside the measurement: within 2x counts as
    a good estimate."""
    if not isinstance(prediction, Prediction):
        raise TypeError(
            f"compare_prediction takes the prediction predict() returned, not {prediction!r}"
        )
    m, p, key = _as_measured(measured), prediction.value, prediction.name
    if p is None:
        line = f"{key}: measured {m}; no prediction was made"
    elif isinstance(p, (int, float)) and not isinstance(p, bool):
        factor = max(p, m.value) / min(p, m.value) if min(p, m.value) > 0 else math.inf
        within = "within" if factor <= 2 else "off by more than"
        line = f"{key}: you predicted {p:.3g}, measured {m} ({within} 2x)"
    else:
        line = f"{key}: you predicted {p!r}, measured {m}"
    prediction.measured = str(m)
    print(line)
    return line


def _record(
    claim: str,
    verdict: str,
    measured: Measured | None,
    rule: str,
    numbers: dict | None,
    note: str,
    is_fact: bool = False,
):
    shown = ", ".join(
        f"{k} = {v:.3g}" if isinstance(v, float) else f"{k} = {v}"
        for k, v in (numbers or {}).items()
    )
    print(
        f"[{verdict.upper()}] {claim}"
        + (
            f"\n    measured: {measured} ({measured.how}); the claim needs {rule}"
            if measured
            else ""
        )
        + (f"\n    numbers: {shown}" if shown else "")
        + (f"\n    note: {note}" if note else "")
    )
    RESULTS.append(
        {
            "claim": claim,
            "verdict": verdict,
            "value": "" if measured is None else round(measured.value, 4),
            "interval": "" if measured is None else f"[{measured.lo:.4g}, {measured.hi:.4g}]",
            "rule": rule,
            "how": "" if measured is None else measured.how,
            "numbers": shown,
            "note": note,
        }
    )
    _keep_in_bundle()
    strict = os.environ.get("LAB_STRICT_CLAIMS")
    if verdict == FAILS and (strict == "1" or (strict == "facts" and is_fact)):
        raise ClaimFailed(f"claim does not hold: {claim} (measured {measured}, needs {rule})")
    return verdict


def at_least(
    claim: str, measured, threshold: float, numbers: dict | None = None, note: str = ""
) -> str:
    m = _as_measured(measured)
    verdict = HOLDS if m.lo >= threshold else FAILS if m.hi < threshold else INCONCLUSIVE
    return _record(claim, verdict, m, f">= {threshold:g}", numbers, note)


def at_most(
    claim: str, measured, threshold: float, numbers: dict | None = None, note: str = ""
) -> str:
    m = _as_measured(measured)
    verdict = HOLDS if m.hi <= threshold else FAILS if m.lo > threshold else INCONCLUSIVE
    return _record(claim, verdict, m, f"<= {threshold:g}", numbers, note)


def between(
    claim: str, measured, low: float, high: float, numbers: dict | None = None, note: str = ""
) -> str:
    m = _as_measured(measured)
    inside = low <= m.lo and m.hi <= high
    outside = m.hi < low or m.lo > high
    verdict = HOLDS if inside else FAILS if outside else INCONCLUSIVE
    return _record(claim, verdict, m, f"between {low:g} and {high:g}", numbers, note)


def fact(claim: str, holds: bool, numbers: dict | None = None, note: str = "") -> str:
    """A claim with no noise in it (e.g. two classes are the same): holds or does not."""
    return _record(claim, HOLDS if holds else FAILS, None, "", numbers, note, is_fact=True)


def choose(question: str, samples: dict[str, list[float]], tie_order: list[str]) -> str:
    """One of several options (e.g. transports), decided on repeated runs of each, never on one
    comparison: `samples` holds each option's runs (more is better, e.g. inferences/s). The
    option with the highest median wins outright when its lowest run beats the highest run of
    every other (claim: holds); an option it does not beat so is tied with it (inconclusive), and
    among the tied the first of `tie_order` is chosen, and the reason printed. Notebook 7, 7.4."""
    measured = {
        name: Measured.from_windows(runs, float(np.median(runs))) for name, runs in samples.items()
    }
    top = max(measured, key=lambda name: measured[name].value)
    tied = [top]
    for name, other in measured.items():
        if name != top:
            runs = f"{len(samples[top])} and {len(samples[name])} runs"
            verdict = at_least(f"{question}: {top} beats {name} ({runs})", measured[top] / other, 1)
            tied += [name] if verdict != HOLDS else []
    rank = {name: i for i, name in enumerate(tie_order)}
    chosen = top if len(tied) == 1 else min(tied, key=lambda name: rank.get(name, len(rank)))
    why = (
        "it beats every other option in every run"
        if len(tied) == 1
        else (
            f"these runs do not tell {', '.join(tied)} apart; the rule keeps the first of "
            f"{tie_order} among them"
        )
    )
    print(f"{question}: {chosen} ({why})")
    return chosen


def not_checkable(claim: str, reason: str) -> str:
    """A claim this hardware cannot show (e.g. two GPUs on a CPU machine): say so, don't pretend."""
    return _record(claim, NOT_CHECKED, None, "", None, reason)


def given(premises: dict[str, bool], check, claim: str, *args, **kwargs) -> str:
    """Decide a claim only where the run shows what the claim presumes: `premises` maps the reason
    a premise fails, in words, to whether it holds; the first that does not makes the claim not
    checkable, with that reason. Otherwise check(claim, *args) (at_least, at_most, ...) decides.

        claims.given({"without batching the instance kept up": overloaded},
                     claims.at_least, "batching keeps latency far below none", ratio, 2)
    """
    for reason, holds in premises.items():
        if not holds:
            return not_checkable(claim, reason)
    return check(claim, *args, **kwargs)


def decided(step: str, question: str, choice, reason: str, numbers: str) -> None:
    """Your decision of a step, with your reason beside it and the numbers it was judged on:
    saved to decisions.csv with the claims."""
    DECISIONS[step] = {
        "step": step,
        "question": question,
        "choice": choice,
        "reason": " ".join(str(reason).split()),
        "judged_on": numbers,
    }


CLAIM_FIELDS = ["claim", "verdict", "value", "interval", "rule", "how", "numbers", "note"]


def save(folder: Path) -> Path:
    """claims.csv (and predictions.csv and decisions.csv, if any) in folder; the measure pass
    keeps a copy of them in the notebook's bundle. In the review pass a claim only the node
    could judge (its cell runs in the measure pass) comes from the bundle, and says so."""
    kept = node_calls.kept_by_pass()
    rows = RESULTS + _judged_on_the_node()
    for where in [folder] + ([kept.folder] if kept else []):
        _write_claims(where, rows)
        if PREDICTIONS:
            with open(where / "predictions.csv", "w", newline="") as f:
                fields = ["prediction", "value", "why", "made", "measured"]
                writer = csv.DictWriter(f, fieldnames=fields)
                writer.writeheader()
                writer.writerows(_latest(PREDICTIONS))
        if DECISIONS:
            with open(where / "decisions.csv", "w", newline="") as f:
                fields = ["step", "question", "choice", "reason", "judged_on"]
                writer = csv.DictWriter(f, fieldnames=fields)
                writer.writeheader()
                writer.writerows(DECISIONS.values())
    return folder / "claims.csv"


def _keep_in_bundle() -> None:
    """The measure pass keeps every verdict in the bundle as it comes, not only at save(): the
    lease may end before the notebook's last cell (servelab/passes/cut_short.py)."""
    kept = node_calls.kept_by_pass()
    if kept is not None:
        _write_claims(kept.folder, RESULTS)


def _write_claims(where: Path, rows: list[dict]) -> None:
    where.mkdir(parents=True, exist_ok=True)
    with open(where / "claims.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CLAIM_FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def _latest(predictions: list[Prediction]) -> list[dict]:
    """One row per prediction, in the order first made: a cell run again replaces its row (the
    file's rows are named by the predictions' names, as the bundle's are)."""
    rows = {p.name: p.row() for p in predictions}
    return list(rows.values())


def _judged_on_the_node() -> list[dict]:
    """In the review pass: the measure pass's claims that this pass did not judge again."""
    bundle = node_calls.STATE["bundle"] if passes.replays() else None
    path = bundle.folder / "claims.csv" if bundle else None
    if not path or not path.is_file():
        return []
    judged = {r["claim"] for r in RESULTS}
    with open(path, newline="") as f:
        measured = [r for r in csv.DictReader(f) if r["claim"] not in judged]
    return [
        {**r, "note": (r["note"] + "; " if r["note"] else "") + "judged in the measure pass"}
        for r in measured
    ]
