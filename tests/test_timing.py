"""The lease plan (maintainers/timing/): the pages quote what it computes from the notebooks and the
GPU reference, and the counting finds every kind of step a notebook asks for, in its pass."""

import json
import re
from collections import Counter

import pytest

from maintainers import timing
from maintainers.timing import background, machine, notebook, pages, plan, rules, steps, walkthrough

SMALL = '''# %% [markdown]
# # A notebook
# Read this. In a terminal on the node, leave `nvtop` running.

# %%
PASS = passes.start("99_small")

# %% [markdown]
# ## 1.1 Lines
# **Predict.** How many?

# %%
claims.predict("1.1 how many", None, why="")

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m m -u {HOST} --concurrency-range 8"
    ### END SOLUTION
)

# %%
NEEDS = exercises.on_every_gpu(2, 2)
line = exercises.perf_line(line, "1.1", "8 in flight", needs={})

# %%
%%runs_in measure review
print(exercises.file_edit(path, before, "1.1", "count: 2", needs={}))
services.use_fastapi_backend("onnx")

# %% [markdown]
# Tunnel first: `ssh -L 8000:127.0.0.1:8000 cc@<floating IP>`, then *Try it out*.
#
# ```bash
# # a comment line is not a command
# cd docker
# docker compose up -d
# ```
#
# **What do you see, and why?** How busy was it, and how many waited? Why?

# %%
answer_11 = """
### BEGIN SOLUTION
busy
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
%%runs_in measure review
with judgement.verdict_after(answer_11, "1.1"):
    pass

# %% [markdown]
# **Your observation.** `nvidia-smi` on the node lists stubs. How many?

# %%
%%runs_in measure review
seen = (
    ### BEGIN SOLUTION
    2
    ### END SOLUTION
)

# %%
%%runs_in measure review
seen = judgement.number_in(seen, "1.1", "stubs", 2, 3, why="")

# %%
%%runs_in measure review
deploy = (
    ### BEGIN SOLUTION
    2
    ### END SOLUTION
)

# %%
%%runs_in measure review
deploy = judgement.fewest_near_best(deploy, "1.1", "instances", {})

# %% [markdown]
# **Question.** Which shape, and why? Try it: a copy of `classify`.
#
# **Your answer:** *(double-click)*
#
# **Hand in** and answer:
#
# 1. What would you answer, and what would you try first?
# 2. Would it change?

# %% [markdown]
# ## B. Local mode (no Docker)
# ```bash
# make up
# ```

# %% [markdown]
# ## 1.2 Going further (optional)

# %%
claims.predict("never counted", None)
'''


@pytest.fixture
def small(tmp_path, monkeypatch):
    (tmp_path / "99_small.py").write_text(SMALL)
    monkeypatch.setattr(notebook, "SOURCES", tmp_path)
    return notebook.cells("99_small")


def test_the_pages_quote_what_the_notebooks_and_the_reference_give():
    assert timing.stale() == [], "a page is stale: run `make timing`"


def test_the_plan_opens_with_its_table_and_what_it_asks_of_the_instructor():
    """docs/timing_plan.md answers first (STYLE: an instructor's page): its first screen is the
    summary table and "What it asks of you", each action with its minutes; how the minutes are
    computed (the rules' sources, the walkthrough's models) comes after a fold."""
    text = pages.PLAN.read_text()
    first_screen = "\n".join(text.splitlines()[:40])
    first_table = next(line for line in text.splitlines() if line.startswith("|"))
    assert first_table.startswith("| notebook | prepare, before the lease |"), first_table
    assert "<!-- timing summary: end -->" in first_screen
    asks = first_screen.split("## What it asks of you", 1)[1].split("\n## ", 1)[0]
    actions = [line for line in asks.splitlines() if line.startswith("- **")]
    assert 4 <= len(actions) <= 6, actions
    assert asks.count("<!-- timing:") >= 5  # the minutes, filled by make timing
    for word in ("keystroke", "Carver", "gear", "TCP", "Card, Moran"):
        assert word not in first_screen, word
    headings = re.findall(r"^(#+ .*)$", text, re.M)
    fold = headings.index("## How the minutes are computed")
    assert headings.index("## What it asks of you") < fold
    below = [h for h in headings[fold + 1 :] if h.startswith("## ")]
    assert below == [], (
        f"below the fold, everything is a part of how the minutes are computed: {below}"
    )
    instructors = re.sub(r"\s+", " ", pages.GUIDE.read_text() + pages.CLASS_README.read_text())
    for cited in re.findall(r'timing_plan\.md, "([^"]+)"', instructors):
        assert any(cited in h for h in headings), f"docs cite a section the plan lacks: {cited}"


def test_a_changed_figure_is_put_back_between_its_markers():
    text = (
        "lease: <!-- timing:measure -->99 min<!-- /timing -->, <!-- minutes:x -->1<!-- /minutes -->"
    )
    filled = pages.fill(text, {}, {"measure": "126 min"}, {"x": "prepare 3"})
    assert filled == (
        "lease: <!-- timing:measure -->126 min<!-- /timing -->, "
        "<!-- minutes:x -->prepare 3<!-- /minutes -->"
    )
    block = "a\n<!-- timing t: begin (make timing) -->\nold\n<!-- timing t: end -->\nb"
    assert "new" in pages.fill(block, {"t": "new"}, {}, {}) and "old" not in pages.fill(
        block, {"t": "new"}, {}, {}
    )


def test_every_kind_of_step_is_found_in_its_pass(small):
    found = Counter()
    for s in steps.find(small):
        found[(s.pass_, s.kind)] += s.amount if s.kind in ("answer", "terminal command") else 1
    assert found[("prepare", "perf_line")] == 1
    assert found[("prepare", "prediction")] == 1  # the optional section's is not counted
    assert found[("review", "answer")] == 3  # "How busy was it, and how many waited? Why?"
    assert found[("review", "decision")] == 1 and found[("measure", "observation")] == 1
    assert found[("measure", "editor")] == 1 and found[("measure", "host command")] == 1
    assert found[("measure", "tunnel")] == 1 and found[("measure", "swagger")] == 1
    assert found[("measure", "node terminal")] == 1 and found[("measure", "nvidia-smi")] == 1
    assert found[("measure", "terminal command")] == 2  # the Docker block's, not its comment
    # nor the local-mode block's
    assert found[("prepare", "question")] == 1 and found[("prepare", "try it")] == 1
    assert found[("review", "hand-in")] == 1
    assert {p for p, k in found if k == "open notebook"} == {"prepare", "measure", "review"}
    # a cell runs in the passes its first line names
    assert found[("prepare", "run cell offline")] == 5  # start, predict, line, check, answer
    assert found[("measure", "run cell")] == 12  # the 11 code cells, and the try-it's own


def test_an_answer_counts_the_questions_its_prompt_asks(small):
    [answer] = [s for s in steps.find(small) if s.kind == "answer"]
    assert answer.amount == 3
    assert steps.questions("**What do you see, and why?** Compare the rows.") == 0
    assert steps.questions("Which part changed, and why is it smaller? Write it.") == 2
    assert steps.questions("At the lowest rate, could batching help?") == 1
    assert steps.questions("A request waits at once: what for, and which assumption broke?") == 2
    assert steps.questions("What does `a, how b?` print?") == 1  # code is not a question


def test_the_class_notebooks_have_each_step_the_issue_names():
    """The tunnel, Swagger, the Flask page, nvtop, the editor for each file edit, each printed
    command, and every wait at its anchor: found in the notebooks as they are."""
    kinds = {nb: Counter(s.kind for s in steps.find(notebook.cells(nb))) for nb in plan.NOTEBOOKS}
    for nb, needed in {
        "02_provision": ("ssh login", "clean-up"),
        "03_fastapi_setup": ("jupyter url", "terminal command", "curl_line"),
        "04_fastapi_benchmarks": ("tunnel", "swagger", "browser page", "host command"),
        "05_triton_setup": ("terminal command", "function", "question"),
        "06_triton_benchmarks": ("node terminal", "nvidia-smi", "editor", "perf_line"),
    }.items():
        assert all(kinds[nb][k] for k in needed), (nb, kinds[nb])
    for nb in plan.NOTEBOOKS:
        source = (notebook.SOURCES / f"{nb}.py").read_text()
        core = source.split("(optional")[0]  # every optional section comes after the core
        assert kinds[nb]["editor"] == core.count("exercises.file_edit("), nb
        assert kinds[nb]["prediction"] == core.count("claims.predict("), nb
        assert kinds[nb]["answer"] == len(re.findall(r"judgement\.verdict_after\(answer", core))
    found = [s for nb in plan.NOTEBOOKS for s in steps.waits(notebook.cells(nb))]
    anchored = {s.what for s in found if s.kind == "wait"}
    assert anchored == {w.name for w in rules.WAITS}, "a wait's anchor is gone from its notebook"
    [start] = [s for s in found if s.kind == "background"]  # notebook 2 starts the image build
    assert start.notebook == "02_provision" and start.what == rules.BACKGROUND_NAME


def test_machine_minutes_are_the_pages_carried_over_by_runs(tmp_path):
    page = tmp_path / "h100" / "06_triton_benchmarks"
    (page / "results").mkdir(parents=True)
    (page / "06_triton_benchmarks_cell_times.json").write_text(
        json.dumps([{"cell": 1, "seconds": 30}, {"cell": 2, "seconds": 60}])
    )
    (page / "runs.json").write_text(
        json.dumps({"triton": {"seconds": 90, "settings": {"LAB_PERF_INTERVAL_MS": "3000"}}})
    )
    for name in ("a", "b", "c"):
        (page / "results" / f"perf_{name}.csv").write_text("x\n")
    (page / "06_triton_benchmarks.log").write_text("one two\n50%|##| 1/2 [00:01, 3.1it/s]\n")

    def cell(index, source, section="6.6", passes=("measure",)):
        return notebook.Cell("06_triton_benchmarks", index, "code", source, section, passes, False)

    loop = "%%runs_in measure review\nfor r in RATES[1:]:\n    onnx_run(r)\nc = measure(1)"
    cells = [
        cell(0, "RATES = [int(f) for f in (1, 2, 3)]"),
        cell(1, loop, passes=("measure", "review")),
        cell(2, "measure(2)", section="6.7 (optional)"),
    ]
    assert machine.runs_by_cell(cells) == {0: 0, 1: 3}  # the loop twice; optional left out
    found = machine.machine("06_triton_benchmarks", cells, tmp_path)
    assert found.seconds == 90 and found.per_run == 30 and found.output_words == 2
    assert "NOT the class's 5000" in found.note
    more = machine.machine("06_triton_benchmarks", [*cells, cell(3, "measure(3)")], tmp_path)
    assert more.runs_now == 4 and more.seconds == 120 and "now makes 4 runs" in more.note


def test_reading_in_the_lease_costs_only_what_the_boot_does_not_cover():
    nb = plan.notebook("02_provision")
    read = sum(plan.minutes(s) for s in nb.steps if s.kind in ("read", "read code"))
    assert read > 0 and nb.by[("measure", "reading")] == pytest.approx(
        max(0.0, read - nb.by[("measure", "waits")])
    )


def test_a_prepared_image_shortens_only_the_waits():
    fresh, image = plan.plan(), plan.plan(prepared_image=True)
    for a, b in zip(fresh, image):
        for key, minutes in a.by.items():
            if key not in (("measure", "waits"), ("measure", "reading")):
                assert b.by.get(key) == pytest.approx(minutes), (a.name, key)
    assert plan.totals(image)["measure"] < plan.totals(fresh)["measure"]


def test_the_walkthrough_orders_its_students_and_shares_the_measurement():
    walks = walkthrough.estimate()
    fresh = plan.plan()
    for p in ("prepare", "measure", "review"):
        fast, median, slow = (
            sum(walkthrough.pass_total(by, p) for by in walks[s.name].values())
            for s in walkthrough.STUDENTS
        )
        assert 0 < fast < median < slow, p
    measured = sum(
        by[("measure", "machine (measured)")]
        for by in walks["median"].values()
        if ("measure", "machine (measured)") in by
    )
    assert measured == pytest.approx(sum(nb.machine.seconds for nb in fresh) / 60)


def test_the_parts_are_those_the_build_script_builds_in_its_order():
    script = (notebook.REPO_ROOT / "docker" / "build_images.sh").read_text()
    parts = re.search(r"^PARTS=\((.*)\)$", script, flags=re.M).group(1).split()
    assert list(background.PARTS) == parts


def _step(kind, what="", cell=0, notebook_="02_provision", amount=0.0):
    return steps.Step(notebook_, cell, "", "measure", kind, amount, what)


def test_the_lease_pays_only_what_is_left_of_the_build_at_its_wait():
    """A build started at minute 0: a minute of the student's steps, a wait that downloads beside
    it (2 alone: 4 shared, while the build does 2), the FastAPI part (4.5) waited for at minute 5
    (1.5 left), 4 minutes of steps, the ONNX part (1.5) waited for (built), then the Triton part
    (8), of which 2.5 was done. Without the start, each part is built at its wait, in full."""
    waits = {w.part: w.name for w in rules.WAITS if w.part}
    downloads = next(w.name for w in rules.WAITS if w.downloads)
    lease = [
        _step("background", rules.BACKGROUND_NAME, 0),
        _step("run cell", cell=1, amount=1.0),
        _step("wait", downloads, 2, amount=2.0),
        _step("wait", waits["fastapi"], 3, amount=4.5),
        _step("run cell", cell=4, amount=4.0),
        _step("wait", waits["onnx"], 5, amount=1.5),
        _step("wait", waits["triton"], 6, amount=8.0),
    ]
    timeline = background.lease(lease, lambda s: s.amount, ["02_provision"])
    assert timeline.costs == pytest.approx([0, 1, 4, 1.5, 4, 0, 5.5])
    assert timeline.contention == pytest.approx(2.0) and timeline.shared_until == pytest.approx(5)
    fastapi, onnx, triton = (timeline.parts[p] for p in ("fastapi", "onnx", "triton"))
    assert (fastapi.reached, fastapi.paid, fastapi.built) == pytest.approx((5, 1.5, 6.5))
    assert (onnx.built, onnx.reached, onnx.paid) == pytest.approx((8, 10.5, 0))
    assert (triton.began, triton.paid, timeline.ended) == pytest.approx((8, 5.5, 16))
    alone = background.lease(lease[1:], lambda s: s.amount, ["02_provision"])
    assert alone.costs == [s.amount for s in lease[1:]] and alone.started is None


def test_both_estimates_time_the_build_by_the_same_rule_and_it_ends_before_the_gpu_runs():
    """The plan and every walkthrough student: what each notebook's waits add up to is what the
    timeline paid; the build ends before notebook 4's first GPU run (else the runs would share
    the node's CPU and disk with it), and the model files' download beside it ends before the
    build reaches NVIDIA's image (the contention rule assumes the build's pip there)."""
    fresh, timeline = plan.timed(plan.NOTEBOOKS)
    timelines = {"plan": timeline} | {name: t for name, (_, t) in walkthrough.walks().items()}
    for name, t in timelines.items():
        assert t.started is not None and set(t.parts) == set(background.PARTS), name
        assert t.ended < t.first_run, (name, t.ended, t.first_run)
        assert t.shared_until <= t.parts["triton"].began, name
        for part in t.parts.values():
            assert part.paid == pytest.approx(max(0.0, part.built - part.reached)), (name, part)
            assert part.paid == 0, (name, part)  # docs/timing_plan.md: built before its wait
    waits = sum(nb.by[("measure", "waits")] for nb in fresh)
    paid = sum(c for nb in fresh for s, c in zip(nb.steps, nb.costs) if s.kind == "wait")
    assert waits == pytest.approx(paid)
    fastapi = next(w for w in rules.WAITS if w.part == "fastapi")
    alone = plan.notebook("03_fastapi_setup")  # no start before it: a self-paced host
    assert alone.by[("measure", "waits")] >= fastapi.minutes
