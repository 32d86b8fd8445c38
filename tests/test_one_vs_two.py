"""maintainers/reference/one_vs_two.py without a GPU: the two servers (one given
CUDA_VISIBLE_DEVICES=0, one given both GPUs), the configs each loads, the claims from the
utilisation law, and the page's section, with stand-ins for the stack, the edits and perf_analyzer
(the GPU run itself is the command in maintainers/reference/README.md)."""

import json
import os
import re
import subprocess
import sys

import pytest

from maintainers.reference import one_vs_two, run_reference
from servelab import claims
from servelab.paths import REPO_ROOT

# infer/s and GPU utilisation per (server, model, in flight): what a two-H200 host might show
THROUGHPUT = {
    ("one GPU", "food_classifier_onnx", 4): (705.0, 41.0, 0.0),
    ("two GPUs", "food_classifier_onnx", 4): (709.0, 40.6, 0.0),
    ("one GPU", "food_classifier_onnx", 16): (1180.0, 99.0, 0.0),
    ("two GPUs", "food_classifier_onnx", 16): (2101.0, 88.4, 89.8),
    ("one GPU", "food_classifier", 8): (770.0, 98.0, 0.0),
    ("two GPUs", "food_classifier", 8): (959.0, 62.0, 61.9),
}


class Run:
    def __init__(self, server, model, concurrency, line):
        x, u0, u1 = THROUGHPUT[(server, model, concurrency)]
        self.row = {
            "throughput_infer_s": x,
            "p95_ms": 9.0,
            "execution_ms": 7.8 if model == "food_classifier" else 1.9,
            "avg_batch_size": 1.0,
            "instances": 1,
            "busy_U": 0.97,
            "cpu_util_pct": 20.0,
            "gpu0_util_pct": u0,
            "gpu1_util_pct": u1,
            "command": line,
        }
        self.throughput = claims.Measured(x, 0.98 * x, 1.02 * x, "3 measurement windows")


@pytest.fixture
def stack(monkeypatch, tmp_path):
    """The stack, the edits and perf_analyzer as stand-ins; records what each server was given."""
    from labstack import artifacts, launcher
    from servelab import perf
    from servelab.triton import gpus, instances, model_repository, triton_config, triton_stats

    seen = {"starts": [], "edits": [], "runs": []}
    urls = {"TRITON_SERVER_URL": "http://127.0.0.1:9", "TRITON_METRICS_URL": "http://m"}
    monkeypatch.setenv("LAB_STATE_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # what the caller had: given back after
    monkeypatch.setenv("LAB_PERF_INTERVAL_MS", "3000")
    monkeypatch.setattr(artifacts, "build", lambda: {})
    monkeypatch.setattr(model_repository, "populate", lambda *a, **k: [])
    monkeypatch.setattr(
        launcher, "up", lambda **k: seen["starts"].append(os.environ.get("CUDA_VISIBLE_DEVICES"))
    )
    monkeypatch.setattr(launcher, "down", lambda: None)
    monkeypatch.setattr(launcher, "read_state", lambda: {})
    monkeypatch.setattr(launcher, "client_urls", lambda state: urls)
    monkeypatch.setattr(
        triton_stats, "gpu_count", lambda *a: 1 if os.environ.get("CUDA_VISIBLE_DEVICES") else 2
    )
    monkeypatch.setattr(gpus, "table", lambda *a: __import__("pandas").DataFrame())
    monkeypatch.setattr(gpus, "names_agree", lambda *a: claims.HOLDS)
    monkeypatch.setattr(gpus, "where_instances_run", lambda *a, **k: None)

    def edit(model, fragment, **kwargs):
        seen["edits"].append((os.environ.get("CUDA_VISIBLE_DEVICES"), model, fragment))
        served = {"instance_group": instances._groups(fragment)}
        return triton_config.ReloadResult(model, True, 1.0, "", served=served)

    def run_line(line, name, **kwargs):
        seen["runs"].append(name)
        server = "one GPU" if name.startswith("one GPU") else "two GPUs"
        model = re.search(r"-m (\S+)", line)[1]
        concurrency = int(re.search(r"--concurrency-range (\d+)", line)[1])
        return Run(server, model, concurrency, line)

    monkeypatch.setattr(triton_config, "edit", edit)
    monkeypatch.setattr(perf, "run_line", run_line)
    claims.RESULTS.clear()
    yield seen
    claims.RESULTS.clear()


def test_one_gpu_then_two_each_with_notebook_6s_configurations(stack, tmp_path):
    assert one_vs_two.run(tmp_path) == 0
    assert stack["starts"] == ["0", None]  # the one-GPU server first, then both GPUs
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"  # the caller's setting, given back
    groups = [(v, m, f.removeprefix("instance_group [ ")) for v, m, f in stack["edits"]]
    assert groups == [
        ("0", "food_classifier_onnx", "{ count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"),
        ("0", "food_classifier_onnx", "{ count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]"),
        ("0", "food_classifier", "{ count: 8, kind: KIND_GPU, gpus: [ 0 ] } ]"),
        (None, "food_classifier_onnx", "{ count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"),
        (None, "food_classifier_onnx", "{ count: 2, kind: KIND_GPU, gpus: [ 0, 1 ] } ]"),
        (None, "food_classifier", "{ count: 4, kind: KIND_GPU, gpus: [ 0, 1 ] } ]"),
    ]
    assert len(stack["runs"]) == 12  # a warm-up and a counted run each
    assert all(r["verdict"] == claims.HOLDS for r in claims.RESULTS), claims.RESULTS
    onnx = next(r for r in claims.RESULTS if "ONNX model, 4 instances" in r["claim"])
    assert onnx["rule"] == ">= 1.39"  # half of what one GPU could not carry: (1.78 - 1) / 2
    python = next(r for r in claims.RESULTS if "Python-backend" in r["claim"])
    assert (
        python["rule"] == ">= 1.12" and "GPU 0 + GPU 1 busy with two (%) = 124" in python["numbers"]
    )
    record = json.loads((tmp_path / "results/one_vs_two/one_vs_two.json").read_text())
    assert record["servers"]["one GPU"]["n_gpus"] == 1
    laws = record["servers"]["one GPU"]["runs"][2]["laws"]
    assert [(x["gpu"], x["instances"]) for x in laws] == [("GPU 0", 8)]  # the only GPU it has


def test_where_one_gpu_carries_both_the_claim_is_that_the_second_buys_little(stack, tmp_path):
    """The two GPUs' utilisations add up to less than one GPU: the claim is 'at most 1.15x', and
    a second GPU that bought much more (1.25x) makes it fail."""
    THROUGHPUT[("two GPUs", "food_classifier", 8)] = (962.0, 38.0, 37.0)
    try:
        assert one_vs_two.run(tmp_path) == 1
    finally:
        THROUGHPUT[("two GPUs", "food_classifier", 8)] = (959.0, 62.0, 61.9)
    python = next(r for r in claims.RESULTS if "Python-backend" in r["claim"])
    assert python["rule"] == "<= 1.15" and python["verdict"] == claims.FAILS


def test_the_page_shows_both_servers_side_by_side(stack, tmp_path):
    page = tmp_path / "page"
    assert one_vs_two.run(page) == 0
    runs = {"one_vs_two": {"notebook": "x", "rc": 0, "started": "2026-11-29 10:00:00 UTC"}}
    runs["one_vs_two"] |= {"seconds": 200, "quick": False}
    runs["one_vs_two"]["settings"] = {"LAB_PERF_INTERVAL_MS": "3000"}
    (page / "runs.json").write_text(json.dumps(runs))
    done = subprocess.run(
        [sys.executable, "maintainers/reference/run_reference.py", "--out", str(page), "--report"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    text = (page / "README.md").read_text()
    assert "## One GPU against two on the same host (`one_vs_two`)" in text
    assert (
        "| ONNX model, 4 instances, 16 in flight (6.4: 2 per GPU) | one GPU | {'GPU 0': 4} |"
        in (text)
    )
    assert "{'GPU 0': 2, 'GPU 1': 2} | 2101 |" in text and "| holds |" in text
    assert (
        "LAB_PERF_INTERVAL_MS=3000 python3 maintainers/reference/run_reference.py --out DIR "
        "--parts " in (text)
    )


def test_a_runs_standalone_parts_go_into_a_page(tmp_path):
    """--take: the placement rerun and one_vs_two from a run folder into the page, the page's
    notebook part left as it was."""
    run, page = tmp_path / "run", tmp_path / "page"
    (run / "results/placement").mkdir(parents=True)
    (run / "results/placement/placement.json").write_text("{}")
    (run / "service_triton_placement.log").write_text("log")
    (run / "runs.json").write_text(json.dumps({"placement": {"rc": 0}, "triton": {"rc": 9}}))
    (page / "results/placement").mkdir(parents=True)
    (page / "results/placement/old.csv").write_text("old")
    (page / "runs.json").write_text(json.dumps({"triton": {"rc": 0}, "placement": {"rc": 1}}))
    run_reference.take(run, page, ["placement"])
    assert json.loads((page / "runs.json").read_text()) == {
        "triton": {"rc": 0},
        "placement": {"rc": 0},
    }
    assert sorted(p.name for p in (page / "results/placement").iterdir()) == ["placement.json"]
    assert (page / "service_triton_placement.log").read_text() == "log"
    with pytest.raises(SystemExit, match="standalone parts only"):
        run_reference.take(run, page, ["triton"])


def test_on_a_host_without_two_gpus_nothing_is_decided(stack, tmp_path, monkeypatch):
    """The CPU machine (where the part also ran once for real, KIND_CPU): both servers
    count no GPU; every claim says it needs two, and the page still shows the runs."""
    from servelab.triton import triton_stats

    monkeypatch.setattr(triton_stats, "gpu_count", lambda *a: 0)
    assert one_vs_two.run(tmp_path) == 1
    assert {r["verdict"] for r in claims.RESULTS} == {claims.NOT_CHECKED}
    assert "it needs two" in claims.RESULTS[0]["note"]
    text = "\n".join(one_vs_two.report_lines(tmp_path / "results/one_vs_two"))
    assert "one GPU: 0 GPU(s) counted" in text and "| not checked here |" in text
