"""Work that runs in the background on the node, counted where it truly costs the student: the
overlap rule of rules.BACKGROUND_RULE, one function that both estimates apply, each with its own
minutes per step.

The steps of the lease are walked in the order a student meets them (notebook by notebook, cell
by cell) on one clock. From the step that starts the background build, its parts (the waits of
rules.WAITS with a `part`, in the script's order) run beside the student: every minute of another
step is a minute of the build, except a wait that downloads too, which shares the node's network
with the build (processor sharing: each at half speed while both run). At a part's `wait` the
lease pays what is left of that part and of those before it. A part never started (a notebook
timed on its own, a self-paced host) is built at its `wait`, in full, as `up --build` would.
Reading in the lease (notebook 2's, read while the node boots, before the build starts) is not on
the clock: earlier on it, the student would meet each wait sooner, with more of the build left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from maintainers.timing import rules
from maintainers.timing.steps import Step
from servelab.passes.choice import MEASURE

PARTS = tuple(w.part for w in rules.WAITS if w.part)  # the order docker/build_images.sh builds
PART_OF = {w.name: w.part for w in rules.WAITS if w.part}
DOWNLOADS = {w.name for w in rules.WAITS if w.downloads}
NOT_ON_CLOCK = ("read", "read code")  # lease reading: done while the node boots


@dataclass
class Part:
    name: str
    work: float  # minutes alone, at the node's full speed
    left: float
    began: float | None = None  # lease minute the build began work on it
    built: float | None = None  # lease minute it was done
    reached: float | None = None  # lease minute the student reached its wait
    paid: float | None = None  # what the lease paid there


@dataclass
class Timeline:
    """What each step of the lease cost, the background build beside it included."""

    costs: list[float]  # one per step given, in the order given
    parts: dict[str, Part] = field(default_factory=dict)
    started: float | None = None  # lease minute the build started (None: never)
    contention: float = 0.0  # minutes foreground waits took longer, sharing the network
    shared_until: float | None = None  # lease minute the last wait that shared the network ended
    first_run: float | None = None  # lease minute of the first GPU run (a machine step)

    @property
    def ended(self) -> float | None:
        built = [p.built for p in self.parts.values()]
        return max(built) if built and None not in built else None


def _advance(parts: list[Part], work: float, now: float, speed: float = 1.0) -> None:
    """The build does `work` minutes of its work, its parts one after another, from lease minute
    `now` at `speed` (1: alone on the node; 0.5: sharing the network)."""
    for part in parts:
        if work <= 0:
            return
        if part.left > 0:
            if part.began is None:
                part.began = now
            done = min(part.left, work)
            part.left -= done
            work -= done
            now += done / speed
            if part.left <= 1e-9:
                part.left, part.built = 0.0, now


def lease(steps: list[Step], cost: Callable[[Step], float], order: list[str]) -> Timeline:
    """Walk the measure pass of `steps` (notebooks in `order`, each by cell) on one clock, with
    the background build beside it; costs of the other passes' steps are theirs unchanged."""
    costs = [cost(s) for s in steps]
    work = {
        PART_OF[s.what]: c for s, c in zip(steps, costs) if s.kind == "wait" and s.what in PART_OF
    }
    timeline = Timeline(costs=costs)
    running: list[Part] = []
    clock = 0.0
    walk = sorted(
        (i for i, s in enumerate(steps) if s.pass_ == MEASURE),
        key=lambda i: (order.index(steps[i].notebook), steps[i].cell),
    )
    for i in walk:
        step = steps[i]
        if step.kind in NOT_ON_CLOCK:
            continue
        if step.kind == "background" and not running:
            timeline.started = clock
            running = [Part(p, work.get(p, 0.0), work.get(p, 0.0)) for p in PARTS]
            for part in running:
                if part.work <= 0:
                    part.began = part.built = clock
            timeline.parts = {p.name: p for p in running}
            continue
        part = PART_OF.get(step.what) if step.kind == "wait" else None
        if part and running:
            upto = running[: PARTS.index(part) + 1]
            paid = sum(p.left for p in upto)
            _advance(running, paid, clock)
            record = timeline.parts[part]
            record.reached, record.paid = clock, paid
            costs[i] = paid
        elif step.kind == "wait" and step.what in DOWNLOADS and running:
            alone, left = costs[i], sum(p.left for p in running)
            shared = min(alone, left)  # both at half speed for 2 x shared minutes
            _advance(running, shared, clock, speed=0.5)
            costs[i] = alone + shared
            timeline.contention += shared
            timeline.shared_until = clock + costs[i]
        else:
            if step.kind == "machine" and timeline.first_run is None:
                timeline.first_run = clock
            _advance(running, costs[i], clock)
        clock += costs[i]
    return timeline
