"""The committed GPU reference page (docs/results/<gpu>/) is what gpu_reference/run_reference.py
writes from the files next to it, and it shows what issue 5 asks for: the served/limit line, every
claim of notebooks 4, 6 and 7 with a verdict and its numbers, the plots it links."""

import json
import re
import shutil
import statistics
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
    parts = [p for p in ("fastapi", "triton", "hardware") if (page / "results" / p).is_dir()]
    assert parts, f"{page} has no notebook results"
    if "hardware" in parts:
        ratio = re.search(r"served/limit = (\d+) / (\d+) images/s = ([\d.]+)", readme)
        assert ratio, "no served/limit line"
        served, limit, shown = int(ratio[1]), int(ratio[2]), float(ratio[3])
        assert abs(served / limit - shown) < 0.006
    for part in parts:
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


def test_the_stability_line_is_the_median_of_the_recorded_starts():
    """The 2026-11-25 page: served/limit over the separately started servers, as recorded one
    start per device call in results/stability/starts.json (issue 32 asks for at least 3)."""
    page = REPO_ROOT / "docs/results/h100_2026-11-25"
    record = json.loads((page / "results/stability/starts.json").read_text())
    limit = record["limit_images_per_s"]
    ratios = sorted(s["infer_s"] / limit for s in record["starts"] if "infer_s" in s)
    assert len(ratios) >= 3
    line = (
        f"served/limit over {len(ratios)} separately started servers: median "
        f"{statistics.median(ratios):.3f}, min {ratios[0]:.3f}, max {ratios[-1]:.3f}"
    )
    assert line in (page / "README.md").read_text()


def test_mixed_batch_sizes_cost_at_most_twice_grouped_on_the_h100():
    """Issue 32's bar for the lab's ONNX runtime on the GPU, read from the committed run: the
    one-session rows show the stall (the check can fail), the lab's row stays within 2x, in
    process and served by Triton."""
    results = REPO_ROOT / "docs/results/h100_2026-11-25/results"
    rows = json.loads((results / "batch_switch.json").read_text())["rows"]
    assert rows["one session, EXHAUSTIVE"]["ratio"] > 100  # the stall, measured
    lab = next(r for name, r in rows.items() if name.startswith("the lab's") and "CUDA" in name)
    assert lab["ratio"] <= 2 and lab["mixed_mean_ms"] < 10
    (served,) = json.loads((results / "batch_switch_triton.json").read_text())["rows"].values()
    assert served["ratio"] <= 2


def prose(source: str) -> str:
    """A notebook source's markdown as one line of text (comment marks and line breaks gone)."""
    lines = (REPO_ROOT / "notebook_sources" / source).read_text().splitlines()
    return " ".join(line[2:] for line in lines if line.startswith("# "))


def batching_gain(page) -> float:
    """6.6's top rate: mean latency without dynamic batching over with it, from a page's summary."""
    triton = pd.read_csv(page / "results/triton/summary.csv").set_index("run")
    runs = [r for r in triton.index if r.startswith("6.6 batching poisson")]
    top = max(runs, key=lambda run: float(run.split()[-1].removesuffix("/s")))  # e.g. '816/s'
    without = top.replace("6.6 batching", "6.6 no batching")
    return triton.loc[without, "avg_latency_ms"] / triton.loc[top, "avg_latency_ms"]


def test_notebook_texts_quote_the_2026_11_25_reference():
    """Notebook 6's lesson on batch-size changes and notebook 7's intro cite the 2026-11-25 run:
    each figure they print is recomputed here from its files."""
    page = REPO_ROOT / "docs/results/h100_2026-11-25"
    rows = json.loads((page / "results/batch_switch.json").read_text())["rows"]
    one = rows["one session, EXHAUSTIVE"]
    lab = next(r for name, r in rows.items() if name.startswith("the lab's"))
    six = prose("06_triton_benchmarks.py")
    assert (
        f"took {one['mixed_mean_ms'] / 1000:.1f} s a batch, the same sizes grouped "
        f"{one['grouped_mean_ms']:.1f} ms" in six
    )
    assert f"mixed sizes then cost {lab['ratio']:.2f}x grouped" in six
    gain = batching_gain(page)
    seven = prose("07_how_close_to_the_hardware.py")
    assert f"{gain:.0f}x lower mean latency than without batching" in seven
    record = json.loads((page / "results/stability/starts.json").read_text())
    ratios = [s["served_over_limit"] for s in record["starts"]]
    shown = f"{ratios[0]:.2f}, {ratios[1]:.2f} and {ratios[2]:.2f}"
    assert f"**{shown}** (median {statistics.median(ratios):.3f}" in seven


def test_readme_and_instructors_quote_the_2026_11_25_reference():
    page = REPO_ROOT / "docs/results/h100_2026-11-25"
    rows = json.loads((page / "results/batch_switch.json").read_text())["rows"]
    one = rows["one session, EXHAUSTIVE"]
    lab = next(r for name, r in rows.items() if name.startswith("the lab's"))
    served = json.loads((page / "results/batch_switch_triton.json").read_text())["rows"]
    starts = json.loads((page / "results/stability/starts.json").read_text())["starts"]
    ratios = ", ".join(f"{s['served_over_limit']:.3f}" for s in starts[:-1])
    ratios += f" and {starts[-1]['served_over_limit']:.3f}"
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    guide = " ".join((REPO_ROOT / "docs/instructors.md").read_text().split())
    assert f"**{ratios} of the limit**" in readme and f"{ratios} of the limit" in guide
    assert f"{lab['ratio']:.2f}x the same sizes grouped" in readme
    assert f"{one['mixed_mean_ms']:,.0f} ms a call against {one['grouped_mean_ms']:.1f} ms" in guide
    assert f"{lab['ratio']:.2f}x grouped on the same GPU" in guide
    assert f"Triton gave {next(iter(served.values()))['ratio']:.2f}x" in guide
    gain = batching_gain(page)
    assert f"latency {gain:.0f}x lower than none" in readme
    assert f"mean latency {gain:.0f}x below no batching" in guide


def test_notebook_7s_stability_verdict_quotes_the_fresh_starts():
    record = json.loads(
        (REPO_ROOT / "docs/results/h100_2026-11-25/results/stability/starts.json").read_text()
    )
    r = [s["served_over_limit"] for s in record["starts"]]
    source = " ".join(
        (REPO_ROOT / "notebook_sources/07_how_close_to_the_hardware.py").read_text().split()
    )
    assert f"{r[0]:.3f}, {r[1]:.3f} and {r[2]:.3f}" in source.replace('" "', "")


def _throughput_ratios(new, old, notebook: str, column: str) -> str:
    """'low-high' of one run's throughputs over another's, row by row, at one decimal."""
    a, b = (pd.read_csv(p / f"results/{notebook}/summary.csv").set_index("run") for p in (new, old))
    ratio = (a[column] / b[column]).dropna()
    return f"{ratio.min():.1f}-{ratio.max():.1f}x"


def test_texts_quote_the_2026_11_26_reference():
    """The 2026-11-26 run as the README, the instructors' guide, the answer key and its own notes
    describe it: each figure recomputed from its files and the 2026-11-25 run's."""
    new, old = (REPO_ROOT / f"docs/results/h100_2026-11-{day}" for day in (26, 25))
    six = _throughput_ratios(new, old, "triton", "throughput_infer_s")
    four = _throughput_ratios(new, old, "fastapi", "throughput_rps")
    assert (six, four) == ("1.2-1.5x", "1.0-1.3x")  # what the texts below say
    texts = {
        name: " ".join((REPO_ROOT / name).read_text().split())
        for name in ("README.md", "docs/instructors.md", "docs/answer_key.md")
    }
    notes = " ".join((new / "notes.md").read_text().split())
    for name, text in [*texts.items(), ("notes.md", notes)]:
        assert f"notebook 6's throughputs {six}" in text or f"throughputs rose {six}" in text, name
        assert f"notebook 4's {four}" in text, name
    gain = batching_gain(new)
    triton = pd.read_csv(new / "results/triton/summary.csv").set_index("run")
    assert f"latency {gain:.0f}x lower than none" in texts["README.md"]
    assert f"latency {gain:.0f}x below none" in texts["docs/instructors.md"]
    assert f"{gain:.0f}x lower (130x on 2026-11-25)" in notes
    onnx = triton.loc["6.4 onnx 2 inst c16"]
    assert f"busy_U {onnx['busy_U']:.2f}, the GPU {onnx['gpu0_util_pct']:.1f} % busy" in notes
    lab = next(
        r
        for name, r in json.loads((new / "results/batch_switch.json").read_text())["rows"].items()
        if name.startswith("the lab's")
    )
    assert f"classifier cost {lab['ratio']:.2f}x grouped" in notes
    # the decisions the notes list, as the notebooks printed them on that run
    log = (new / "04_fastapi_benchmarks.log").read_text() + (
        new / "06_triton_benchmarks.log"
    ).read_text()
    for printed in (
        "4.7: the worker processes to run: 2,",
        "6.3: the stubs on GPU 0: 2,",
        "6.3: the instances per GPU to deploy: 4,",
        "6.4: the bottleneck: 'instances',",
        "6.6: the highest rate for one instance without batching: 349,",
    ):
        assert printed in log, printed
