"""maintainers.reference.script_runner: a jupytext source run cell by cell, as a kernel would, each
cell timed."""

import json
from pathlib import Path

import pytest

from maintainers.reference import script_runner

SOURCE = """# %% [markdown]
# A markdown cell is not run: print("never")
# %%
import asyncio
OUT = {out!r}
seen = ["first"]
# %%
await asyncio.sleep(0.05)
seen.append("awaited")
# %%
seen.append(len(seen))
with open(OUT, "w") as f:
    f.write(repr(seen))
"""


def test_cells_share_one_namespace_and_each_is_timed(tmp_path):
    source, out, times = tmp_path / "nb.py", tmp_path / "out.txt", tmp_path / "times.json"
    source.write_text(SOURCE.replace("{out!r}", repr(str(out))))
    script_runner.run(source, times)
    assert out.read_text() == "['first', 'awaited', 2]"
    cells = json.loads(times.read_text())
    assert [c["cell"] for c in cells] == [1, 2, 3]
    assert cells[1]["first_line"] == "await asyncio.sleep(0.05)"
    assert cells[1]["seconds"] >= 0.05 > cells[0]["seconds"] - 1


def test_a_failing_cell_stops_the_run_and_keeps_the_times_so_far(tmp_path):
    source, times = tmp_path / "nb.py", tmp_path / "times.json"
    source.write_text("# %%\nx = 1\n# %%\nraise RuntimeError('cell two')\n# %%\nx = 3\n")
    with pytest.raises(RuntimeError, match="cell two"):
        script_runner.run(source, times)
    assert [c["cell"] for c in json.loads(times.read_text())] == [1]


RESUMABLE = """# %%
import json
from pathlib import Path
from pathlib import Path
OUT = Path({out!r})
def double(x):
    return 2 * x
class Meter:
    def __init__(self, base):
        self.base = base
meter = Meter(10)          # of a class the notebook defines: does not pickle, made again
rows = [double(1)]
ran = Path({ran!r})
ran.write_text(ran.read_text() + "a" if ran.exists() else "a")
# %%
rows.append(double(meter.base))
ran.write_text(ran.read_text() + "b")
# %%
rows.append(len(rows))
ran.write_text(ran.read_text() + "c")
OUT.write_text(json.dumps(rows))
"""


def test_a_run_stopped_between_cells_is_taken_up_where_it_stopped(tmp_path, capsys):
    """--stop-after/--state: the second process gets the first's values (pickled, or made again
    by their assignment), its functions and classes, and runs each cell once in all."""
    ran, out = tmp_path / "ran.txt", tmp_path / "rows.json"
    source, state, times = tmp_path / "nb.py", tmp_path / "nb.state", tmp_path / "times.json"
    source.write_text(RESUMABLE.format(out=str(out), ran=str(ran)))
    assert script_runner.run(source, times, stop_after_s=0, state=state) is False
    assert state.exists() and ran.read_text() == "a" and not out.exists()
    assert "1 to make again" in capsys.readouterr().out  # meter
    assert script_runner.run(source, times, stop_after_s=0, state=state) is False
    assert script_runner.run(source, times, stop_after_s=0, state=state) is True
    assert ran.read_text() == "abc"  # no cell ran twice
    assert json.loads(out.read_text()) == [2, 20, 2]
    assert [c["cell"] for c in json.loads(times.read_text())] == [1, 2, 3]
    assert not state.exists()  # finished: the next run starts from the top
    printed = capsys.readouterr().out
    assert "resumed at cell 2" in printed and "resumed at cell 3" in printed
    assert "meter = Meter(10)" in printed  # said what it ran again


def test_a_state_of_another_version_of_the_notebook_is_refused(tmp_path):
    source, state = tmp_path / "nb.py", tmp_path / "nb.state"
    source.write_text("# %%\nx = 1\n# %%\ny = 2\n")
    assert script_runner.run(source, None, stop_after_s=0, state=state) is False
    source.write_text("# %%\nx = 5\n# %%\ny = 2\n")
    with pytest.raises(RuntimeError, match="another version"):
        script_runner.run(source, None, stop_after_s=0, state=state)


def test_the_reference_run_takes_a_stopped_notebook_up_in_the_next_call(tmp_path, monkeypatch):
    """maintainers/reference/run_reference.py with LAB_RESUMABLE_S: each call runs the notebook's
    cells until the time is up, leaves the stack up and the run's state in OUT, and the same call
    again takes it up; runs.json counts the calls and holds the exit status once it finished, and
    the stack comes down only then. The stack and the artifacts are stood in for; the notebook runs
    in script_runner for real."""
    import importlib.util

    from labstack import artifacts, launcher

    spec = importlib.util.spec_from_file_location(
        "run_reference",
        Path(__file__).resolve().parent.parent / "maintainers/reference/run_reference.py",
    )
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    repo, out = tmp_path / "repo", tmp_path / "out"
    (repo / "notebook_sources").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    out.mkdir()
    (repo / "notebook_sources" / "07_fake.py").write_text(
        "# %%\nprint('cell one')\n# %%\nprint('cell two')\n# %%\nprint('cell three')\n"
    )
    downs = []
    monkeypatch.setattr(reference, "REPO", repo)
    monkeypatch.setattr(reference, "PARTS", {"hardware": "07_fake"})
    monkeypatch.setattr(reference, "versions", lambda: {"gpus": 0})
    monkeypatch.setattr(reference.shutil, "which", lambda name: None)
    monkeypatch.setattr(artifacts, "build", lambda: {"weights": "untrained"})
    monkeypatch.setattr(launcher, "up", lambda **kw: None)
    monkeypatch.setattr(launcher, "down", lambda: downs.append(1))
    monkeypatch.setattr(launcher, "read_state", lambda: {})
    monkeypatch.setattr(launcher, "client_urls", lambda state: {})
    monkeypatch.setenv("LAB_STATE_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("LAB_RESUMABLE_S", "0")  # stop after every cell
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))

    for call in (1, 2):
        runs = reference.run_parts(out, ["hardware"], quick=False)
        assert runs["hardware"]["rc"] is None and runs["hardware"]["calls"] == call
        assert runs["hardware"]["stopped_after_s"] == 0 and downs == []  # the stack stays up
        assert (out / "07_fake.state").exists()
    runs = reference.run_parts(out, ["hardware"], quick=False)
    assert runs["hardware"]["rc"] == 0 and runs["hardware"]["calls"] == 3
    assert "stopped_after_s" not in runs["hardware"] and downs == [1]
    assert not (out / "07_fake.state").exists()
    log = (out / "07_fake.log").read_text()
    assert [log.count(f"cell {n}") for n in ("one", "two", "three")] == [1, 1, 1]
    assert json.loads((out / "runs.json").read_text())["hardware"]["calls"] == 3
    times = json.loads((out / "07_fake_cell_times.json").read_text())
    assert [c["cell"] for c in times] == [1, 2, 3]


PASSES = """# %%
N = "the server's"
# %%
# %%runs_in prepare
N = "a prepare-pass stand-in"
# %%
# %%runs_in measure review
seen = N
# %%
with open({out!r}, "w") as f:
    f.write(seen)
"""


@pytest.mark.parametrize("lab_pass", ["measure", "prepare"])
def test_a_cell_runs_only_in_the_passes_its_first_line_names(tmp_path, monkeypatch, lab_pass):
    """Notebook 6's `N_GPUS = 2` stand-in is `%%runs_in prepare`: in the measure pass it must not
    overwrite the server's count (a one-GPU server on the two-H200 host was asked for GPU 1).
    The times keep a line per cell, named by what it does, not by its marker."""
    source, out, times = tmp_path / "nb.py", tmp_path / "out.txt", tmp_path / "times.json"
    source.write_text(PASSES.replace("{out!r}", repr(str(out))))
    monkeypatch.setenv("LAB_PASS", lab_pass)
    if lab_pass == "prepare":  # the measure cell is skipped there: `seen` is never set
        with pytest.raises(NameError, match="seen"):
            script_runner.run(source, times)
        return
    script_runner.run(source, times)
    assert out.read_text() == "the server's"
    first = [c["first_line"] for c in json.loads(times.read_text())]
    assert first == ['N = "the server\'s"', 'N = "a prepare-pass stand-in"', "seen = N", first[3]]
