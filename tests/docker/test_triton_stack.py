"""The Triton stack (notebooks 5-8) as a class runs it: the repository filled on the host, the stack
built and started, both models served, a config edited and reloaded from Jupyter, perf_analyzer
from Jupyter, notebook 8's ensemble (onnxruntime backend for the classifier step) serving raw
JPEGs with per-step statistics, notebooks 5 to 8 executed in the Jupyter container (8: Model
Analyzer in remote launch mode, live metrics), and a broken model that does not take the server
down."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest
import requests
import tritonclient.http as httpclient
from compose_stack import (
    DOCKER_DIR,
    HOST_RESULTS,
    RESULTS_IN_JUPYTER,
    Stack,
    read_env_file,
    say,
    wait_for,
)

from labstack.lab import QUICK_PARAMS
from servelab import ensemble, food11
from servelab.paths import REPO_ROOT, TEST_IMAGES

pytestmark = pytest.mark.slow  # builds, starts and uses a compose stack

REPOSITORY = REPO_ROOT / "model_repository"


def a_jpeg():
    """A Food-11 test image (from `make artifacts`; looked up when a test runs, not at import)."""
    return sorted(TEST_IMAGES.glob("*.jpg"))[0]


@pytest.fixture(scope="module")
def stack(settings):
    Stack(
        "fastapi", settings
    ).down()  # notebook 5: stop the FastAPI stack first (same names, ports)
    # notebook 5's host step, as printed there: models_staging -> model_repository
    fill = subprocess.run(
        [sys.executable, "-m", "servelab.triton.model_repository", "--mode", "docker"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert fill.returncode == 0, fill.stderr
    say(fill.stdout.strip())
    stack = Stack("triton", settings)
    stack.down()
    seconds = stack.up()
    say(f"Triton stack built and healthy in {seconds:.0f} s ({stack.file_options})")
    yield stack
    stack.down()


@pytest.fixture
def client(stack, settings):
    return httpclient.InferenceServerClient(f"127.0.0.1:{settings.env['TRITON_HTTP_PORT']}")


def admin_headers() -> dict:
    """The node's secret for Triton's repository API, as docker/init_env.sh wrote it."""
    return {"lab-admin-key": read_env_file(DOCKER_DIR / ".env")["TRITON_ADMIN_KEY"]}


def repository_index(settings) -> dict:
    rows = requests.post(
        settings.url("TRITON_HTTP_PORT", "/v2/repository/index"),
        json={},
        headers=admin_headers(),
        timeout=10,
    ).json()
    return {row["name"]: row for row in rows}


def test_triton_published_on_loopback_and_both_models_ready(stack, settings):
    bindings = stack.container("triton_server")["NetworkSettings"]["Ports"]
    assert {b["HostIp"] for ports in bindings.values() for b in ports or []} == {"127.0.0.1"}
    states = {name: row["state"] for name, row in repository_index(settings).items()}
    # (a food_classifier_tuned folder that notebook 7 left in a used checkout's repository is loaded
    # too, and may be stale: only the two models of notebook 5 are the stack's contract)
    assert states["food_classifier"] == states["food_classifier_onnx"] == "READY", states


def test_both_models_answer_with_the_same_class(client):
    """Triton's own client library, from the host: the Python-backend model gets the file, the ONNX
    model the pre-processed tensor; same weights, so the same class."""
    image = np.array([[food11.encode_file(a_jpeg()).encode()]], dtype=object)
    text_in = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
    text_in.set_data_from_numpy(image)
    result = client.infer("food_classifier", [text_in])
    label = result.as_numpy("FOOD_LABEL")[0][0].decode()
    tensor = food11.tensor_from_bytes(a_jpeg().read_bytes())[None]
    onnx_in = httpclient.InferInput("input", list(tensor.shape), "FP32")
    onnx_in.set_data_from_numpy(tensor)
    logits = client.infer("food_classifier_onnx", [onnx_in]).as_numpy("output")
    assert label in food11.CLASSES and food11.top_class(logits[0])[0] == label


def test_flask_upload_reaches_triton_by_service_name(stack, settings):
    with open(a_jpeg(), "rb") as f:
        page = requests.post(
            settings.url("FLASK_PORT", "/predict"),
            files={"file": (a_jpeg().name, f, "image/jpeg")},
            timeout=120,
        )
    label = re.search(r'class="label">([^<]+)<', page.text)
    assert page.status_code == 200 and label and label.group(1) in food11.CLASSES, page.text[:500]
    assert (
        "triton_server:8000"
        in requests.get(settings.url("FLASK_PORT", "/healthz"), timeout=10).json()["model_server"]
    )


def test_config_edit_in_jupyter_is_reloaded_through_the_repository_api(stack, client):
    """What notebook 6 has the student do: edit config.pbtxt in the mounted repository, ask Triton
    to load the model again; no image rebuilt, no container restarted."""
    script = textwrap.dedent("""
        import os, pathlib, requests
        config = pathlib.Path("model_repository/food_classifier/config.pbtxt")
        text = config.read_text()
        assert "count: 1" in text
        config.write_text(text.replace("count: 1", "count: 2", 1))
        r = requests.post("http://triton_server:8000/v2/repository/models/food_classifier/load",
                          timeout=300, headers={"lab-admin-key": os.environ["TRITON_ADMIN_KEY"]})
        config.write_text(text)
        print(r.status_code, r.text)
    """)
    started = stack.container("triton_server")["State"]["StartedAt"]
    out = stack.exec("jupyter", "python", "-c", script, user="jovyan").stdout
    assert out.startswith("200"), out
    assert client.get_model_config("food_classifier")["instance_group"][0]["count"] == 2
    # back to the staged config, loaded the same way
    stack.exec(
        "jupyter",
        "bash",
        "-c",
        'curl -sf -X POST -H "lab-admin-key: $TRITON_ADMIN_KEY" '
        "http://triton_server:8000/v2/repository/models/food_classifier/load",
        user="jovyan",
    )
    assert client.get_model_config("food_classifier")["instance_group"][0]["count"] == 1
    assert stack.container("triton_server")["State"]["StartedAt"] == started


def test_the_repository_api_refuses_requests_without_the_node_secret(stack, settings):
    """A load request can carry a model.py (code the server runs): without the secret it is refused,
    from the host and from inside the stack; inference and metadata stay open."""
    load = settings.url("TRITON_HTTP_PORT", "/v2/repository/models/pwned/load")
    body = {"parameters": {"config": '{"backend": "python"}', "file:1/model.py": "cHJpbnQoMSk="}}
    assert requests.post(load, json=body, timeout=30).status_code == 403
    assert (
        requests.post(load, json=body, headers={"lab-admin-key": "guess"}, timeout=30).status_code
        == 403
    )
    inside = stack.exec(
        "jupyter",
        "curl",
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-X",
        "POST",
        "http://triton_server:8000/v2/repository/index",
        user="jovyan",
    ).stdout
    assert inside == "403"
    assert "pwned" not in repository_index(settings)
    assert requests.get(
        settings.url("TRITON_HTTP_PORT", "/v2/models/food_classifier_onnx"), timeout=10
    ).ok


@pytest.mark.parametrize("shared_memory", ["none", "system"])
def test_perf_analyzer_in_jupyter(stack, shared_memory):
    """Shared memory needs the node's secret (Triton's shared-memory API is restricted): the
    header as a person types it in Jupyter's terminal, where TRITON_ADMIN_KEY is set."""
    line = (
        "perf_analyzer -m food_classifier_onnx -u triton_server:8000 --shape input:3,224,224 "
        f"--concurrency-range 1 --request-count 100 --shared-memory {shared_memory}"
    )
    if shared_memory != "none":
        refused = stack.exec("jupyter", "bash", "-c", line, user="jovyan", timeout=300, check=False)
        assert refused.returncode != 0 and "restricted" in refused.stdout + refused.stderr
        line += ' -H "lab-admin-key:$TRITON_ADMIN_KEY"'
    out = stack.exec("jupyter", "bash", "-c", line, user="jovyan", timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"Throughput: [0-9.]+ infer/sec", out.stdout), out.stdout[-2000:]


def test_the_instructors_batch_size_check_runs_in_jupyter(stack):
    """docs/instructors.md's check for the day before class, as typed there: batches of mixed
    sizes to the served food_classifier_onnx against the same sizes grouped, the verdict in its
    exit status (here the CPU stand-in; on a GPU node, Triton's onnxruntime backend)."""
    out = stack.exec(
        "jupyter", "python", "-m", "labstack.batch_switch", "triton", timeout=600, check=False
    )
    text = out.stdout + out.stderr
    assert "food_classifier_onnx served at http://triton_server:8000" in text, text[-2000:]
    verdict = re.search(r"(PASS|FAIL): .* mixed batch sizes cost ([\d.]+)x", text)
    assert verdict, text[-2000:]
    assert out.returncode == (0 if verdict[1] == "PASS" else 1)
    assert float(verdict[2]) > 0


def test_the_ensemble_serves_raw_jpegs_with_per_step_statistics(stack, settings, client):
    """Notebook 8's ensemble in the class stack: preprocess (Python backend; model.py imports the
    servelab that the Triton image copies) then food_classifier_onnx (the onnxruntime backend),
    loaded through the repository API; raw JPEG bytes in, the direct path's classes out; a
    perf_analyzer run from Jupyter, and each step's own statistics read."""
    url = settings.url("TRITON_HTTP_PORT")
    ensemble.place(REPOSITORY, mode="docker", kind="auto", verbose=False)
    try:
        load = requests.post(
            f"{url}/v2/repository/models/{ensemble.ENSEMBLE}/load",
            headers=admin_headers(),
            timeout=300,
        )
        assert load.status_code == 200, load.text
        assert [s["model_name"] for s in ensemble.served_steps(url)] == list(ensemble.STEPS)
        assert client.get_model_config("food_classifier_onnx")["backend"] == "onnxruntime"
        images = sorted(TEST_IMAGES.iterdir())
        direct = [food11.top_class(row)[0] for row in ensemble.direct_logits(images, url)]
        assert [c for c, _ in ensemble.classify(images, url)] == direct
        # perf_analyzer in Jupyter sends the files; the input file reaches it through results/
        ensemble.write_perf_inputs([a_jpeg()], HOST_RESULTS / "ensemble")
        before = ensemble.snapshot(url=url)
        out = stack.exec(
            "jupyter",
            "perf_analyzer",
            "-m",
            ensemble.ENSEMBLE,
            "-u",
            "triton_server:8000",
            "--input-data",
            f"{RESULTS_IN_JUPYTER}/ensemble/perf_input_ensemble.json",
            "--concurrency-range",
            "2",
            "--request-count",
            "40",
            user="jovyan",
            timeout=300,
            check=False,
        )
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        table = ensemble.step_table(before, ensemble.snapshot(url=url)).set_index("model")
        done = table.loc[ensemble.ENSEMBLE, "requests"]
        assert done >= 40 and (table["failures"] == 0).all(), table
        for step in ensemble.STEPS:
            assert table.loc[step, "requests"] == done and table.loc[step, "compute_ms"] > 0, table
    finally:
        for model in (ensemble.ENSEMBLE, "preprocess"):
            requests.post(
                f"{url}/v2/repository/models/{model}/unload", headers=admin_headers(), timeout=120
            )
            shutil.rmtree(REPOSITORY / model, ignore_errors=True)


def test_state_changing_apis_need_the_node_secret_over_http_and_grpc(stack, settings):
    """Shared memory (system and CUDA), logging, trace and the model repository, from the host
    over both protocols: refused without the secret and with a wrong one, answered with it (the
    lab's one header dict, labenv.admin_headers(), for both clients)."""
    from maintainers.reliability import hostile
    from servelab import labenv

    key = admin_headers()["lab-admin-key"]
    headers = {labenv.ADMIN_HEADER: key, labenv.GRPC_ADMIN_HEADER: key}
    grpc = f"127.0.0.1:{settings.env['TRITON_GRPC_PORT']}"
    rows = hostile.admin_apis(settings.url("TRITON_HTTP_PORT"), grpc, headers)
    bad = [f"{r['check']}: {r['status']} {r['detail']}" for r in rows if not r["ok"]]
    assert not bad, "\n".join(bad)


def _stub_regions(stack) -> list[str]:
    listed = stack.exec("triton_server", "ls", "/dev/shm").stdout.split()
    return [name for name in listed if name.startswith("servelab_triton_8000_")]


def test_a_stub_region_as_an_output_region_is_refused_and_triton_keeps_running(stack, settings):
    """The crash of issue 29: a client registered a stub's own IPC region as a system
    shared-memory region and had Triton write an inference output into it (Signal 11; the
    container restarted). Now the registration is refused; the regions are private."""
    started = stack.container("triton_server")["State"]["StartedAt"]
    regions = _stub_regions(stack)
    assert regions, "no Python-backend stub region in the Triton container"
    modes = stack.exec("triton_server", "stat", "-c", "%a", *[f"/dev/shm/{r}" for r in regions])
    assert set(modes.stdout.split()) == {"600"}, modes.stdout
    register = requests.post(
        settings.url("TRITON_HTTP_PORT", "/v2/systemsharedmemory/region/evil/register"),
        json={"key": f"/{regions[0]}", "offset": 0, "byte_size": 44},
        timeout=30,
    )
    assert register.status_code == 403, register.text
    body = {
        "inputs": [
            {"name": "input", "shape": [1, 3, 224, 224], "datatype": "FP32", "data": [0.0] * 150528}
        ],
        "outputs": [
            {
                "name": "output",
                "parameters": {"shared_memory_region": "evil", "shared_memory_byte_size": 44},
            }
        ],
    }
    infer = requests.post(
        settings.url("TRITON_HTTP_PORT", "/v2/models/food_classifier_onnx/infer"),
        json=body,
        timeout=60,
    )
    # no such region (the stand-in's Triton 2.51 answers 404; other builds 400)
    assert infer.status_code in (400, 404) and "Unable to find shared memory region" in infer.text
    assert stack.container("triton_server")["State"]["StartedAt"] == started
    assert requests.get(settings.url("TRITON_HTTP_PORT", "/v2/health/ready"), timeout=10).ok


KILL_STUB = (
    "import os, signal, pathlib\n"
    "for p in pathlib.Path('/proc').glob('[0-9]*/cmdline'):\n"
    "    argv = p.read_bytes().split(b'\\0')\n"
    "    stub = len(argv) > 1 and argv[0].endswith(b'triton_python_backend_stub')\n"
    "    if stub and b'/food_classifier/' in argv[1]:\n"
    "        os.kill(int(p.parent.name), signal.SIGKILL); print(p.parent.name); break\n"
)
CHECK = [
    "python3",
    "-m",
    "servelab.serving.triton_watchdog",
    "--check",
    "--url=http://127.0.0.1:8000",
    "--health-file=/tmp/triton_health.json",
]


def test_a_killed_stub_is_reported_and_its_model_serves_again(stack, client):
    """kill -9 of a Python-backend stub (an OOM kill): the container's health check says so
    while it lasts, the watchdog loads the model again, the container is not restarted."""
    started = stack.container("triton_server")["State"]["StartedAt"]
    image = np.array([[food11.encode_file(a_jpeg()).encode()]], dtype=object)
    text_in = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
    text_in.set_data_from_numpy(image)
    assert client.infer("food_classifier", [text_in]).as_numpy("FOOD_LABEL").size == 1
    killed = stack.exec("triton_server", "python3", "-c", KILL_STUB).stdout.strip()
    assert killed.isdigit(), "no stub of food_classifier found"
    t0 = time.monotonic()
    reports, serving_after = [], None
    while time.monotonic() - t0 < 180 and serving_after is None:
        check = stack.exec("triton_server", *CHECK, check=False)
        reports.append((check.returncode, check.stdout))
        try:
            client.infer("food_classifier", [text_in])
            serving_after = time.monotonic() - t0
        except Exception:  # noqa: BLE001 - 500 'Stub process ... is not healthy' meanwhile
            time.sleep(1)
    say(f"stub {killed} killed: food_classifier serving again after {serving_after} s")
    assert serving_after is not None, reports[-3:]
    assert serving_after < 30, reports[-3:]  # issue 29: serving again within 30 s
    # the check said so while it lasted (unhealthy, food_classifier reloading or not ready), or
    # the repair was over before its first look and the watchdog's report records it: the report
    # is written once a second, so the repair's event can land a second after the model serves
    said = any(
        code != 0 and ("food_classifier: reloading" in out or "food_classifier: NOT READY" in out)
        for code, out in reports
    )

    def recorded():
        health = stack.exec("triton_server", "cat", "/tmp/triton_health.json", check=False)
        events = json.loads(health.stdout or "{}").get("events", [])
        return any(f"food_classifier: stub [{killed}] died" in e for e in events)

    if not said:
        wait_for(recorded, 10, f"no check said it ({reports[:3]}); the watchdog's event", 1)
    assert stack.container("triton_server")["State"]["StartedAt"] == started
    wait_for(
        lambda: stack.container("triton_server")["State"]["Health"]["Status"] == "healthy",
        120,
        "triton_server healthy again",
    )


@pytest.mark.timeout(3000)
def test_notebooks_5_to_8_run_in_the_jupyter_container(stack, settings):
    triton_id = stack.container("triton_server")["Id"]
    code, commands, log = stack.run_notebook("05_triton_setup", {})
    assert code == 0, log[-3000:]
    code, commands, log = stack.run_notebook("06_triton_benchmarks", QUICK_PARAMS, predictions=True)
    assert code == 0, log[-5000:]
    # the Flask switches, with the files the stack runs with; only flask is recreated
    assert commands == [
        f"FOOD11_MODEL_NAME={m} docker compose {stack.file_options} up -d --no-deps --wait flask"
        for m in ("food_classifier_onnx", "food_classifier")
    ]
    assert stack.container("triton_server")["Id"] == triton_id, (
        "a printed host command recreated Triton"
    )
    summary = pd.read_csv(HOST_RESULTS / "triton" / "summary.csv")
    assert set(summary["run"].str.split(" ").str[0]) == {"6.1", "6.2", "6.3", "6.4", "6.6"}
    assert summary["command"].str.startswith("perf_analyzer -m food_classifier").all()
    code, commands, log = stack.run_notebook("07_how_close_to_the_hardware", QUICK_PARAMS)
    assert code == 0, log[-5000:]
    assert len(commands) == 1 and commands[0].startswith(
        f"docker compose {stack.file_options} exec -T "
    )
    hardware = pd.read_csv(HOST_RESULTS / "hardware" / "summary.csv")
    assert (hardware["throughput_infer_s"] > 0).all()
    assert hardware["command"].str.contains("--shared-memory system").any()
    assert stack.container("triton_server")["Id"] == triton_id
    # notebook 8 last: it compares Model Analyzer's search with notebook 7's result, now written
    small = {
        **QUICK_PARAMS,
        "GF_MA_INSTANCES": "1,2",
        "GF_MA_MAX_BATCH": "8",
        "GF_MA_CONCURRENCY": "4",
        "GF_MA_WINDOW_MS": 1000,
    }
    code, commands, log = stack.run_notebook("08_going_further", small, predictions=True)
    assert code == 0, log[-5000:]
    assert commands == []  # Model Analyzer ran from Jupyter (remote launch mode): no host step
    going = HOST_RESULTS / "going_further"
    search = json.loads((going / "model_analyzer" / "search.json").read_text())
    assert search["launch"] == "remote" and search["triton"] == "http://triton_server:8000"
    compared = pd.read_csv(going / "model_analyzer_vs_hand_tuned.csv")
    # notebook 7's limit was found (its best under the budget too, if one of its runs kept p99
    # under 100 ms: on a CPU stand-in none may have)
    assert "served_over_limit" in compared
    assert (pd.read_csv(going / "live_8.5.csv")["preprocess:infer_per_s"] > 0).sum() >= 6
    assert stack.container("triton_server")["Id"] == triton_id


def test_a_model_that_fails_to_load_does_not_stop_triton(stack, settings, client):
    """One broken model in the repository: the server starts anyway, says why that model is
    UNAVAILABLE, serves the others, and is not restarted in a loop."""
    broken = REPOSITORY / "broken_on_purpose"
    shutil.copytree(REPOSITORY / "food_classifier", broken)
    config = broken / "config.pbtxt"
    config.write_text(
        config.read_text().replace('name: "food_classifier"', 'name: "broken_on_purpose"')
    )
    (broken / "1" / "model.py").write_text(
        "raise RuntimeError('this model is broken on purpose')\n"
    )
    try:
        stack.compose("restart", "triton_server", timeout=300)
        wait_for(
            lambda: stack.container("triton_server")["State"]["Health"]["Status"] == "healthy",
            300,
            "triton_server healthy after the restart",
        )
        index = repository_index(settings)
        assert index["broken_on_purpose"]["state"] == "UNAVAILABLE"
        assert "broken on purpose" in index["broken_on_purpose"]["reason"]
        assert (
            index["food_classifier"]["state"] == index["food_classifier_onnx"]["state"] == "READY"
        )
        state = stack.container("triton_server")["State"]
        assert state["Running"] and state["Restarting"] is False
        assert stack.container("triton_server")["RestartCount"] == 0
        assert client.is_model_ready("food_classifier_onnx")
    finally:
        shutil.rmtree(broken)
