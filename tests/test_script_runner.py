"""labstack.script_runner: a jupytext source run cell by cell, as a kernel would, each cell
timed."""

import json

import pytest

from labstack import script_runner

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
