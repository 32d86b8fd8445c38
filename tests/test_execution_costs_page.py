"""docs/results/h100/execution_costs/: every figure the page quotes is recomputed from its files
(costs.json of call 1, fresh_start/starts.json of call 2), so a figure and its measurement cannot
drift apart; and the tool's pure parts (Triton's per-execution view, the cores, py-spy's sums)."""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import pytest

from servelab.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "results" / "h100" / "execution_costs"


def _tool():
    spec = importlib.util.spec_from_file_location(
        "execution_costs", REPO_ROOT / "maintainers" / "reference" / "execution_costs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def page():
    def rows(folder: str = "") -> dict:
        return {r["variant"]: r for r in json.loads((PAGE / folder / "costs.json").read_text())}

    record = json.loads((PAGE / "fresh_start" / "starts.json").read_text())
    return {
        "A": rows()["base"],
        "B": record["starts"][0]["detail"],
        "step8": rows()["step8"],
        "call3": rows("call3"),
        "call4": rows("call4"),
        "C": rows("call5")["direct"],
        "record": record,
        "text": (PAGE / "README.md").read_text(),
    }


def _in(text: str, figure: str) -> None:
    assert figure in text, f"the page does not say {figure!r}"


def test_served_over_limit_over_the_starts(page):
    limit = page["record"]["limit_images_per_s"]
    assert limit == 45372.0 == _tool().LIMIT_11_24
    ratios = [page["A"]["infer_s"] / limit, page["B"]["infer_s"] / limit]
    assert page["record"]["starts"][0]["served_over_limit"] == pytest.approx(ratios[1])
    median = statistics.median(ratios)
    _in(
        page["text"],
        f"**served/limit over {len(ratios)} separately started servers: median {median:.3f}, "
        f"min {min(ratios):.3f}, max {max(ratios):.3f}**",
    )
    # the verdict follows the figures: the goal needs a median of 0.70 over at least 3 starts
    holds = median >= 0.70 and len(ratios) >= 3
    _in(page["text"], "does not hold" if not holds else "holds")
    for server, ratio in zip("AB", ratios):
        _in(page["text"], f"{page[server]['infer_s']:,.0f} | {ratio:.3f} |")
    _in(page["text"], f"| {page['A']['load_s']} | 30,941 |")
    _in(page["text"], f"| {page['record']['starts'][0]['load_s']:.1f} | 28,751 |")
    # the other machines' first loads, each with its load time and ratio
    firsts = [page["call3"]["direct"], page["call4"]["direct"], page["C"]]
    for row in firsts:
        _in(
            page["text"],
            f"| {row['load_s']} | {row['infer_s']:,.0f} | {row['infer_s'] / limit:.3f} |",
        )
    stacking = ratios + [r["infer_s"] / limit for r in firsts[:2]]
    _in(page["text"], f"the four servers give a median of {statistics.median(stacking):.3f}")
    # call 3's and call 4's first loads never copied direct: they ran the stacking path
    for row in firsts[:2]:
        assert row["stub_profile"]["direct_batches"] == 0 < row["stub_profile"]["executions"]
    # a reload served less than the first load of the same path, by this much
    less = [
        1 - page[c]["base"]["infer_s"] / page[c]["direct"]["infer_s"] for c in ("call3", "call4")
    ]
    _in(page["text"], f"served {100 * min(less):.0f}-{100 * max(less):.0f} % less")


@pytest.mark.parametrize("column", ["A", "B", "step8"])
def test_where_an_execution_goes(page, column):
    row, text = page[column], page["text"]
    prof, run, triton = row["stub_profile"], row["run"], row["per_execution_ms"]
    ms, gpu = prof["ms_per_execution"], prof["gpu_ms_per_execution"]
    by_size = triton["by_batch_size"]
    at_max = by_size.get("64", 0) / sum(by_size.values())
    cycle = prof["execute_ms_per_execution"] + ms["between"]
    figures = [
        f"{row['infer_s']:,.0f}",
        f"{prof['mean_batch']:.1f} ({prof['mean_padded_batch']:.1f})",
        f"{100 * at_max:.1f} %",
        f"{run['busy_U']:.3f}",
        f"{run['gpu0_util_pct']:.1f} %",
        " / ".join(f"{triton[f'compute_{k}_ms']:.2f}" for k in ("input", "infer", "output")),
        f"{ms['between']:.2f}",
        f"{ms['inputs']:.2f}",
        f"{ms['stage']:.2f}",
        f"{ms['device']:.2f}",
        f"{gpu['copy']:.2f} / {gpu['graph']:.2f}",
        f"{ms['responses']:.2f}",
        f"{cycle:.2f}",
        f"{row['cores_used']['machine_busy']:.2f}",
    ]
    if column != "step8":  # its stubs' CPU was misread (see notes.md): the page leaves it out
        cores = row["cores_used"]
        figures.append(f"{cores['tritonserver']:.2f} / {cores['stubs']:.2f} / {cores['other']:.2f}")
    for figure in figures:
        _in(text, figure)


def test_the_readings_of_server_a(page):
    """The bullet points' arithmetic, from server A's row."""
    a, text = page["A"], page["text"]
    prof, triton = a["stub_profile"], a["per_execution_ms"]
    ms = prof["ms_per_execution"]
    execute = prof["execute_ms_per_execution"]
    cycle = execute + ms["between"]
    handover = triton["compute_input_ms"] + triton["compute_output_ms"]
    in_stub = triton["compute_infer_ms"] - execute
    _in(text, f"{ms['between']:.2f}\n  of {cycle:.2f} ms ({100 * ms['between'] / cycle:.0f} %)")
    _in(
        text,
        f"{triton['compute_input_ms']:.2f} + {triton['compute_output_ms']:.2f} = {handover:.2f}",
    )
    _in(text, f"{triton['compute_infer_ms']:.2f} − {execute:.2f} = {in_stub:.2f} ms")
    _in(text, f"about {ms['between'] - handover - in_stub:.1f} ms is left")
    _in(text, f"some {(handover + in_stub) / prof['mean_batch']:.2f} ms a request")
    _in(text, f"Our `execute()` is {execute:.2f} ms")
    for phase in ("stage", "device", "responses"):
        _in(text, f"{ms[phase]:.2f} ms ({100 * ms[phase] / cycle:.0f} %")
    gpu_busy = a["run"]["gpu0_util_pct"] / 100
    _in(text, f"30,941 / {gpu_busy:.3f} = {a['infer_s'] / gpu_busy:,.0f}\n  images/s")
    _in(text, f"images/s, {a['infer_s'] / gpu_busy / 45372:.2f} of the limit")


def test_the_graph_step_change_and_its_ratio(page):
    base, step8, text = page["A"], page["step8"], page["text"]
    _in(text, f"| {step8['infer_s']:,.0f} | {step8['infer_s'] / base['infer_s']:.3f} |")
    for row in (base, step8):
        prof = row["stub_profile"]
        padding = (prof["padded_images"] - prof["images"]) / prof["padded_images"]
        _in(text, f"| {100 * padding:.1f} % | {row['load_s']} |")
    spread = 1 - page["B"]["infer_s"] / base["infer_s"]
    _in(text, f"inside the {100 * spread:.0f} % between servers A and B")
    # the configurations are the ones named: graph_step 0 and 8, 8 instances x 64
    assert base["config"] == [8, 64, 500, 0, 1024] and step8["config"] == [8, 64, 500, 8, 1024]


def test_the_direct_copies_and_their_ratio(page):
    """direct_inputs on machine 3: call 4 refused every input (heap, not shared memory), call 5
    copied every one direct; the table's figures and the ratio of the two first loads."""
    refused, direct, text = page["call4"]["direct"], page["C"], page["text"]
    assert all("[heap], not shared memory" in r for r in refused["stub_profile"]["direct_refused"])
    assert direct["stub_profile"]["direct_batches"] == direct["stub_profile"]["executions"] > 0
    assert direct["stub_profile"]["direct_refused"] == []
    _in(text, f"| {direct['infer_s'] / refused['infer_s']:.3f} |")
    _in(text, f"it is {direct['infer_s'] / page['call4']['base']['infer_s']:.3f}x")
    _in(text, f"0 of {refused['stub_profile']['executions']:,}")
    n = direct["stub_profile"]["executions"]
    _in(text, f"{n:,} of {n:,}")
    for row in (refused, direct):
        prof, triton = row["stub_profile"], row["per_execution_ms"]
        ms, gpu = prof["ms_per_execution"], prof["gpu_ms_per_execution"]
        for figure in (
            f"{ms['stage']:.2f}",
            f"{gpu['copy']:.2f}",
            f"{ms['between']:.2f}",
            f"{prof['execute_ms_per_execution'] + ms['between']:.2f}",
            " / ".join(f"{triton[f'compute_{k}_ms']:.2f}" for k in ("input", "infer", "output")),
            f"{row['run']['gpu0_util_pct']:.1f} %",
            f"{row['infer_s'] / 45372:.3f}",
        ):
            _in(text, figure)
    busy = direct["run"]["gpu0_util_pct"] / 100
    _in(text, f"30,187 / {busy:.3f} = {direct['infer_s'] / busy:,.0f} images/s")
    _in(text, f"{direct['infer_s'] / busy / 45372:.2f} of the limit")


def test_the_ranges_across_machines(page):
    """The 'machines differ' and 'out of reach' ranges, over every run of the page."""
    rows = [page["A"], page["B"], page["step8"], page["C"]]
    rows += [*page["call3"].values(), *page["call4"].values()]
    between = [r["stub_profile"]["ms_per_execution"]["between"] for r in rows]
    cycle = [
        r["stub_profile"]["execute_ms_per_execution"]
        + r["stub_profile"]["ms_per_execution"]["between"]
        for r in rows
    ]
    _in(
        page["text"],
        f"({min(between):.1f}-{max(between):.1f} ms of a "
        f"{min(cycle):.1f}-{max(cycle):.1f} ms cycle)",
    )
    stacking = [*page["call3"].values(), *page["call4"].values()]
    copies = [r["stub_profile"]["gpu_ms_per_execution"]["copy"] for r in stacking]
    stages = [r["stub_profile"]["ms_per_execution"]["stage"] for r in stacking]
    served = [r["infer_s"] / 45372 for r in stacking]
    _in(page["text"], f"took {min(copies):.2f}-{max(copies):.2f} ms")
    _in(page["text"], f"the stacking {min(stages):.2f}-{max(stages):.2f} ms")
    _in(page["text"], f"served {min(served):.2f}-{max(served):.2f} of")
    machine1 = [r["infer_s"] / 45372 for r in (page["A"], page["B"], page["step8"])]
    _in(page["text"], f"machine 1 {min(machine1):.2f}-{max(machine1):.2f}")


def test_per_execution_reads_triton_batch_statistics():
    def stats(n64, ns64, n3, ns3):
        part = lambda n, ns: {"count": n, "ns": ns}  # noqa: E731
        return {
            "batch_stats": [
                {"batch_size": 64, **{k: part(n64, ns64) for k in _PARTS}},
                {"batch_size": 3, **{k: part(n3, ns3) for k in _PARTS}},
            ]
        }

    got = _tool().per_execution(stats(10, 10e6, 0, 0), stats(40, 70e6, 10, 10e6))
    # 30 executions of 64 took 60 ms, 10 of 3 took 10 ms: 70 ms over 40 executions
    assert got["executions"] == 40 and got["by_batch_size"] == {3: 10, 64: 30}
    assert got["compute_infer_ms"] == pytest.approx(70 / 40)


_PARTS = ("compute_input", "compute_infer", "compute_output")


def test_cores_count_only_processes_alive_at_both_readings():
    before = {"machine_busy": 100.0, "tritonserver": {1: 10.0}, "stubs": {2: 5.0, 3: 50.0}}
    after = {"machine_busy": 120.0, "tritonserver": {1: 14.0}, "stubs": {2: 9.0, 4: 1.0}}
    used = _tool().cores_used(before, after, wall=2.0)
    assert used == {
        "machine_busy": 10.0,
        "tritonserver": 2.0,
        "tritonserver_processes": 1,
        "stubs": 2.0,
        "stubs_processes": 1,
        "other": 6.0,
    }


def test_py_spy_samples_are_summed_by_leaf_and_by_frame(tmp_path: Path):
    sample = tmp_path / "spy.txt"
    sample.write_text("main;execute;concatenate 6\nmain;execute;replay 3\nmain;recv 1\n")
    got = _tool().spy_summary(sample)
    assert got["samples"] == 10
    assert dict(got["leaf"]) == {"concatenate": 0.6, "replay": 0.3, "recv": 0.1}
    assert dict(got["inside"])["execute"] == 0.9 and dict(got["inside"])["main"] == 1.0
