"""servelab.exercises.judgement: a verdict shows only after its answer, and decisions are judged on
the student's own rows; every verdict cell of the notebooks waits for its answer."""

import re

import pytest

from labstack import editions
from servelab import claims
from servelab.claims import Measured
from servelab.exercises import NotYet, judgement
from servelab.passes import node_calls


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


# -------------------------------------------------------------- the decisions of notebooks 4 and 6
# Each is asked by its step (steps.STEPS) with the student's own rows; a wrong choice is refused
# with those rows' numbers, a right one accepted in every spelling, and the reason kept beside it.

WHY = "my rows say so"


def decide(step, answer, *evidence, why=WHY):
    return judgement.decide(step, answer, why, *evidence)


def refused(step, answer, *evidence) -> str:
    with pytest.raises(NotYet) as caught:
        decide(step, answer, *evidence)
    said = str(caught.value)
    assert said.startswith(f"{step}: not ") and "\n" not in said and said.endswith("."), said
    return said


def test_47_real_or_noise_is_judged_on_the_two_intervals():
    one, two = run(312), run(607)  # the H100's 4.7: far apart
    assert decide("4.7", "Real", one, two) == "real"
    said = refused("4.7", "noise", one, two)
    assert (
        "one worker 312.0/s (windows 302.6 to 321.4), two 607.0/s (windows 588.8 to 625.2)" in said
    )
    close = run(300), run(305)  # a 2-core machine where the second worker adds little
    assert decide("4.7", "noise", *close) == "noise"
    said = refused("4.7", "real", *close)
    assert "overlap from 295.8 to 309.0, so noise could put either above the other" in said
    assert "90" not in said  # the numbers, never a rule


def test_47_keeps_the_reason_and_asks_for_one():
    claims.DECISIONS.clear()
    decide("4.7", "real", run(312), run(607), why="two workers 607 against 312, no overlap")
    kept = claims.DECISIONS["4.7"]
    assert kept["choice"] == "real" and "607 against 312" in kept["reason"]
    assert "one worker 312.0/s" in kept["judged_on"]
    with pytest.raises(NotYet, match="write your reason beside your choice"):
        decide("4.7", "real", run(312), run(607), why="\n...\n")


class Run:
    """A perf run as the judges read it: its row, and its p95 with the windows' spread."""

    def __init__(self, **row):
        self.row = row

    def measured(self, column):
        return run(self.row[column])

    @property
    def windows(self):
        latency = self.row["avg_latency_ms"]
        return [{"avg_latency_ms": latency * f, "throughput_infer_s": 1.0} for f in (0.97, 1, 1.03)]


def test_63g_the_cheapest_instances_that_meet_the_objective():
    per_device = {1: Run(p95_ms=95.0), 2: Run(p95_ms=58.0), 4: Run(p95_ms=31.0)}
    assert decide("6.3g", 2, per_device, 60.0) == 2  # 58 (56.3 to 59.7) is under 60
    assert decide("6.3g", "2.0", per_device, 60.0) == 2  # a number in any spelling
    said = refused("6.3g", 4, per_device, 60.0)
    assert (
        "2 per device already kept your p95 at 58.0 ms (windows 56.3 to 59.7), under the "
        "objective of 60.0 ms, and costs less" in said
    )
    said = refused("6.3g", 1, per_device, 60.0)
    assert (
        "with 1 per device your p95 was 95.0 ms (windows 92.1 to 97.9), over the objective" in said
    )
    assert "none" in refused("6.3g", "none", per_device, 60.0)
    slow = {n: Run(p95_ms=200.0 / n) for n in (1, 2, 4)}  # none meets 30 ms
    assert decide("6.3g", "none", slow, 30.0) == "none"
    said = refused("6.3g", 4, slow, 30.0)
    assert "with 4 per device your p95 was 50.0 ms" in said
    # noise decides nothing: 61 (59.2 to 62.8) may be under 60, so 2 and 4 are both accepted
    edge = {1: Run(p95_ms=95.0), 2: Run(p95_ms=61.0), 4: Run(p95_ms=31.0)}
    assert decide("6.3g", 2, edge, 60.0) == 2 and decide("6.3g", 4, edge, 60.0) == 4


def test_63h_the_bottleneck_is_read_off_the_row():
    # the H100's four per device: each instance busy all the time, the GPU at 68 %
    h100 = Run(busy_U=0.99, gpu0_util_pct=67.6, cpu_util_pct=40.0, waiting_N=3.8)
    assert decide("6.3h", "instances", h100) == "instances"
    said = refused("6.3h", "GPU", h100)
    assert said == (
        "6.3h: not 'GPU': during your run each instance was busy 99% of the time (busy_U), "
        "GPU 0 68%, the CPU 40%, 3.8 requests waited on average (waiting_N): the GPU was not "
        "full."
    )
    assert "one of them was full" in refused("6.3h", "load", h100)
    # two GPUs, eight instances at 8 in flight: nothing full, nothing waits
    idle = Run(
        busy_U=0.62, gpu0_util_pct=31.0, gpu1_util_pct=29.0, cpu_util_pct=55.0, waiting_N=0.1
    )
    assert decide("6.3h", "load", idle) == "load"
    assert "the instances were not full" in refused("6.3h", "instances", idle)
    # a 2-core machine: the cores are full, and so is every instance waiting for them
    cpu = Run(busy_U=0.97, cpu_util_pct=98.0, waiting_N=4.0)
    assert decide("6.3h", "CPU", cpu) == "CPU" and decide("6.3h", "instances", cpu)
    assert "the run reported no GPU utilisation" in refused("6.3h", "gpu", cpu)


def test_66h_the_cheapest_configuration_for_the_load():
    # the H100 at 100 % of capacity: 341 ms without batching, 10.1 ms with it, objective 22 ms
    options = {
        "one instance": Run(avg_latency_ms=341.0),
        "batching": Run(avg_latency_ms=10.1),
    }
    assert decide("6.6h", "Batching", options, 22.0) == "batching"
    said = refused("6.6h", "one instance", options, 22.0)
    assert (
        "with one instance your mean latency was 341.0 ms (windows 330.8 to 351.2), over the"
        " objective of 22.0 ms" in said
    )
    said = refused("6.6h", "more instances", options, 22.0)
    assert "batching already kept your mean latency at 10.1 ms" in said
    # the 2-core CPU: batching cannot lift the capacity, neither meets it
    cpu = {"one instance": Run(avg_latency_ms=900.0), "batching": Run(avg_latency_ms=700.0)}
    assert decide("6.6h", "more instances", cpu, 120.0) == "more instances"
    assert "your mean latency was 700.0 ms" in refused("6.6h", "batching", cpu, 120.0)


def test_a_blank_decision_waits_for_the_review_pass_in_the_measure_pass(capsys):
    with pytest.raises(NotYet, match="replace the `...`"):
        decide("4.7", ..., run(1), run(2))  # no pass started: it stops
    node_calls.STATE["pass"] = "measure"
    try:
        assert decide("4.7", ..., run(1), run(2)) is None
    finally:
        node_calls.STATE["pass"] = None
    assert "decide in the review pass" in capsys.readouterr().out


def test_a_choice_among_numbers_takes_any_spelling_of_the_number():
    rows = {1: run(86), 2: run(135), 4: run(271)}
    for spelling in (4, "4", "4.0", 4.0, " 4 "):
        assert judgement.fewest_near_best(spelling, "6.3", "instances", rows) == 4


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
