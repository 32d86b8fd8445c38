"""Triton model configs and the helpers around them, checked without a running server.

- every config.pbtxt in models_staging/ parses into Triton's own ModelConfig protobuf;
- the onnxruntime config matches the exported model.onnx (names, types, dims);
- the local stand-in has exactly the interface of the real ONNX model;
- model_repository.populate() lays out a repository Triton can read (CPU and GPU kinds);
- triton_config's text edits, triton_stats' parsing and perf's CSV parsing on real outputs
  (edit() and run_line() against a running server: tests/test_triton_server.py).
"""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from servelab import perf
from servelab.paths import MODEL_ONNX, STAGING
from servelab.perf import output as perf_output
from servelab.triton import config_text, model_repository, triton_config, triton_stats
from servelab.verdicts import triton as verdicts

CONFIGS = sorted(STAGING.glob("*/config.pbtxt"))
# the ensemble's two models follow other rules (tests/test_ensemble_config.py checks them)
ENSEMBLE_PARTS = ("preprocess", "food_classifier_ensemble")
CLASSIFIERS = [p for p in CONFIGS if p.parent.name not in ENSEMBLE_PARTS]
TYPE = model_config_pb2.DataType
KIND = model_config_pb2.ModelInstanceGroup.Kind


def load(path) -> model_config_pb2.ModelConfig:
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def read_config(model: str, repo) -> model_config_pb2.ModelConfig:
    return config_text.parse_config(triton_config.config_path(model, repo).read_text())


def io_signature(cfg, which: str) -> list[tuple[str, str, list[int]]]:
    return [(t.name, TYPE.Name(t.data_type), list(t.dims)) for t in getattr(cfg, which)]


def test_staged_models_are_there():
    names = {p.parent.name for p in CONFIGS}
    assert {"food_classifier", "food_classifier_onnx", "food_classifier_onnx_local"} <= names


@pytest.mark.parametrize("path", CLASSIFIERS, ids=[p.parent.name for p in CLASSIFIERS])
def test_config_parses_into_model_config(path):
    cfg = load(path)
    expected_name = (
        "food_classifier_onnx"
        if path.parent.name == "food_classifier_onnx_local"
        else path.parent.name
    )
    assert cfg.name == expected_name
    assert cfg.max_batch_size == 16
    assert cfg.backend in ("python", "onnxruntime")
    assert [KIND.Name(g.kind) for g in cfg.instance_group] == ["KIND_GPU"]
    assert [(g.count, list(g.gpus)) for g in cfg.instance_group] == [(1, [0])]
    if cfg.name == "food_classifier_tuned":  # notebook 7 starts where notebook 6 ended
        assert list(cfg.dynamic_batching.preferred_batch_size) == [4, 6, 8]
    else:
        assert not cfg.HasField("dynamic_batching"), "the lab adds dynamic batching in step 6.6"
    if cfg.backend == "python":
        assert (path.parent / "1" / "model.py").is_file()


def test_unknown_field_is_rejected():
    text = (STAGING / "food_classifier" / "config.pbtxt").read_text() + "\ninstance_count: 2\n"
    with pytest.raises(text_format.ParseError, match="instance_count"):
        config_text.parse_config(text)


def test_food_classifier_interface():
    cfg = load(STAGING / "food_classifier" / "config.pbtxt")
    assert cfg.backend == "python"
    assert io_signature(cfg, "input") == [("INPUT_IMAGE", "TYPE_STRING", [1])]
    assert io_signature(cfg, "output") == [
        ("FOOD_LABEL", "TYPE_STRING", [1]),
        ("PROBABILITY", "TYPE_FP32", [1]),
    ]


def test_onnx_config_matches_onnx_file(built_artifacts):
    onnx = pytest.importorskip("onnx")
    cfg = load(STAGING / "food_classifier_onnx" / "config.pbtxt")
    assert cfg.backend == "onnxruntime"
    graph = onnx.load(str(MODEL_ONNX)).graph
    onnx_to_triton = {
        onnx.TensorProto.FLOAT: "TYPE_FP32",
        onnx.TensorProto.FLOAT16: "TYPE_FP16",
        onnx.TensorProto.INT64: "TYPE_INT64",
        onnx.TensorProto.INT32: "TYPE_INT32",
    }

    def signature(values):
        out = []
        for v in values:
            dims = [
                d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim
            ]
            out.append((v.name, onnx_to_triton[v.type.tensor_type.elem_type], dims))
        return out

    initializers = {i.name for i in graph.initializer}
    onnx_inputs = signature([v for v in graph.input if v.name not in initializers])
    onnx_outputs = signature(graph.output)
    # max_batch_size > 0: Triton's dims leave out the batch axis, which must be dynamic in the file
    for onnx_sig, triton_sig in (
        (onnx_inputs, io_signature(cfg, "input")),
        (onnx_outputs, io_signature(cfg, "output")),
    ):
        assert [(n, t, d[0]) for n, t, d in onnx_sig] == [(n, t, -1) for n, t, _ in triton_sig]
        assert [(n, t, d[1:]) for n, t, d in onnx_sig] == triton_sig
    assert io_signature(cfg, "input") == [("input", "TYPE_FP32", [3, 224, 224])]
    assert io_signature(cfg, "output") == [("output", "TYPE_FP32", [11])]


def test_local_stand_in_has_the_onnx_models_interface():
    real = load(STAGING / "food_classifier_onnx" / "config.pbtxt")
    local = load(STAGING / "food_classifier_onnx_local" / "config.pbtxt")
    assert local.backend == "python" and local.name == real.name
    for which in ("input", "output"):
        assert io_signature(local, which) == io_signature(real, which)
    assert local.max_batch_size == real.max_batch_size
    assert "STAND-IN" in (STAGING / "food_classifier_onnx_local" / "1" / "model.py").read_text()


@pytest.mark.parametrize("mode,kind", [("local", "cpu"), ("docker", "gpu"), ("docker", "cpu")])
def test_populate_layout(tmp_path, built_artifacts, mode, kind, capsys):
    repo = tmp_path / "model_repository"
    (repo / "other_model").mkdir(parents=True)
    names = model_repository.populate(repo, mode=mode, kind=kind)
    assert names == ["food_classifier", "food_classifier_onnx"]
    assert (repo / "other_model").is_dir(), "folders of other models are left alone"
    assert {p.name for p in (repo / "food_classifier" / "1").iterdir()} == {
        "model.py",
        "food11.pth",
        "food11_state_dict.pth",
    }
    onnx_files = {p.name for p in (repo / "food_classifier_onnx" / "1").iterdir()}
    assert onnx_files == ({"model.py", "model.onnx"} if mode == "local" else {"model.onnx"})
    for name in names:
        cfg = read_config(name, repo)
        assert cfg.name == name
        groups = [(KIND.Name(g.kind), list(g.gpus)) for g in cfg.instance_group]
        assert groups == ([("KIND_CPU", [])] if kind == "cpu" else [("KIND_GPU", [0])])
    onnx_cfg = read_config("food_classifier_onnx", repo)
    assert onnx_cfg.backend == ("python" if mode == "local" else "onnxruntime")
    out = capsys.readouterr().out
    assert str(repo.resolve()) in out and "food_classifier_onnx/" in out
    # populate again: the staged version comes back (e.g. after triton_config changes)
    path = triton_config.config_path("food_classifier", repo)
    path.write_text(config_text.replace_fields(path.read_text(), "instance_group [ { count: 3 } ]"))
    assert [g.count for g in read_config("food_classifier", repo).instance_group] == [3]
    model_repository.populate(repo, mode=mode, kind=kind, verbose=False)
    assert [g.count for g in read_config("food_classifier", repo).instance_group] == [1]


def test_tuned_model_is_placed_on_demand_only(tmp_path, built_artifacts):
    repo = tmp_path / "model_repository"
    model_repository.populate(repo, mode="local", kind="cpu", verbose=False)
    assert not (repo / "food_classifier_tuned").exists(), "Triton would load it at every start"
    folder = model_repository.add_model(
        "food_classifier_tuned", repo, mode="local", kind="cpu", verbose=False
    )
    assert {p.name for p in (folder / "1").iterdir()} == {
        "model.py",
        "food11.pth",
        "food11_state_dict.pth",
    }
    cfg = read_config("food_classifier_tuned", repo)
    assert io_signature(cfg, "input") == [("input", "TYPE_FP32", [3, 224, 224])]
    assert io_signature(cfg, "output") == [("output", "TYPE_FP32", [11])]
    assert [KIND.Name(g.kind) for g in cfg.instance_group] == ["KIND_CPU"]
    assert {k: v.string_value for k, v in cfg.parameters.items()} == {
        "precision": "fp32",
        "cuda_graphs": "off",
        "compile": "off",
        "cpu_threads": "auto",
        "weights": built_artifacts["weights"],
    }
    with pytest.raises(ValueError, match="on-demand"):
        model_repository.add_model("food_classifier", repo)


def test_model_repository_cli(tmp_path, built_artifacts):
    import subprocess
    import sys

    from servelab.paths import REPO_ROOT

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "servelab.triton.model_repository",
            "--dest",
            str(tmp_path / "r"),
            "--kind",
            "cpu",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "mode docker" in out.stdout
    assert read_config("food_classifier_onnx", tmp_path / "r").backend == "onnxruntime"


def test_to_cpu_rewrite_keeps_the_rest():
    text = (STAGING / "food_classifier" / "config.pbtxt").read_text()
    before, after = load_text(text), load_text(config_text.to_cpu(text))
    assert [KIND.Name(g.kind) for g in after.instance_group] == ["KIND_CPU"]
    assert [list(g.gpus) for g in after.instance_group] == [[]]
    after.ClearField("instance_group")
    before.ClearField("instance_group")
    assert after == before


def load_text(text: str):
    return text_format.Parse(text, model_config_pb2.ModelConfig())


# -------------------------------------------------- parsing Triton's and perf_analyzer's output

# as written by perf_analyzer 2.51 (`-f` with --verbose-csv) against the local server
PERF_CSV = (
    "Request Rate,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
    "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
    "p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,request/response,response wait\n"
    "20,17.746,676,1462,1330,116,10337,214,0,12397,22081,25436,31230,14139,676,13434\n"
)


def test_a_line_that_is_not_perf_analyzer_is_refused(tmp_path):
    """run_line refuses before running anything (a run against Triton: test_triton_server.py)."""
    with pytest.raises(ValueError, match="not a perf_analyzer command"):
        perf.run_line("curl -s localhost:8000", "x", out=tmp_path)
    with pytest.raises(ValueError, match="names no model"):
        perf.run_line("perf_analyzer --concurrency-range 1", "x", out=tmp_path)


def test_parse_perf_csv():
    table = perf_output.parse_csv(PERF_CSV)
    row = table.iloc[0].to_dict()
    assert row["request_rate"] == 20 and row["throughput_infer_s"] == pytest.approx(17.746)
    assert row["server_queue_ms"] == pytest.approx(1.330) and row[
        "server_compute_infer_ms"
    ] == pytest.approx(10.337)
    assert row["p99_ms"] == pytest.approx(31.230) and row["avg_latency_ms"] == pytest.approx(14.139)
    conc = perf_output.parse_csv(
        "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
        "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
        "p50 latency,p90 latency,p95 latency,p99 latency\n2,30.357,235,517,31749,89,32304,356,0,"
        "66901,80800,84834,93219\n"
    )
    assert list(conc.columns)[:3] == ["concurrency", "throughput_infer_s", "client_send_ms"]
    assert conc.iloc[0]["p50_ms"] == pytest.approx(66.901)


STATS_BEFORE = {
    "inference_count": 10,
    "execution_count": 10,
    "inference_stats": {
        "success": {"count": 10, "ns": 10_000_000},
        "queue": {"count": 10, "ns": 2_000_000},
        "compute_infer": {"count": 10, "ns": 5_000_000},
    },
    "batch_stats": [{"batch_size": 1, "compute_infer": {"count": 10, "ns": 5_000_000}}],
}
STATS_AFTER = {
    "inference_count": 40,
    "execution_count": 20,
    "inference_stats": {
        "success": {"count": 40, "ns": 50_000_000},
        "queue": {"count": 40, "ns": 32_000_000},
        "compute_infer": {"count": 40, "ns": 20_000_000},
    },
    "batch_stats": [
        {"batch_size": 1, "compute_infer": {"count": 14, "ns": 7_000_000}},
        {"batch_size": 4, "compute_infer": {"count": 5, "ns": 6_000_000}},
        {"batch_size": 6, "compute_infer": {"count": 1, "ns": 2_000_000}},
    ],
}


def test_stats_delta():
    d = triton_stats.stats_delta(STATS_BEFORE, STATS_AFTER)
    assert d["batch_executions"] == {1: 4, 4: 5, 6: 1}
    assert d["inference_count"] == 30 and d["execution_count"] == 10 and d["avg_batch_size"] == 3.0
    assert d["max_batch_size_seen"] == 6 and d["requests"] == 30
    assert d["queue_ms_total"] == pytest.approx(30.0) and d["queue_ms_avg"] == pytest.approx(1.0)
    assert not d["counters_restarted"]
    again = triton_stats.stats_delta(STATS_AFTER, STATS_BEFORE)  # counters restarted by a reload
    assert again["counters_restarted"] and again["batch_executions"] == {1: 10}
    assert list(triton_stats.batch_table(d)["images"]) == [4, 20, 6]


def test_parse_metrics():
    text = (
        "# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]\n# TYPE nv_cpu_utilization "
        "gauge\n"
        "nv_cpu_utilization 0.7254901960784313\n"
        'nv_inference_count{model="food_classifier",version="1"} 795\n'
    )
    read = triton_stats.reading(text)
    assert read["gpus"] == {} and read["cpu"] == pytest.approx(0.72549)
    assert read["models"] == {"food_classifier": {"inferences": 795.0}}
    assert triton_stats.utilisation(read) == {"cpu_util_pct": 72.5}
    gpu = text + (
        'nv_gpu_utilization{gpu_uuid="GPU-b"} 1\nnv_gpu_utilization{gpu_uuid="GPU-a"} 0.5\n'
        'lab_cuda_device{instance="m_0_0",gpu_index="0",gpu_uuid="GPU-b"} 1\n'
        'lab_cuda_device{instance="m_0_0",gpu_index="1",gpu_uuid="GPU-a"} 1\n'
    )
    # each GPU on its own, never averaged, by the index the server gives it (not its uuid's order)
    assert triton_stats.utilisation(triton_stats.reading(gpu)) == {
        "gpu0_util_pct": 100.0,
        "gpu1_util_pct": 50.0,
    }
    parsed = triton_stats.parse_metrics(text)
    assert ("nv_inference_count", {"model": "food_classifier", "version": "1"}, 795.0) in parsed
    counter = "# TYPE nv_inference_count counter\n" + text.splitlines()[-1] + "\n"
    assert triton_stats.parse_metrics(counter) == [
        ("nv_inference_count", {"model": "food_classifier", "version": "1"}, 795.0)
    ]  # a counter by Triton's own name, not prometheus_client's <name>_total


def test_make_up_keeps_an_edited_config_and_says_so(tmp_path, built_artifacts, capsys):
    """After a crash, `make up` (populate with keep_configs) must not undo the student's edits; the
    notebook-5 host step (populate as is) resets to the staged config."""
    model_repository.populate(tmp_path, mode="local", kind="cpu", verbose=False)
    config = tmp_path / "food_classifier" / "config.pbtxt"
    edited = config.read_text().replace("count: 1", "count: 3")
    config.write_text(edited)
    (tmp_path / "food_classifier" / "1" / "model.py").write_text(
        "# stale code from an older checkout\n"
    )
    model_repository.populate(tmp_path, mode="local", kind="cpu", keep_configs=True)
    assert config.read_text() == edited
    assert "your edited config.pbtxt KEPT" in capsys.readouterr().out
    assert (
        "stale code" not in (tmp_path / "food_classifier" / "1" / "model.py").read_text()
    )  # code refreshed
    model_repository.populate(tmp_path, mode="local", kind="cpu", verbose=False)
    assert "count: 1" in config.read_text()


def test_a_utilisation_summary_says_what_it_measured():
    """Per GPU when there are GPUs (one busy GPU of two reads 100%, not 50%), and the CPU's (all
    cores) wherever Triton reports it."""
    sampler = triton_stats.Sampler("http://unused")
    two, named = {"GPU-a": 1.0, "GPU-b": 0.0}, {"cuda_devices": {"GPU-a": 0, "GPU-b": 1}}
    sampler.readings = [
        {"gpus": two, "cpu": 0.3, **named},
        {"gpus": {**two, "GPU-a": 0.8}, "cpu": 0.5, **named},
    ]
    assert sampler.summary() == {
        "util_samples": 2,
        "gpu0_util_pct": 90.0,
        "gpu1_util_pct": 0.0,
        "cpu_util_pct": 40.0,
    }
    assert verdicts.busiest_gpu_pct(sampler.summary()) == 90.0
    sampler.readings = [{"gpus": {}, "cpu": 0.3}, {"gpus": {}, "cpu": 0.5}]
    assert sampler.summary() == {"util_samples": 2, "cpu_util_pct": 40.0}
    assert verdicts.busiest_gpu_pct(sampler.summary()) is None


def test_edit_replaces_fields_as_written_and_keeps_comments():
    text = (STAGING / "food_classifier" / "config.pbtxt").read_text()
    fragment = (
        "instance_group [ { count: 2, kind: KIND_GPU } ]  # two per GPU\n"
        "dynamic_batching { max_queue_delay_microseconds: 100 }\n"
        'parameters { key: "cpu_threads" value { string_value: "1" } }\n'
    )
    new = config_text.replace_fields(text, fragment)
    cfg = config_text.parse_config(new)
    assert [(g.count, KIND.Name(g.kind)) for g in cfg.instance_group] == [(2, "KIND_GPU")]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 100
    assert cfg.parameters["cpu_threads"].string_value == "1"
    assert (
        "# two per GPU" in new and "# Triton may hand model.py up to 16 images" in new
    )  # comments kept
    assert new.count("parameters {") == text.count("parameters {")  # replaced by key, not added
    removed = config_text.parse_config(
        config_text.replace_fields(new, "", remove=("dynamic_batching",))
    )
    assert not removed.HasField("dynamic_batching")


def test_make_up_replaces_a_config_for_a_backend_this_mode_does_not_have(
    tmp_path, built_artifacts, capsys
):
    """A Docker-mode config (backend onnxruntime) left in local mode's repository would make Triton
    refuse the model ("unable to find backend library"): the staged config goes in, the old one is
    saved beside it."""
    model_repository.populate(tmp_path, mode="local", kind="cpu", verbose=False)
    config = tmp_path / "food_classifier_onnx" / "config.pbtxt"
    docker_style = config.read_text().replace('backend: "python"', 'backend: "onnxruntime"')
    assert docker_style != config.read_text()
    config.write_text(docker_style)
    model_repository.populate(tmp_path, mode="local", kind="cpu", keep_configs=True)
    assert 'backend: "python"' in config.read_text()
    assert (tmp_path / "food_classifier_onnx" / "config.pbtxt.previous").read_text() == docker_style
    assert "saved as config.pbtxt.previous" in capsys.readouterr().out


def test_make_up_keeps_a_config_that_does_not_parse(tmp_path, built_artifacts):
    """A config the student is in the middle of editing (not valid yet) is theirs: kept as written,
    not taken for one naming another backend."""
    model_repository.populate(tmp_path, mode="local", kind="cpu", verbose=False)
    config = tmp_path / "food_classifier_onnx" / "config.pbtxt"
    half_edited = config.read_text() + "\ndynamic_batching { max_queue_delay_microseconds: }\n"
    config.write_text(half_edited)
    model_repository.populate(tmp_path, mode="local", kind="cpu", keep_configs=True, verbose=False)
    assert config.read_text() == half_edited
    assert not (tmp_path / "food_classifier_onnx" / "config.pbtxt.previous").exists()
