"""The ensemble's configs and notebook 8's exercise check, without a server (fast): the configs
parse into Triton's ModelConfig, the step mapping connects names that exist in each step's
config, batch sizes fit, model_repository places the ensemble so it works in both layouts (local:
the classifier step is the Python-backend stand-in; docker: the onnxruntime backend; the same
name and I/O either way), and a wrong step mapping is answered in one sentence."""

from __future__ import annotations

import re

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from servelab import ensemble, exercises
from servelab.paths import STAGING
from servelab.triton import model_repository

TYPE = model_config_pb2.DataType
KIND = model_config_pb2.ModelInstanceGroup.Kind


def load(folder: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(
        (STAGING / folder / "config.pbtxt").read_text(), model_config_pb2.ModelConfig()
    )


def load_text(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def tensors(cfg, which: str) -> dict[str, tuple[str, list[int]]]:
    return {t.name: (TYPE.Name(t.data_type), list(t.dims)) for t in getattr(cfg, which)}


@pytest.mark.parametrize(
    "classifier_folder", ["food_classifier_onnx", "food_classifier_onnx_local"]
)
def test_step_mapping_connects_existing_tensors(classifier_folder):
    ens = load("food_classifier_ensemble")
    models = {"preprocess": load("preprocess"), "food_classifier_onnx": load(classifier_folder)}
    assert ens.platform == "ensemble" and not ens.backend
    assert [s.model_name for s in ens.ensemble_scheduling.step] == list(ensemble.STEPS)
    produced = dict(tensors(ens, "input"))  # ensemble-level name -> (type, dims)
    for step in ens.ensemble_scheduling.step:
        cfg = models[step.model_name]
        assert ens.max_batch_size <= cfg.max_batch_size, step.model_name
        for step_name, ens_name in step.input_map.items():
            assert step_name in tensors(cfg, "input"), f"{step.model_name} has no input {step_name}"
            assert produced[ens_name] == tensors(cfg, "input")[step_name], (
                step.model_name,
                step_name,
            )
        for step_name, ens_name in step.output_map.items():
            produced[ens_name] = tensors(cfg, "output")[step_name]
    assert {n: produced[n] for n in tensors(ens, "output")} == tensors(ens, "output")
    assert tensors(ens, "input") == {ensemble.INPUT: ("TYPE_STRING", [1])}


def test_preprocess_runs_on_cpu_and_batches():
    cfg = load("preprocess")
    assert cfg.backend == "python" and (STAGING / "preprocess" / "1" / "model.py").is_file()
    assert [KIND.Name(g.kind) for g in cfg.instance_group] == ["KIND_CPU"]
    assert (
        cfg.HasField("dynamic_batching")
        and cfg.max_batch_size == load("food_classifier_onnx").max_batch_size
    )


@pytest.mark.parametrize("mode", ["local", "docker"])
def test_placed_in_both_layouts(tmp_path, built_artifacts, mode):
    model_repository.populate(tmp_path, mode=mode, kind="gpu", verbose=False)
    ensemble.place(tmp_path, mode=mode, kind="cpu", verbose=False)
    assert (tmp_path / "food_classifier_ensemble" / "1").is_dir()
    assert not any((tmp_path / "food_classifier_ensemble" / "1").iterdir())
    classifier = text_format.Parse(
        (tmp_path / "food_classifier_onnx" / "config.pbtxt").read_text(),
        model_config_pb2.ModelConfig(),
    )
    assert classifier.backend == ("python" if mode == "local" else "onnxruntime")
    placed = text_format.Parse(
        (tmp_path / "food_classifier_ensemble" / "config.pbtxt").read_text(),
        model_config_pb2.ModelConfig(),
    )
    assert placed.platform == "ensemble"
    pre = (tmp_path / "preprocess" / "config.pbtxt").read_text()
    assert "KIND_CPU" in pre and "KIND_GPU" not in pre


def test_placed_without_its_step_mapping_for_the_exercise(tmp_path, built_artifacts):
    model_repository.populate(tmp_path, mode="local", kind="cpu", verbose=False)
    ensemble.place(tmp_path, mode="local", kind="cpu", steps=False, verbose=False)
    placed = load_text((tmp_path / "food_classifier_ensemble" / "config.pbtxt").read_text())
    assert placed.platform == "ensemble" and not placed.ensemble_scheduling.step
    assert [t.name for t in placed.output] == [ensemble.OUTPUT]


STAGED = (STAGING / "food_classifier_ensemble" / "config.pbtxt").read_text()
ANSWER = STAGED[STAGED.index("ensemble_scheduling {") :]


def test_the_staged_mapping_passes_the_check():
    assert exercises.step_mapping(ANSWER, "8.1") == ANSWER


@pytest.mark.parametrize(
    "answer, says",
    [
        (..., "replace the `...`"),
        ("ensemble_scheduling { step [ { model_nme: 'x' } ] }", "not config.pbtxt"),
        (ANSWER.replace('model_name: "preprocess"', 'model_name: "food_classifier"'), "the steps"),
        (ANSWER.replace('key: "input"', 'key: "INPUT"'), "the model's own input names"),
        (ANSWER.replace('key: "IMAGE_TENSOR"', 'key: "tensor"'), "own output names"),
        (ANSWER.replace('value: "preprocessed" }            #', 'value: "pixels" }  #'), "pixels"),
        (ANSWER.replace('value: "LOGITS"', 'value: "logits"'), "`LOGITS`"),
    ],
    ids=["blank", "schema", "steps", "input keys", "output keys", "unproduced", "no output"],
)
def test_a_wrong_mapping_is_answered_in_the_students_terms(answer, says):
    if isinstance(answer, str):
        assert answer != ANSWER, "the mutation did not apply"
    with pytest.raises(exercises.NotYet, match=re.escape(says)) as err:
        exercises.step_mapping(answer, "8.1")
    assert err.value._render_traceback_() == [str(err.value)]  # one sentence in Jupyter


def test_a_path_too_slow_for_the_windows_is_measured_for_a_fixed_count(monkeypatch):
    """ensemble.measure's fallback (seen: the PyTorch model at 0.5 infer/s on a busy 2-core
    machine left 1.5 s windows empty): the line runs again with --request-count, and the row's
    command says so; any other failure is raised as it is."""
    import pandas as pd

    from servelab import perf

    lines = []

    def run_line(line, name, **kwargs):
        lines.append(line)
        if "--request-count" not in line:
            raise perf.PerfAnalyzerError("Pass [3] cb::Error: No valid requests recorded ...")
        table = pd.DataFrame([{"throughput_infer_s": 0.5}])
        return perf.Run(name, perf.Line.read(line), [], "", 1.0, table, {"command": line})

    monkeypatch.setattr(perf, "run_line", run_line)
    monkeypatch.setattr(ensemble, "snapshot", lambda models, url: {m: {} for m in models})
    line = "perf_analyzer -m food_classifier -u h:8000 --concurrency-range 4"
    run = ensemble.measure(line, "slow", fallback_requests=7)
    assert lines == [line, f"{line} --request-count 7"]
    assert run.row["command"] == f"{line} --request-count 7"
    assert list(run.steps["model"]) == ["food_classifier"]

    def refused(line, name, **kwargs):
        raise perf.PerfAnalyzerError(
            "perf_analyzer exited with code 99: failed to get model metadata"
        )

    monkeypatch.setattr(perf, "run_line", refused)
    with pytest.raises(perf.PerfAnalyzerError, match="model metadata"):
        ensemble.measure(line, "down")
