"""Run a notebook's jupytext source as a plain Python script, as a Jupyter kernel would run its
cells: top-level `await` allowed (IPython runs such a cell in its event loop). For machines with
no Jupyter, e.g. the GPU reference run (gpu_reference/run_reference.py).

    python -m labstack.script_runner notebooks/06_triton_benchmarks.py
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
from pathlib import Path


def run(path: Path) -> None:
    source = path.read_text()
    code = compile(source, str(path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"__name__": "__main__", "__file__": str(path)}
    result = eval(code, namespace)  # a coroutine when the script awaits at top level
    if inspect.iscoroutine(result):
        asyncio.run(result)


if __name__ == "__main__":
    run(Path(sys.argv[1]))
