"""Run a notebook's jupytext source cell by cell as plain Python, as a Jupyter kernel would: one
namespace, top-level `await` allowed in a cell (IPython runs such a cell in its event loop), each
cell timed. For machines with no Jupyter, e.g. the GPU reference run (maintainers/reference/).

    cd notebooks && python -m maintainers.reference.script_runner \
        ../notebook_sources/06_triton_benchmarks.py [--times cell_times.json]

--times writes [{"cell": n, "first_line": ..., "seconds": s}, ...] for the code cells, written
after every cell (so a run stopped by a time limit still leaves what it measured): the measured
minutes the timing plan is built from (maintainers/timing/). `!shell` lines are comments in a
jupytext source and do not run here.
A source runs as the solved edition: nbgrader's solution markers are comments. A cell whose
first line is `# %%runs_in PASSES` runs only in those passes (LAB_PASS, default measure), as in
Jupyter (servelab/passes/cells.py); in another it prints the line a kernel prints and is skipped.
--stop-after S --state FILE: stop between two cells once S seconds have passed (exit status 75),
keeping the namespace in FILE; the same command again takes the run up at the next cell
(maintainers/reference/resume_state.py), so a notebook longer than one GPU-machine call runs in
parts.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import inspect
import json
import os
import re
import time
from pathlib import Path

from maintainers.reference import resume_state

# a cell's start: "# %%", alone or followed by a space ("# %% [markdown]", "# %% jupyter=..."),
# not "# %%runs_in ...", which is the first line of a code cell
CELL = re.compile(r"^# %%(?:[ \t](?P<rest>.*))?$", re.M)


def code_cells(source: str) -> list[str]:
    """The code cells of a jupytext percent-format source (markdown cells left out)."""
    starts = [m for m in CELL.finditer(source)]
    cells = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(source)
        if "[markdown]" not in (match.group("rest") or ""):
            cells.append(source[match.end() : end].strip("\n"))
    return [c for c in cells if c.strip()]


STOPPED = 75  # exit status of a run stopped between cells, to be taken up again (EX_TEMPFAIL)


def skipped(cell: str) -> str | None:
    """The line a kernel prints for a cell whose `%%runs_in` line leaves out this pass (None: the
    cell runs). A prepare-only stand-in (notebook 6's `N_GPUS = 2`) must not run in the measure
    pass: it would overwrite what the server said."""
    from servelab.passes import cells, choice

    first = cell.split("\n", 1)[0].strip()
    if not first.startswith(f"# {cells.MARKER}"):
        return None
    named, lab_pass = cells.passes_of(first[2:]), choice.current()
    return None if lab_pass in named else cells.skipped_line(named, lab_pass)


def run(
    path: Path,
    times: Path | None = None,
    stop_after_s: float | None = None,
    state: Path | None = None,
) -> bool:
    """Run the source's code cells; False when it stopped early: with stop_after_s, once that
    many seconds have passed after a cell, the namespace goes to `state`
    (maintainers.reference.resume_state) and a later run with the same `state` starts at the next
    cell."""
    namespace = {"__name__": "__main__", "__file__": str(path)}
    environ_before = dict(os.environ)  # what the cells set is kept with a stopped run
    loop = asyncio.new_event_loop()  # one loop for every cell, as in a kernel
    cells = code_cells(path.read_text())
    first_cell, measured = 1, []
    if state is not None and state.exists():
        first_cell, measured = resume_state.load(state, cells, namespace)
        print(f"(resumed at cell {first_cell} of {len(cells)} from {state})", flush=True)
    began = time.perf_counter()
    for number, cell in enumerate(cells, start=1):
        if number < first_cell:
            continue
        start, skip = time.perf_counter(), skipped(cell)
        if skip:
            print(skip, flush=True)
        else:
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            code = compile(cell, f"{path}[cell {number}]", "exec", flags=flags)
            result = eval(code, namespace)  # a coroutine when the cell awaits at top level
            if inspect.iscoroutine(result):
                loop.run_until_complete(result)
        lines = [line for line in cell.splitlines() if line.strip()]
        first = next((line for line in lines if not line.startswith("# %%runs_in")), "")
        measured.append(
            {"cell": number, "first_line": first[:80], "seconds": time.perf_counter() - start}
        )
        if times is not None:
            times.write_text(json.dumps(measured, indent=1) + "\n")
        late = stop_after_s is not None and time.perf_counter() - began >= stop_after_s
        if late and state is not None and number < len(cells):
            kept = resume_state.save(state, cells, number + 1, namespace, measured, environ_before)
            print(
                f"(stopped after cell {number} of {len(cells)}: {len(kept['pickled'])} values "
                f"saved, {len(kept['remade'])} to make again; run again with --state {state})",
                flush=True,
            )
            return False
    if state is not None and state.exists():
        state.unlink()  # finished: a next run starts from the top
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--times", type=Path, help="write each code cell's duration here")
    parser.add_argument(
        "--stop-after", type=float, help="stop between cells once this many seconds have passed"
    )
    parser.add_argument("--state", type=Path, help="where a stopped run keeps its namespace")
    args = parser.parse_args()
    if not run(args.source, args.times, args.stop_after, args.state):
        raise SystemExit(STOPPED)


if __name__ == "__main__":
    main()
