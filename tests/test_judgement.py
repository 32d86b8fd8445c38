"""servelab.exercises.judgement: a verdict shows only after its answer, and decisions are judged on
the student's own rows; every verdict cell of the notebooks waits for its answer."""

import re

import pytest

from labstack import editions
from servelab.claims import Measured
from servelab.exercises import NotYet, judgement


def test_a_verdict_prints_only_once_its_answer_is_written(capsys):
    for blank in ("\n...\n", "", Ellipsis):
        with judgement.verdict_after(blank, "6.1"):
            print("HOLDS: the secret verdict")
            computed = 42
        out = capsys.readouterr().out
        assert "secret" not in out and "Write your answer in the cell above" in out
        assert computed == 42  # the cell still computes what later cells use
    with judgement.verdict_after("\nThe queue grew linearly.\n", "6.1"):
        print("HOLDS: the secret verdict")
    assert "secret" in capsys.readouterr().out


def run(value):
    return Measured(value, value * 0.97, value * 1.03, "3 measurement windows")


def test_the_fewest_copies_near_the_best_is_judged_on_the_rows():
    rows = {1: run(86), 2: run(135), 4: run(271)}  # the H100's 6.3: only 4 is near the best
    assert judgement.fewest_near_best(4, "6.3", "instances", rows) == 4
    with pytest.raises(NotYet, match=r"2 served 135/s, under 90% of the best \(271/s\)"):
        judgement.fewest_near_best(2, "6.3", "instances", rows)
    flat = {1: run(300), 2: run(310), 4: run(305)}  # a machine where copies add nothing
    assert judgement.fewest_near_best("1", "6.3", "instances", flat) == 1
    with pytest.raises(NotYet, match="fewer already serve 90% of the best"):
        judgement.fewest_near_best(4, "6.3", "instances", flat)
    with pytest.raises(NotYet, match="replace the `...`"):
        judgement.fewest_near_best(..., "6.3", "instances", flat)
    with pytest.raises(NotYet, match="not one of"):
        judgement.fewest_near_best(3, "6.3", "instances", flat)
    # within the windows' noise of 90 %, either side is accepted
    edge = {1: run(89.5), 2: run(100)}
    assert judgement.fewest_near_best(1, "4.7", "workers", edge) == 1
    assert judgement.fewest_near_best(2, "4.7", "workers", edge) == 2


def test_the_bottleneck_is_what_was_full():
    assert judgement.bottleneck("instances", "6.4", 0.98, 77.0, "GPU 0") == "instances"
    with pytest.raises(NotYet, match=r"busy 98% of the time \(busy_U\) and GPU 0 77 %"):
        judgement.bottleneck("device", "6.4", 0.98, 77.0, "GPU 0")
    assert judgement.bottleneck("Device", "6.4", 0.98, 99.0, "the CPU") == "device"
    assert judgement.bottleneck("neither", "6.4", 0.5, 40.0, "GPU 0") == "neither"
    with pytest.raises(NotYet):
        judgement.bottleneck("neither", "6.4", 0.95, None, "GPU 0")


def test_a_number_is_judged_between_the_rows_that_bound_it():
    assert judgement.number_in(300, "6.6", "the rate", 273, 455, why="x") == 300
    assert judgement.number_in("273", "6.6", "the rate", 273, 455, why="x") == 273
    with pytest.raises(NotYet, match="455 is too high: at 455/s your run"):
        judgement.number_in(455, "6.6", "the rate", 273, 455, why="at 455/s your run ...")
    with pytest.raises(NotYet, match="too low"):
        judgement.number_in(100, "6.6", "the rate", 273, 455, why="x")
    with pytest.raises(NotYet, match="is a number"):
        judgement.number_in("fast", "6.6", "the rate", 273, 455, why="x")


@pytest.mark.parametrize("source", editions.sources(), ids=lambda p: p.name)
def test_every_verdict_waits_for_its_answer(source):
    """After each "What do you see, and why?" comes the student's answer cell (a blank in the
    student edition), and the folded verdict after it runs under verdict_after on that answer. A
    question answered in a markdown cell has no verdict of its own after it."""
    cells = editions.student(source).cells
    code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
    for i, cell in enumerate(cells):
        question = re.search(r"(?m)^\*\*What do you see, and why\?\*\*", cell.source)
        if cell.cell_type != "markdown" or not question:
            continue
        following = [j for j in code if j > i][:2]
        if "**Your answer:**" in cell.source:
            hidden = cells[following[0]].metadata.get("jupyter", {}).get("source_hidden")
            assert not hidden, f"{source.name} cell {i}: a verdict after a markdown answer"
            continue
        answer = re.fullmatch(r'(answer_\w+) = """\n\.\.\.\n"""', cells[following[0]].source)
        assert answer, f"{source.name} cell {i}: no answer cell after the question"
        verdict = cells[following[1]]
        if verdict.metadata.get("jupyter", {}).get("source_hidden"):
            # its first line may say the passes it runs in (servelab/passes/cells.py)
            code_of_it = re.sub(r"^%%runs_in[^\n]*\n", "", verdict.source)
            assert code_of_it.startswith(f"with judgement.verdict_after({answer[1]}, "), (
                f"{source.name} cell {following[1]}: a verdict that does not wait for its answer"
            )
