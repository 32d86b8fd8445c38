"""The launcher's command line in a subprocess, for tests that start and stop the local stack.

(A helper module, not conftest.py: tests/docker/ has a conftest.py of its own, so `from conftest
import ...` would be ambiguous.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from servelab.paths import REPO_ROOT

PY = sys.executable


def run_launcher(state_dir: Path, *args: str, timeout: float = 600, extra_env: dict | None = None):
    """The launcher CLI in a subprocess with its own state folder (never the user's .lab/)."""
    env = {**os.environ, "LAB_STATE_DIR": str(state_dir), **(extra_env or {})}
    return subprocess.run(
        [PY, "-m", "labstack.launcher", *args],
        cwd=REPO_ROOT,
        env=env,
        timeout=timeout,
        capture_output=True,
        text=True,
    )
