"""The committed GPU reference page (docs/results/<gpu>/) is what gpu_reference/run_reference.py
writes from the files next to it, and it shows what issue 5 asks for: the served/limit line, every
claim of notebooks 4, 6 and 7 with a verdict and its numbers, the plots it links."""

import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from servelab.paths import REPO_ROOT

PAGES = sorted(p.parent for p in (REPO_ROOT / "docs/results").glob("*/runs.json"))


def test_there_is_a_gpu_reference():
    assert any(page.name == "h100" for page in PAGES), PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_readme_is_regenerated_exactly_from_the_committed_files(tmp_path, page):
    copy = tmp_path / page.name
    shutil.copytree(page, copy)
    (copy / "README.md").unlink()
    run = subprocess.run(
        [sys.executable, "gpu_reference/run_reference.py", "--out", str(copy), "--report"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (copy / "README.md").read_text() == (page / "README.md").read_text(), (
        f"{page}/README.md is stale: run python gpu_reference/run_reference.py --out {page} "
        "--report"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_shows_the_ratio_every_claim_and_its_plots(page):
    readme = (page / "README.md").read_text()
    ratio = re.search(r"served/limit = (\d+) / (\d+) images/s = ([\d.]+)", readme)
    assert ratio, "no served/limit line"
    served, limit, shown = int(ratio[1]), int(ratio[2]), float(ratio[3])
    assert abs(served / limit - shown) < 0.006
    for part in ("fastapi", "triton", "hardware"):
        claims = pd.read_csv(page / "results" / part / "claims.csv", keep_default_na=False)
        assert len(claims) >= 5
        for claim in claims["claim"]:
            row = next((line for line in readme.splitlines() if f"| {claim} |" in line), None)
            assert row, f"claim missing from the instructor table: {claim}"
            assert any(
                v in row
                for v in (
                    "| holds |",
                    "| **does not hold** |",
                    "| not checked |",
                    "| inconclusive |",
                )
            ), row
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", readme):
        assert (page / png).stat().st_size > 10_000, png


def test_the_reference_run_imports_nothing_the_gpu_machine_lacks():
    """The GPU machine has no jupytext, nbclient or nbformat (only `make lab` and the editions
    need them): run_reference.py's imports must not pull them in (a device call stopped on it)."""
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in ("jupytext", "nbclient", "nbformat"))
    code = f"import sys; {blocked}; import labstack.lab, labstack.launcher, labstack.script_runner"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
