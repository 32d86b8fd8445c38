"""The three-way comparison's pages (docs/results/*/three_way/) and notebook 9's section 9.6: each
page's README is what maintainers/reference/three_way_report.py writes from the files beside it (so
every figure of its tables is its files'), three_way.json holds the same figures, the hand-written
notes quote figures that the files give, and the notebook's text quotes settings and timings that
its code and the cited pages hold."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from servelab import three_way
from servelab.paths import REPO_ROOT

PAGES = sorted(p.parent for p in (REPO_ROOT / "docs" / "results").glob("*/three_way/setup.json"))
CPU = REPO_ROOT / "docs" / "results" / "cpu" / "three_way"
# the GPU pages' requests (megabytes, gzipped) read again and judged: seconds each, so make
# test's; the CPU page keeps the same checks in the fast tier
READ_WHOLE = [p if p == CPU else pytest.param(p, marks=pytest.mark.slow) for p in PAGES]


def _report():
    path = REPO_ROOT / "maintainers" / "reference" / "three_way_report.py"
    spec = importlib.util.spec_from_file_location("three_way_report", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flat(text: str) -> str:
    return " ".join(text.split())


def _in(text: str, figure: str) -> None:
    assert _flat(figure) in _flat(text), f"the page does not say {figure!r}"


def test_the_cpu_page_is_there():
    assert CPU in PAGES


@pytest.mark.parametrize("page", READ_WHOLE, ids=lambda p: p.parent.name)
def test_the_page_is_what_its_files_give(page):
    report = _report()
    figures = report.figures(page)
    notes = (page / "notes.md").read_text()
    assert (page / "README.md").read_text() == report.markdown(figures) + "\n" + notes
    kept = json.loads((page / "three_way.json").read_text())
    assert kept == json.loads(json.dumps(figures, default=str))
    # every way the run compared answered (the first runs had no batching ways), and the files
    # the report names are there
    ways = set(figures["answers"]["labels"])
    assert {"triton", "triton_onnx", "ray", "fastapi"} <= ways <= set(three_way.ORDER)
    assert set(figures["configurations"]) == ways  # each way's configuration is on the page
    for name in ways:
        assert (page / f"sequential_{name}.csv").stat().st_size > 0
        for kind in ("ladder", "fixed"):
            assert report.requests_file(page, kind, name).stat().st_size > 0


@pytest.mark.parametrize("page", READ_WHOLE, ids=lambda p: p.parent.name)
def test_the_verdicts_follow_the_rule(page):
    """Each ladder step's verdict is the rule's on its own requests, and the figure at the
    objective is the last step that held. The figures from three_way.json: the test above holds
    them to the files (computing them again costs seconds of bootstrap)."""
    import pandas as pd

    figures = json.loads((page / "three_way.json").read_text())
    setting = three_way.Setting(**figures["setup"]["setting"])
    for way in figures["answers"]["labels"]:
        path = _report().requests_file(page, "ladder", way)
        requests = pd.read_csv(path, float_precision="round_trip")
        codes = [int(c) if str(c).isdigit() else c for c in requests["status"]]
        requests["status"] = pd.Series(codes, index=requests.index, dtype=object)
        steps = [s for s in figures["ladder"] if s["way"] == way]
        for step, (_label, df) in zip(steps, requests.groupby("step", sort=False), strict=True):
            df = df.drop(columns="step").reset_index(drop=True)
            df.attrs.update(
                wall_s=float((df["t_start"] + df["latency_ms"].fillna(0) / 1e3).max()),
                request_rate=step["offered_rps"],
                late_limit_ms=10,
            )
            again = three_way.step_row(df, setting.objective_ms)
            assert again["verdict"] == step["verdict"], (way, step, again)
        held = [s["rate_rps"] for s in steps if s["verdict"] == "holds"]
        assert figures["at_objective"][way]["held_rps"] == (held[-1] if held else 0.0)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.parent.name)
def test_the_notes_quote_the_files(page):
    """Every figure the hand-written notes give in one of these forms is the page's files':
    "NAME: held R/s", "[way] model|outside|fixed p95 X ms", "[way] GROUP X ms of CPU",
    "[way] ladder R/s: U of its N requests unanswered", "[perf LINE] exit CODE", "N cores"."""
    import pandas as pd

    notes = _flat((page / "notes.md").read_text())
    f = json.loads((page / "three_way.json").read_text())
    _in(notes, "maintainers/reference/three_way.py")
    _in(notes, f"load average at the start {f['setup']['machine']['load_average_1_5_15'][0]}")
    for cores in re.findall(r"(\d+) cores", notes):
        assert int(cores) in (2, f["setup"]["machine"]["cores"]), cores  # the machine's, or 2
    for way, o in f["at_objective"].items():
        for figure in re.findall(rf"{re.escape(three_way.NAMES[way])}: held (\S+)/s", notes):
            assert float(figure) == o["held_rps"], (way, figure)
    seq = {row["way"]: row for row in f["sequential"]}
    pooled = {row["way"]: row for row in f["fixed_pooled"]}
    for way in f["answers"]["labels"]:
        for figure in re.findall(rf"\[{way}\] model (\S+) ms", notes):
            assert figure == f"{seq[way]['model_ms']:.1f}", (way, figure)
        for figure in re.findall(rf"\[{way}\] outside (\S+) ms", notes):
            assert figure == f"{seq[way]['outside_ms']:.1f}", (way, figure)
        for figure in re.findall(rf"\[{way}\] fixed p95 (\S+) ms", notes):
            assert figure == f"{pooled[way]['p95_ms']:.1f}", (way, figure)
        for group, figure in re.findall(rf"\[{way}\] ([a-z ]+?) (\S+) ms of CPU", notes):
            assert figure == f"{f['cpu_ms_per_request'][way][f'{way}: {group}']:.2f}", group
        for rate, unanswered, sent in re.findall(
            rf"\[{way}\] ladder (\S+)/s: ([\d,]+) of its ([\d,]+) requests unanswered", notes
        ):
            steps = pd.read_csv(_report().requests_file(page, "ladder", way), low_memory=False)
            step = steps[steps["step"] == f"{way} ladder {rate}/s"]
            assert len(step) == int(sent.replace(",", "")), (way, rate)
            got = int((step["status"].astype(str) != "200").sum())
            assert got == int(unanswered.replace(",", "")), (way, rate)
    for name, code in re.findall(r"\[perf (\w+)\] exit (\d+)", notes):
        assert f"exited with code {code}" in f["perf"][name]["error"], name


def test_notebook_9s_section_quotes_its_settings_and_the_pages():
    source = (REPO_ROOT / "notebook_sources" / "09_ray_serve_cluster.py").read_text()
    section = source.split("## 9.6", 1)[1].split("## What you measured", 1)[0]
    section = _flat(re.sub(r"^# ?", "", section, flags=re.M))  # the prose as a reader sees it
    gpu = three_way.SETTINGS["gpu"]
    _in(section, f"p95 stays under {gpu.objective_ms:g} ms")
    _in(section, f"each {gpu.factor:g} times the last")
    _in(section, 'ray_actor_options={"num_gpus": 0.25}')
    _in(section, '{"num_cpus": 0.5, "num_gpus": 0.25}')  # what the code deploys
    _in(section, "(4 worker processes)")
    _in(section, 'use_fastapi_backend("onnx", workers=4 if N_GPUS else 1)')
    # Triton's compile on the H100: the first loads of issue 47's runs
    costs = REPO_ROOT / "docs" / "results" / "h100" / "execution_costs"
    loads = [json.loads((costs / "fresh_start" / "starts.json").read_text())["starts"][0]["load_s"]]
    for folder in ("", "call3", "call4", "call5"):
        rows = json.loads((costs / folder / "costs.json").read_text())
        loads += [r["load_s"] for r in rows if "load_s" in r]
    _in(section, f"{min(loads):.0f} to {max(loads):.0f} s on the H100")
    # without a GPU it prints the CPU page's figures, read from its files
    text = three_way.cpu_page()
    f = json.loads((CPU / "three_way.json").read_text())
    for way, o in f["at_objective"].items():
        _in(text, f"{three_way.NAMES[way]}: held the objective up to {o['held_rps']:g}/s")


def test_the_reference_best_configuration_is_notebook_7s():
    record = json.loads(three_way.REFERENCE_BEST.read_text())
    assert record["best"].startswith("7.7 compiled, 8 inst")
    assert Path(three_way.best_config()[1]) == three_way.REFERENCE_BEST
