"""The linter configured in pyproject.toml ([tool.ruff]) passes on the whole repository."""
import subprocess
import sys

from servelab.paths import REPO_ROOT


def test_ruff_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
