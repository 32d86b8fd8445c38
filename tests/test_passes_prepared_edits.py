"""The edits a student makes in the prepare pass are made on the node's own file by the measure
pass (issue 50), whatever that file holds beside the student's fields: the node's repository is
built by `model_repository --mode docker` (its `parameters { key: "weights" ... }` block, the
onnxruntime backend), and on a two-GPU node the measure pass loads 6.3d's "all on GPU 0" between
6.3a and 6.3f. Each edit is checked by its step's own check; an edit that cannot be made (the
block it changed is gone) or that would change what Triton runs is not written, and the cell
says why (issue 52: nothing from prepared.json lands in the repository unchecked)."""

from __future__ import annotations

import json

import pytest

from servelab import claims, exercises, passes
from servelab.exercises import steps
from servelab.passes import node_calls, record
from servelab.triton import config_text, instances, model_repository, prepared_edit, triton_config

NOTEBOOK = "06_triton_benchmarks"
ONE_ON_GPU0 = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"
ALL_ON_GPU0 = "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]"  # 6.3d's answer
BATCHING = (
    "dynamic_batching { preferred_batch_size: [ 4, 6, 8 ] max_queue_delay_microseconds: 100 }"
)


def instances_on_every_gpu(count: int):
    return lambda text: config_text.replace_fields(text, instances.instance_group(count, 2))


# each file edit of notebook 6, as its solved edition makes it on a two-GPU node: (step, model,
# the edit made to the text before it)
EDITS = (
    ("6.3a", "food_classifier", instances_on_every_gpu(2)),
    ("6.3f", "food_classifier", instances_on_every_gpu(4)),
    ("6.4b", "food_classifier_onnx", instances_on_every_gpu(2)),
    ("6.6a", "food_classifier_onnx", lambda text: config_text.replace_fields(text, ONE_ON_GPU0)),
    ("6.6e", "food_classifier_onnx", lambda text: f"{text}\n{BATCHING}\n"),
)
ASKS = "make it in the editor"  # what the measure pass prints when it leaves an edit to you


@pytest.fixture
def node(monkeypatch, tmp_path):
    """A two-GPU node's model repository, built as notebook 2's node builds it (Docker mode, GPU
    instances), and a pass starter whose bundles live under tmp_path."""
    repo = tmp_path / "model_repository"
    model_repository.populate(repo, mode="docker", kind="gpu", verbose=False)
    monkeypatch.setenv("TRITON_MODEL_REPOSITORY", str(repo))
    monkeypatch.setenv("LAB_BUNDLE", str(tmp_path / "bundles"))
    monkeypatch.setitem(steps.GIVEN, "N_GPUS", 2)  # as notebook 6 hands it to the checks

    def start(lab_pass: str) -> None:
        monkeypatch.setenv("LAB_PASS", lab_pass)
        passes.start(NOTEBOOK)

    start.repo = repo
    yield start
    node_calls.STATE.update({"pass": None, "notebook": None, "bundle": None, "inside": 0})
    claims.RESULTS.clear()
    claims.PREDICTIONS.clear()


def prepare_every_edit(node) -> None:
    """The prepare pass: each edit made on the notebook's copy and checked by its step."""
    node("prepare")
    for step, model, edited in EDITS:
        copy, before = triton_config.to_edit(model, step)
        copy.write_text(edited(before))
        exercises.file_edit(copy, before, step)


def made(model_repo, model: str, step: str, capsys) -> tuple[str, str]:
    """The measure pass's cell of `step`, then its check: (the file before, what was printed)."""
    path, before = triton_config.to_edit(model, step)
    assert path == model_repo / model / "config.pbtxt"
    exercises.file_edit(path, before, step)  # the step's own check, on the node's file
    return before, capsys.readouterr().out


def test_every_prepared_edit_is_made_on_the_nodes_file(node, capsys):
    """The chain 6.3a -> 6.3d -> 6.3f, 6.4b, 6.6a -> 6.6e on Docker mode's files: nothing asked
    by hand, every field the node's file had beside the edit kept."""
    prepare_every_edit(node)
    capsys.readouterr()
    node("measure")
    repo = node.repo
    weights = 'parameters { key: "weights"'
    assert weights in (repo / "food_classifier" / "config.pbtxt").read_text()
    for step, model, _ in EDITS:
        before, printed = made(repo, model, step, capsys)
        assert ASKS not in printed and f"{step}: your prepare pass's edit" in printed, printed
        text = (repo / model / "config.pbtxt").read_text()
        assert weights in text and text != before, step
        if step == "6.3a":  # what the measure pass loads next on two GPUs (triton_config.edit)
            path = repo / model / "config.pbtxt"
            path.write_text(config_text.replace_fields(path.read_text(), ALL_ON_GPU0))
    food = config_text.parse_config((repo / "food_classifier" / "config.pbtxt").read_text())
    onnx = config_text.parse_config((repo / "food_classifier_onnx" / "config.pbtxt").read_text())
    assert instances.placement(food, 2) == {"GPU 0": 4, "GPU 1": 4}  # 6.3f over 6.3d's
    assert instances.placement(onnx, 2) == {"GPU 0": 1}
    assert list(onnx.dynamic_batching.preferred_batch_size) == [4, 6, 8]
    assert onnx.backend == "onnxruntime"  # the node's model, not the prepare copy's


def test_a_cell_run_again_compares_with_the_file_before_the_edit(node, capsys):
    prepare_every_edit(node)
    node("measure")
    path = node.repo / "food_classifier" / "config.pbtxt"
    original = path.read_text()
    _, before = triton_config.to_edit("food_classifier", "6.3a")
    edited = path.read_text()
    capsys.readouterr()
    assert triton_config.to_edit("food_classifier", "6.3a") == (path, original) == (path, before)
    assert path.read_text() == edited and "your prepare pass's edit" not in capsys.readouterr().out


def test_an_edit_inside_a_block_the_node_no_longer_has_is_asked_by_hand(node, capsys):
    """6.6e prepared on a copy that had dynamic batching with another delay: on a node whose
    file has no dynamic_batching, the delay alone cannot be set; the file stays as it was."""
    node("prepare")
    copy, before = triton_config.to_edit("food_classifier_onnx", "6.6e")
    copy.write_text(f"{before}\n{BATCHING.replace('100', '500')}\n")
    record.edit("6.6e", copy.read_text(), f"{before}\n{BATCHING}\n")
    node("measure")
    path = node.repo / "food_classifier_onnx" / "config.pbtxt"
    untouched = path.read_text()
    capsys.readouterr()
    assert triton_config.to_edit("food_classifier_onnx", "6.6e") == (path, untouched)
    printed = capsys.readouterr().out
    assert ASKS in printed and "has no `dynamic_batching` block" in printed, printed
    assert "+dynamic_batching" in printed or "max_queue_delay_microseconds: 100" in printed
    assert path.read_text() == untouched


@pytest.mark.parametrize(
    "edited, says",
    [
        (lambda t: t.replace('backend: "python"', 'backend: "pytorch"'), "it changes backend"),
        (lambda t: f'{t}parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "x" }} }}',
         "it changes parameters"),
        (lambda t: f"{t}instance_group [ {{ cont: 2 }} ]", "not config.pbtxt that Triton accepts"),
        (lambda t: t, "the prepared copy was not changed"),
    ],
    ids=["backend", "a parameter", "not Triton's schema", "no change"],
)  # fmt: skip
def test_a_prepared_edit_is_checked_before_anything_is_written(node, capsys, edited, says):
    """Issue 52: prepared.json is a file like any other; what it holds is read as a change of
    Triton's fields and checked before the repository is touched, and a refused one leaves
    nothing there."""
    node("prepare")
    _, before = triton_config.to_edit("food_classifier", "6.3a")
    record.edit("6.3a", before, edited(before))
    node("measure")
    model_dir = node.repo / "food_classifier"
    files = {p: p.read_bytes() for p in model_dir.rglob("*") if p.is_file()}
    capsys.readouterr()
    triton_config.to_edit("food_classifier", "6.3a")
    printed = capsys.readouterr().out
    assert ASKS in printed and says in printed, printed
    assert {p: p.read_bytes() for p in model_dir.rglob("*") if p.is_file()} == files


def test_on_a_node_without_gpu_the_instances_run_on_the_cpu(node, capsys, monkeypatch, tmp_path):
    """make lab after a prepare pass, on a machine without GPU: local mode's files say KIND_CPU;
    the prepared two-per-GPU edit is made as two CPU instances, as triton_config.edit does."""
    prepare_every_edit(node)
    cpu_repo = tmp_path / "cpu_repository"
    model_repository.populate(cpu_repo, mode="local", kind="cpu", verbose=False)
    monkeypatch.setenv("TRITON_MODEL_REPOSITORY", str(cpu_repo))
    monkeypatch.setitem(steps.GIVEN, "N_GPUS", 0)
    node("measure")
    capsys.readouterr()
    _, printed = made(cpu_repo, "food_classifier", "6.3a", capsys)
    assert "KIND_GPU written as KIND_CPU" in printed and ASKS not in printed, printed
    text = (cpu_repo / "food_classifier" / "config.pbtxt").read_text()
    assert instances.placement(text, 0) == {"CPU": 2}


def test_the_made_edit_is_kept_in_the_bundle_and_read_back_in_review(node, capsys):
    prepare_every_edit(node)
    node("measure")
    path, before = triton_config.to_edit("food_classifier", "6.3a")
    diff = exercises.file_edit(path, before, "6.3a")
    bundle = node_calls.STATE["bundle"]
    kept = json.loads((bundle.folder / prepared_edit.MADE).read_text())["6.3a"]
    assert kept["before"] == before and kept["after"] == path.read_text()
    assert kept["fields"] == ["instance_group"]
    passes.finish()
    node("review")
    path.write_text("not even config.pbtxt")  # the node is gone: review reads the bundle only
    assert triton_config.to_edit("food_classifier", "6.3a") == (path, before)
    assert exercises.file_edit(path, before, "6.3a") == diff
