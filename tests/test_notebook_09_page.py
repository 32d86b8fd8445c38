"""docs/results/cpu/09_ray_serve_cluster/: every figure and verdict the page quotes is read again
from its files (claims.csv, summary.csv, the autoscaling files, run.json), so a figure and its
measurement cannot drift apart."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from servelab.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "results" / "cpu" / "09_ray_serve_cluster"
STEP = (10, 40, 30)  # the notebook's default load step (LAB_RAY_STEP_SECONDS)


@pytest.fixture(scope="module")
def page():
    claims = pd.read_csv(PAGE / "claims.csv", keep_default_na=False)
    return {
        "text": (PAGE / "README.md").read_text(),
        "notes": (PAGE / "notes.md").read_text(),
        "run": json.loads((PAGE / "run.json").read_text()),
        "claims": {row["claim"]: row for _, row in claims.iterrows()},
        "summary": pd.read_csv(PAGE / "summary.csv").set_index("run"),
        "replicas": pd.read_csv(PAGE / "autoscaling_replicas.csv"),
        "windows": pd.read_csv(PAGE / "autoscaling_windows.csv"),
    }


def _in(text: str, figure: str) -> None:
    """figure is in text, wherever text breaks its lines."""
    assert " ".join(figure.split()) in " ".join(text.split()), f"the page does not say {figure!r}"


def _claim(page, start: str) -> dict:
    found = [row for claim, row in page["claims"].items() if claim.startswith(start)]
    assert len(found) == 1, (start, list(page["claims"]))
    return found[0]


def test_the_run_and_the_machine(page):
    run, text = page["run"], page["text"]
    assert run["settings"] == "the notebook's defaults" and "failed" not in run
    assert run["down_returncode"] == 0
    assert sorted(run["files"]) == sorted(
        p.name for p in PAGE.iterdir() if p.suffix != ".md" and p.name != "run.json"
    )
    _in(text, f"load average was {run['before']['load_average_1_5_15'][0]} at the start")
    _in(text, f"{run['after']['load_average_1_5_15'][0]} at the end")
    _in(text, f"({run['after']['load_average_1_5_15'][1]} over the last 5 minutes)")
    _in(text, f"The notebook ran in {run['notebook_s']} s")
    _in(
        page["notes"],
        "maintainers/reference/run_notebook_9.py --out docs/results/cpu/09_ray_serve_cluster",
    )


@pytest.mark.parametrize(
    "start",
    [
        "9.1: with one request",
        "9.1: taking 2",
        "9.2: two replicas",
        "9.2: four replicas",
        "9.2: the runs",
        "9.3: the autoscaler",
        "9.3: and removed",
        "9.3: p95 came back",
        "9.4: Ray replaced",
        "9.4: no request hung",
        "9.4: every failed",
        "9.5: one at a time",
        "9.5: at 14",
    ],
)
def test_each_claims_verdict_is_the_files(page, start):
    row = _claim(page, start)
    words = start.split(": ", 1)[1]
    lines = [line for line in page["text"].splitlines() if f"| {words}" in line]
    assert len(lines) == 1, (start, lines)
    assert f"| {row['verdict']} |" in lines[0], (lines[0], row["verdict"])


def test_the_replicas_figures(page):
    s, text = page["summary"], page["text"]
    capacity1, capacity2 = (s.loc[f"9.1 capacity, {n} at once", "throughput_rps"] for n in (1, 2))
    _in(text, f"{capacity2:.2f}/s against {capacity1:.2f}/s: {capacity2 / capacity1:.2f}x")
    _in(text, f"[{_claim(page, '9.1: taking 2')['interval'][1:6]}")
    busy = _claim(page, "9.1: with one request")
    _in(text, f"busy_U {float(busy['value']):.2f} with {busy['numbers'].split('= ')[1]} requests")
    seq = s.loc["9.1 sequential"]
    _in(
        text,
        f"served {seq['throughput_rps']:.2f} requests/s one at a time (median "
        f"{seq['median_ms']:.2f} ms, of which the model's `infer` {seq['infer_median_ms']:.2f} ms)",
    )
    rows = {n: s.loc[f"9.2 {n} replicas"] for n in (1, 2, 4)}
    _in(
        text,
        f"one replica served {rows[1]['throughput_rps']:.2f}/s, two replicas "
        f"{rows[2]['throughput_rps']:.2f}/s and four {rows[4]['throughput_rps']:.2f}/s (p95 "
        f"{rows[1]['p95_ms']:.0f}, {rows[2]['p95_ms']:.0f} and {rows[4]['p95_ms']:.0f} ms)",
    )
    _in(text, f"the Poisson arrivals gave {rows[2]['request_rate']:.1f}/s")
    for n, other in ((2, 1), (4, 2)):
        ratio = rows[n]["throughput_rps"] / rows[other]["throughput_rps"]
        _in(
            text,
            f"{rows[n]['throughput_rps']:.2f}/s against {rows[other]['throughput_rps']:.2f}"
            f"/s: {ratio:.3g}x",
        )
    for start in ("9.1: taking 2", "9.2: two replicas", "9.2: four replicas"):
        claim = _claim(page, start)
        lo, hi = (float(x) for x in claim["interval"].strip("[]").split(", "))
        _in(text, f"{float(claim['value']):.3g}x [{lo:.3g}, {hi:.3g}]")
    late = _claim(page, "9.2: the runs")
    _in(text, f"{float(late['value']):.2f} % sent late")


def test_the_autoscaling_figures(page):
    r, w, text = page["replicas"], page["windows"], page["text"]
    up, end = STEP[0], STEP[0] + STEP[1]
    starting = r[r["STARTING"] > 0]["t_s"].min()
    two = r[r["RUNNING"] >= 2]["t_s"]
    stopping = r[r["STOPPING"] > 0]["t_s"].min()
    during = r[(r["t_s"] > up) & (r["t_s"] <= end)]
    assert during["RUNNING"].max() == 1  # what "does not hold" means here
    _in(text, f"STARTING {starting - up:.1f} s after the step up (at {starting:.1f} s")
    _in(text, f"took {two.min() - starting:.1f} s to start")
    _in(text, f"ran only at {two.min():.1f} s, {two.min() - end:.1f} s after the step had ended")
    _in(text, f"stopped {stopping - two.min():.1f} s after it ran (from {stopping:.1f} s)")
    assert r["RUNNING"].iloc[-1] == 1
    step = page["summary"].loc["9.3 step"]
    _in(text, f"grew to {w['in_flight'].max()}")
    _in(text, f"p95 rose to {w['p95_ms'].max() / 1000:.1f} s")
    _in(text, f"{int(step['errors'])} of the {int(step['requests'])} requests were never sent")
    _in(text, f"({step['delayed_pct']:.1f} % left more than 10 ms late")
    budget = _claim(page, "9.3: p95 came back")
    assert budget["value"] == "inf"
    _in(text, f"budget {budget['numbers'].split('budget_ms = ')[1].split(',')[0]} ms")


def test_the_crash_and_triton_figures(page):
    text, s = page["text"], page["summary"]
    replaced = _claim(page, "9.4: Ray replaced")["numbers"].split("= ")[1]
    _in(text, f"two running again {replaced} s after the kill")
    _in(text, f"running again {replaced} s after the kill.")
    crash = s.loc["9.4 crash"]
    failed = _claim(page, "9.4: every failed")["numbers"]
    errors, requests = int(crash["errors"]), int(crash["requests"])
    assert failed == f"failed = {errors}, statuses = {{500: {errors}}}"
    _in(text, f"{errors} of {requests} failed, both HTTP 500")
    _in(text, f"slowest answer {_claim(page, '9.4: no request')['numbers'].split('= ')[1][:3]} s")
    ray, triton = s.loc["9.5 ray sequential"], s.loc["9.5 triton sequential"]
    ratio = _claim(page, "9.5: one at a time")
    _in(
        text,
        f"median {ray['median_ms']:.2f} ms against {triton['median_ms']:.2f} ms: "
        f"{float(ratio['value']):.3g}x {ratio['interval'].replace(', ', ', ')[:0]}",
    )
    _in(text, f"added {ray['median_ms'] - triton['median_ms']:.1f} ms here")
    rated = s.loc["9.5 triton 14.7/s"]
    _in(text, f"p95 {rated['p95_ms']:.2f} ms against {s.loc['9.2 2 replicas', 'p95_ms']:.0f} ms")
    _in(text, f"{float(_claim(page, '9.5: at 14')['value']):.3g}x |")
    _in(text, f"Triton's p95 was {rated['p95_ms']:.2f} ms")
