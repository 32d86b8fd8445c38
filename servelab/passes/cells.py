"""Which cells a pass runs: a cell that needs the node or its results says so on its first line.

Introduced in notebook 3.

    %%runs_in measure            the cell talks to a service: the measure pass only
    %%runs_in measure review     the cell reads runs: measured now, or read from the bundle
    %%runs_in prepare            the cell stands in for what only the node can tell (a rate)

A cell without that line runs in every pass (reading, predictions, the exercise lines and their
checks, your answers). In a pass the cell is not for, it prints one line saying where it runs,
and nothing else happens. (In the review of a bundle cut short, once a step is found not
measured, the `prepare` cells run too: servelab/passes/cut_short.py.) The first cell
(passes.start) teaches IPython the line: an input transformer reads it before IPython sees the
cell, so the cell itself runs as any cell does.
"""

from __future__ import annotations

from servelab.passes import cut_short
from servelab.passes.choice import PASSES, PREPARE, REVIEW, Stop, current

MARKER = "%%runs_in"
# why a cell runs only where it does, by the passes it names
_WHY = {
    ("measure",): "it talks to the lab's services",
    ("measure", "review"): "it reads your runs, from the node or from the bundle",
    ("prepare",): "it stands in for what the measure pass finds",
}


def passes_of(first_line: str) -> tuple[str, ...] | None:
    """The passes a cell's first line names (None: no marker, every pass)."""
    if not first_line.startswith(MARKER):
        return None
    named = tuple(first_line[len(MARKER) :].split())
    wrong = [p for p in named if p not in PASSES]
    if wrong or not named:
        raise Stop(f"{MARKER} names passes among {', '.join(PASSES)}; this cell says {named}.")
    return named


def skipped_line(named: tuple[str, ...], lab_pass: str) -> str:
    """The one line a skipped cell prints."""
    where = f"the {' and '.join(named)} pass{'es' if len(named) > 1 else ''}"
    why = _WHY.get(named)
    return f"(LAB_PASS={lab_pass}: this cell runs in {where}" + (f": {why})" if why else ")")


def transform(lines: list[str]) -> list[str]:
    """IPython's cleanup transform: a marked cell as IPython should run it in this pass."""
    if not lines:
        return lines
    cut_short.seen(lines)
    named = passes_of(lines[0].rstrip("\n"))
    if named is None:
        return lines
    lab_pass = current()
    if lab_pass in named or (lab_pass == REVIEW and PREPARE in named and cut_short.after_cut()):
        return ["\n", *lines[1:]]  # the marker line goes; line numbers stay
    return [f"print({skipped_line(named, lab_pass)!r})\n"]


def install() -> None:
    """Teach this IPython the marker (once; nothing outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    cleanup = shell.input_transformers_cleanup
    if transform not in cleanup:
        cleanup.insert(0, transform)
