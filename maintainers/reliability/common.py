"""Verdicts and counters shared by every fuzz target, and a bounded Hypothesis runner.

One case ends in exactly one verdict:
    accepted         2xx (the input was a usable image after all)
    rejected         4xx (or a Triton error response) whose message says what is wrong
    Triton core 500  HTTP 500 from Triton's own HTTP frontend while it parses the JSON body
                     ("Unable to parse ..."): Triton's behaviour, not the lab's code; listed apart,
                     never counted as a server error or crash of our services
    unclear          4xx whose message is missing or does not say what is wrong
    server error     5xx from one of our services (or any other 5xx from Triton)
    no answer        connection error or timeout while the service stayed up
    crash            the service process died
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import requests

TRITON_CORE_500 = "Triton core 500"
VERDICTS = (
    "accepted",
    "rejected",
    TRITON_CORE_500,
    "unclear",
    "server error",
    "no answer",
    "crash",
)
FLAGGED = (
    "unclear",
    TRITON_CORE_500,
    "server error",
    "no answer",
    "crash",
)  # examples kept for the report
HTTP_TIMEOUT = 30.0  # every request of the fuzzers and the soak has a bound: nothing can hang
RSS_GROWTH_LIMIT_MIB = (
    64.0  # allowed resident-memory growth of a service over one soak (after warm-up)
)


@dataclass
class Tally:
    """Outcome counts of one fuzz target, with the first few cases of each flagged verdict kept."""

    target: str
    counts: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # verdict -> [(case, detail)]
    messages: dict = field(
        default_factory=dict
    )  # case -> the service's answer (Triton: hand-made cases)
    reasons: Counter = field(
        default_factory=Counter
    )  # (flagged verdict, answer) -> cases, all of them
    still_serving: bool | None = None
    seconds: float = 0.0

    def add(self, case: str, verdict: str, status=None, detail: str = "") -> None:
        assert verdict in VERDICTS, verdict
        self.counts[verdict] += 1
        if status is not None:
            self.statuses[status] += 1
        if verdict in FLAGGED:
            self.reasons[(verdict, str(detail)[:200])] += 1
            kept = self.examples.setdefault(verdict, [])
            if len(kept) < 5:
                kept.append((case, str(detail)[:300]))

    @property
    def cases(self) -> int:
        return sum(self.counts.values())

    @property
    def problems(self) -> int:
        """Cases that break the contract: server errors, crashes and hangs (unclear messages are
        listed apart)."""
        return self.counts["server error"] + self.counts["crash"] + self.counts["no answer"]


def hypothesis_run(strategy, check, examples: int, seed: int = 0) -> None:
    """Run check(value) on `examples` values of a Hypothesis strategy, reproducibly (fixed seed, no
    database); check records verdicts itself and must not raise."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    @hseed(seed)
    @settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(value=strategy)
    def run_one(value):
        check(value)

    run_one()


def record(tally: Tally, proc, case: str, send, judge) -> None:
    """Send one case and judge the answer; no answer at all is a crash if the process died, else
    'no answer'."""
    try:
        resp = send()
    except requests.RequestException as exc:
        dead = proc is not None and not proc.alive()
        tally.add(
            case,
            "crash" if dead else "no answer",
            type(exc).__name__,
            f"{type(exc).__name__}: {exc}",
        )
        return
    verdict, detail = judge(resp)
    tally.add(case, verdict, resp.status_code, detail)
