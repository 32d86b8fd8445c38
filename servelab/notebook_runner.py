"""Execute a lab notebook headless (nbclient) with parameters passed as LAB_* environment variables."""
from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from servelab.paths import REPO_ROOT


def execute(notebook: Path, out_path: Path, params: dict | None = None, extra_env: dict | None = None,
            cell_timeout: int = 1800) -> float:
    """Run every cell top to bottom; write the executed copy to out_path (also when a cell fails)."""
    nb = nbformat.read(notebook, as_version=4)
    env = {**os.environ, **(extra_env or {}), **{f"LAB_{k}": str(v) for k, v in (params or {}).items()}}
    env.setdefault("PYTHONPATH", str(REPO_ROOT))
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    start = time.time()
    try:
        client.execute(env=env)  # passed on to the kernel process
    finally:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out_path)
    return time.time() - start
