"""Run a notebook's jupytext source cell by cell as plain Python, as a Jupyter kernel would: one
namespace, top-level `await` allowed in a cell (IPython runs such a cell in its event loop), each
cell timed. For machines with no Jupyter, e.g. the GPU reference run (gpu_reference/).

    cd notebooks && python -m labstack.script_runner ../notebook_sources/06_triton_benchmarks.py \
        [--times cell_times.json]

--times writes [{"cell": n, "first_line": ..., "seconds": s}, ...] for the code cells, written
after every cell (so a run stopped by a time limit still leaves what it measured): the measured
minutes the timing plan is built from (labstack/timing.py). `!shell` lines are comments in a
jupytext source and do not run here.
A source runs as the solved edition: nbgrader's solution markers are comments.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import inspect
import json
import re
import time
from pathlib import Path

CELL = re.compile(r"^# %%(?P<rest>.*)$", re.M)


def code_cells(source: str) -> list[str]:
    """The code cells of a jupytext percent-format source (markdown cells left out)."""
    starts = [m for m in CELL.finditer(source)]
    cells = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(source)
        if "[markdown]" not in match.group("rest"):
            cells.append(source[match.end() : end].strip("\n"))
    return [c for c in cells if c.strip()]


def run(path: Path, times: Path | None = None) -> None:
    namespace = {"__name__": "__main__", "__file__": str(path)}
    loop = asyncio.new_event_loop()  # one loop for every cell, as in a kernel
    measured = []
    for number, cell in enumerate(code_cells(path.read_text()), start=1):
        start = time.perf_counter()
        code = compile(cell, f"{path}[cell {number}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # a coroutine when the cell awaits at top level
        if inspect.iscoroutine(result):
            loop.run_until_complete(result)
        first = next((line for line in cell.splitlines() if line.strip()), "")
        measured.append(
            {"cell": number, "first_line": first[:80], "seconds": time.perf_counter() - start}
        )
        if times is not None:
            times.write_text(json.dumps(measured, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--times", type=Path, help="write each code cell's duration here")
    args = parser.parse_args()
    run(args.source, args.times)


if __name__ == "__main__":
    main()
