"""A bundle cut short by the lease's end is reviewed for every step it holds (issue 50): the
review runs to its last cell, each cell that needs a run the bundle lacks says "(not measured"
in one line, the prepare pass's stand-ins take over from there, and the last cell names the steps
not measured. Cells run in a real IPython shell, as a notebook's kernel runs them. And a manifest
cannot send either pass outside its bundle (issue 52)."""

from __future__ import annotations

import json

import pytest
from IPython.core.interactiveshell import InteractiveShell

from servelab import claims, passes
from servelab.passes import bundle as bundles
from servelab.passes import cut_short, node_calls

NOTEBOOK = "06_triton_benchmarks"


@pytest.fixture
def shell(monkeypatch, tmp_path):
    """A notebook kernel's IPython, its bundles under tmp_path; run(source) runs one cell and
    returns (success, what it printed)."""
    monkeypatch.setenv("LAB_BUNDLE", str(tmp_path / "bundles"))
    ip = InteractiveShell.instance()

    def run(source: str, capsys) -> tuple[bool, str]:
        result = ip.run_cell(source)
        return result.success, capsys.readouterr().out

    run.ip = ip
    yield run
    cut_short.end()
    node_calls.STATE.update({"pass": None, "notebook": None, "bundle": None, "inside": 0})
    claims.RESULTS.clear()
    claims.PREDICTIONS.clear()
    InteractiveShell.clear_instance()


MEASURED = """
from servelab import passes
PASS = passes.start("06_triton_benchmarks")
"""
CELLS = [  # notebook 6 in miniature: each cell as a student's notebook has it
    "%%runs_in measure review\nc8 = passes.on_node('perf 6.1 c8', 'value', lambda: 95.0)\nc8",
    "%%runs_in measure review\nonnx = passes.on_node('perf 6.4 onnx c1', 'value', lambda: 300.0)",
    "%%runs_in prepare\nRATE = 50  # a stand-in: the measure pass finds the rate",
    "%%runs_in measure review\nRATE = passes.on_node('rate 6.6 capacity', 'value', lambda: 80)",
    "%%runs_in measure review\nprint('6.4d: speed-up', onnx / c8)",
    "line = f'perf_analyzer --request-rate-range {RATE}'  # 6.6c's check, in every pass\nline",
    "passes.finish()",
]


def measure_until(run, capsys, cells: int) -> None:
    """The measure pass, its lease ending after the first `cells` cells."""
    import os

    os.environ["LAB_PASS"] = "measure"
    run(MEASURED, capsys)
    for cell in CELLS[:cells]:
        ok, _ = run(cell, capsys)
        assert ok


def test_a_bundle_cut_after_61_is_reviewed_to_its_last_cell(shell, capsys, monkeypatch):
    measure_until(shell, capsys, 1)  # the lease ended during 6.4's run
    monkeypatch.setenv("LAB_PASS", "review")
    ok, said = shell(MEASURED, capsys)
    assert ok and "stopped before the notebook's end (its last entry: 'perf 6.1 c8'" in said
    ok, said = shell(CELLS[0], capsys)
    assert ok and "95.0" in said  # measured: read back, its last expression shown
    assert shell.ip.user_ns["c8"] == 95.0
    ok, said = shell(CELLS[1], capsys)
    assert ok and said == (
        "(not measured: perf 6.4 onnx c1: the measure pass stopped before it)\n"
    ), said
    outputs = [shell(cell, capsys) for cell in CELLS[2:]]
    assert all(ok for ok, _ in outputs), outputs
    assert outputs[0][1] == ""  # after the cut, the prepare pass's stand-in runs
    assert "(not measured: rate 6.6 capacity" in outputs[1][1]
    assert "this cell needs `onnx`" in outputs[2][1]  # a result of a step not measured
    assert shell.ip.user_ns["line"].endswith("50")  # the check runs on the stand-in
    last = outputs[4][1]
    assert "not measured, so not reviewed here: 6.4, 6.6, 6.4d." in last, last


def test_before_the_cut_an_error_is_still_an_error(shell, capsys, monkeypatch):
    measure_until(shell, capsys, 2)
    monkeypatch.setenv("LAB_PASS", "review")
    shell(MEASURED, capsys)
    ok, said = shell("print(undefined_name)", capsys)
    assert not ok and "NameError" in said


def test_a_whole_bundle_is_reviewed_without_the_guard(shell, capsys, monkeypatch):
    measure_until(shell, capsys, len(CELLS))
    monkeypatch.setenv("LAB_PASS", "review")
    ok, said = shell(MEASURED, capsys)
    assert ok and "stopped before" not in said and not cut_short.STATE["on"]
    assert not any(isinstance(t, cut_short.Guard) for t in shell.ip.ast_transformers)
    with pytest.raises(passes.Stop, match="has no 'perf 9.9'"):  # a notebook changed since
        passes.on_node("perf 9.9", "value", pytest.fail)


@pytest.mark.parametrize("folder", ["../../..", "/tmp", "a/../../b", "..", ""])
def test_an_entry_cannot_send_a_pass_outside_its_bundle(shell, capsys, monkeypatch, folder):
    """Issue 52: a manifest entry whose folder is `../../..` (a bundle downloaded, edited or
    made by someone else) is left out: the measure pass writes that entry inside the bundle,
    the review pass reads nothing outside it."""
    measure_until(shell, capsys, 1)
    bundle = node_calls.STATE["bundle"]
    outside = bundle.folder.parent.parent / "outside"
    outside.mkdir()
    (outside / "printed.txt").write_text("SECRET\n")
    (outside / "value.json").write_text("1\n")
    manifest = json.loads((bundle.folder / "manifest.json").read_text())
    manifest["entries"]["perf 6.1 c8"]["folder"] = folder
    bundles.write_json(bundle.folder / "manifest.json", manifest)
    before = sorted(
        p for p in bundle.folder.parent.parent.rglob("*") if bundle.folder not in p.parents
    )

    monkeypatch.setenv("LAB_PASS", "review")
    ok, said = shell(MEASURED, capsys)
    assert ok and "(left out: 'perf 6.1 c8': the manifest puts its files outside" in said
    ok, said = shell(CELLS[0], capsys)
    assert ok and "SECRET" not in said and "(not measured: perf 6.1 c8" in said

    monkeypatch.setenv("LAB_PASS", "measure")
    shell(MEASURED, capsys)
    assert passes.on_node("perf 6.1 c8", "value", lambda: 96.0) == 96.0
    kept = node_calls.STATE["bundle"].manifest["entries"]["perf 6.1 c8"]["folder"]
    assert (bundle.folder / "entries" / kept / "value.json").read_text().strip() == "96.0"
    after = sorted(
        p for p in bundle.folder.parent.parent.rglob("*") if bundle.folder not in p.parents
    )
    assert after == before and (outside / "value.json").read_text() == "1\n"


def test_each_verdict_is_in_the_bundle_before_the_notebooks_end(
    shell, capsys, monkeypatch, tmp_path
):
    """A claim judged in a cell the review does not run (it needs the node) reaches the review
    of a bundle cut short: the measure pass keeps each verdict as it comes, not only at save()."""
    measure_until(shell, capsys, 1)
    shell(
        "from servelab import claims\nclaims.fact('6.1: placed where its config says', True)",
        capsys,
    )
    monkeypatch.setenv("LAB_PASS", "review")
    shell(MEASURED, capsys)
    claims.RESULTS.clear()
    saved = claims.save(tmp_path / "reviewed")
    kept = saved.read_text()
    assert "6.1: placed where its config says" in kept and "judged in the measure pass" in kept
