"""docs/timing_plan.md's table is what labstack/timing.py computes from the committed reference
run and the notebook sources, and the counting behind it counts what the student writes."""

import json

from labstack import timing


def test_the_committed_plan_matches_the_reference_and_the_sources():
    assert timing.main(["--check"]) == 0, "docs/timing_plan.md is stale: run `make timing`"


def test_what_the_student_writes_is_counted_by_the_check_after_it():
    source = """# %%
line = (
    ### BEGIN SOLUTION
    "perf_analyzer -m m --concurrency-range 8"
    ### END SOLUTION
)
# %%
line = exercises.perf_line(line, "6.1", "8 in flight", needs={})
# %%
text = (
    ### BEGIN SOLUTION
    "instance_group [ { count: 2 } ]"
    ### END SOLUTION
)
# %%
exercises.config_fragment(text, "6.3", "two", needs={})
claims.predict("x", None)
# %% [markdown]
# **Your answer:** *(double-click)*
# %%
answer_61 = '''
### BEGIN SOLUTION
the queue grew
### END SOLUTION
'''
# %%
with judgement.verdict_after(answer_61, "6.1"):
    claims.at_least("x", 1, 0)
# %%
deploy = (
    ### BEGIN SOLUTION
    2
    ### END SOLUTION
)
# %%
deploy = judgement.fewest_near_best(deploy, "6.3", "instances", rows)
# %%
exercises.file_edit(path, before, "6.3", "count: 2")
services.use_fastapi_backend("onnx")
"""
    assert timing.writing(source) == {
        "perf_line": 1,
        "config_fragment": 1,
        "answer": 2,  # one before its verdict, one in a markdown cell
        "decision": 1,
        "file_edit": 1,
        "prediction": 1,
    }
    assert timing.host_commands(source) == 1
    assert timing.prose_words("# %% [markdown]\n# Three short words\n# %%\nx = 1\n") == 3


def test_a_run_at_other_windows_than_the_class_is_labelled(tmp_path, monkeypatch):
    monkeypatch.setattr(timing, "REPO_ROOT", tmp_path)
    page = tmp_path / "06_triton_benchmarks"  # a setup's page for the notebook
    page.mkdir()
    (page / "runs.json").write_text(
        json.dumps({"triton": {"seconds": 120, "settings": {"LAB_PERF_INTERVAL_MS": "3000"}}})
    )
    minutes, note = timing.machine_minutes(tmp_path, "triton", "06_triton_benchmarks")
    assert minutes == 2 and "NOT the class's 5000" in note
    (page / "06_triton_benchmarks_cell_times.json").write_text(
        json.dumps([{"cell": 1, "seconds": 30}, {"cell": 2, "seconds": 60}])
    )
    minutes, note = timing.machine_minutes(tmp_path, "triton", "06_triton_benchmarks")
    assert minutes == 1.5 and "cell_times" in note
