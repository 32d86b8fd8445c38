"""labenv: the Triton addresses a notebook needs; services: the host steps it prints in Docker."""

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from servelab import labenv, services


def test_triton_urls_default_to_triton_ports_on_the_http_host(monkeypatch):
    monkeypatch.setenv("TRITON_SERVER_URL", "http://triton_server:8000/")
    monkeypatch.delenv("TRITON_GRPC_URL", raising=False)
    monkeypatch.delenv("TRITON_METRICS_URL", raising=False)
    assert labenv.triton_urls() == (
        "http://triton_server:8000",
        "triton_server:8001",
        "http://triton_server:8002/metrics",
    )


def test_triton_urls_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRITON_SERVER_URL", "http://127.0.0.1:41000")
    monkeypatch.setenv("TRITON_GRPC_URL", "127.0.0.1:41001")
    monkeypatch.setenv("TRITON_METRICS_URL", "http://127.0.0.1:41002/metrics")
    assert labenv.triton_urls() == (
        "http://127.0.0.1:41000",
        "127.0.0.1:41001",
        "http://127.0.0.1:41002/metrics",
    )


def test_the_address_is_normalised_once_and_utilisation_follows_the_server(monkeypatch):
    """labenv writes Triton's address out for every module; a run that names another server (its
    perf_analyzer line's -u) reads that server's metrics, not the environment's."""
    monkeypatch.setenv("TRITON_SERVER_URL", "http://127.0.0.1:41000/")
    monkeypatch.setenv("TRITON_METRICS_URL", "127.0.0.1:41002/metrics")
    assert labenv.triton_url() == "http://127.0.0.1:41000"
    assert labenv.triton_url("node:8000") == "http://node:8000"
    assert labenv.metrics_url() == "http://127.0.0.1:41002/metrics"
    assert labenv.metrics_url(server="127.0.0.1:41000") == "http://127.0.0.1:41002/metrics"
    assert labenv.metrics_url(server="node:8000") == "http://node:8002/metrics"
    assert labenv.metrics_url("other:9002/metrics", server="node:8000") == (
        "http://other:9002/metrics"
    )


# --- Docker: the host steps a notebook prints (make test-docker runs them as printed)


@pytest.fixture
def health_server():
    """A real HTTP server answering the two health URLs as the switched services do."""
    answers = {
        "/healthz": {"model_server": "Triton model 'food_classifier_onnx'"},
        "/health": {
            "status": "ready",
            "runtime": "onnx",
            "device": "cpu",
            "threads": 2,
            "workers": 1,
            "weights": "untrained",
        },
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(answers[self.path]).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_host_commands_keep_the_compose_files_the_stack_runs_with(
    monkeypatch, capsys, health_server
):
    """With the CPU override the printed command must name it too, or Compose would recreate the
    containers with a GPU reservation; on a GPU host only the stack's own file."""
    monkeypatch.setenv("LAB_MODE", "docker")
    monkeypatch.setenv(
        "FASTAPI_BACKEND", "pt"
    )  # use_fastapi_backend sets it; monkeypatch restores it
    monkeypatch.setenv("FLASK_SERVER_URL", health_server)
    monkeypatch.setenv("FASTAPI_SERVER_URL", health_server)
    for files in (
        "-f docker-compose-triton.yaml",
        "-f docker-compose-triton.yaml -f docker-compose-triton-cpu.yaml",
    ):
        monkeypatch.setenv("LAB_COMPOSE_FILES", files)
        services.use_flask_triton_model("food_classifier_onnx", timeout=5)
        printed = capsys.readouterr().out.splitlines()
        assert printed[0].startswith("Run this on the host, in the repository's docker/ folder")
        assert printed[1] == (
            f"  FOOD11_MODEL_NAME=food_classifier_onnx docker compose {files} "
            "up -d --no-deps --wait flask"
        )
    monkeypatch.setenv(
        "LAB_COMPOSE_FILES", "-f docker-compose-fastapi.yaml -f docker-compose-cpu.yaml"
    )
    services.use_fastapi_backend("onnx", timeout=5)
    assert capsys.readouterr().out.splitlines()[1] == (  # the image notebook 2 builds, first
        "  bash build_images.sh wait onnx; FASTAPI_BACKEND=onnx docker compose -f "
        "docker-compose-fastapi.yaml -f docker-compose-cpu.yaml up -d --build --wait fastapi_server"
    )


def test_no_host_command_without_the_compose_files(monkeypatch):
    monkeypatch.delenv("LAB_COMPOSE_FILES", raising=False)
    with pytest.raises(RuntimeError, match="LAB_COMPOSE_FILES"):
        services.compose_files()


def test_host_path_maps_the_jupyter_mounts(tmp_path):
    assert (
        services.host_path("/home/jovyan/work/results/hardware/raw_limit.json")
        == "../results/hardware/raw_limit.json"
    )
    with pytest.raises(ValueError):
        services.host_path("/tmp/elsewhere.json")


def test_wait_for_file_waits_for_a_complete_file_and_times_out(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(TimeoutError, match="did the host command run"):
        services.wait_for_file(target, timeout=0.1)
    target.write_text('{"a": 1}')
    assert services.wait_for_file(target, lambda t: t.endswith("}"), timeout=5) == '{"a": 1}'


def test_a_switch_to_two_workers_waits_until_both_serve(monkeypatch):
    """Two uvicorn workers load the model one after the other: the switch is done only once a
    second process has answered ready, however often the first one answers first (on the H100 a
    run started while one worker still loaded got 46 answers 503)."""
    answers = iter([(1, 200)] * 5 + [(2, 503)] * 2 + [(1, 200)] * 3 + [(2, 200)] + [(1, 200)] * 100)
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            pid, status = next(answers)
            seen.append((pid, status))
            body = {
                "status": "ready" if status == 200 else "loading",
                "runtime": "onnx",
                "device": "cpu",
                "threads": 1,
                "workers": 2,
                "weights": "untrained",
                "pid": pid,
            }
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # labenv polls once a second; the order of the answers is what counts, not the waits
    real_sleep = time.sleep
    monkeypatch.setattr(
        labenv, "time", SimpleNamespace(time=time.time, sleep=lambda s: real_sleep(0.01))
    )
    try:
        monkeypatch.setenv("LAB_MODE", "docker")
        monkeypatch.setenv("LAB_COMPOSE_FILES", "-f docker-compose-fastapi.yaml")
        monkeypatch.setenv("FASTAPI_BACKEND", "pt")
        monkeypatch.setenv("FASTAPI_SERVER_URL", f"http://127.0.0.1:{server.server_port}")
        health = services.use_fastapi_backend("onnx", workers=2, timeout=30)
    finally:
        server.shutdown()
    assert health["pid"] == 2 and seen[-1] == (2, 200) and len(seen) == 11


def test_load_takes_the_launchers_urls_in_local_mode_only(tmp_path, monkeypatch):
    """A JupyterLab started before a service moved to a new port has the old URL in its
    environment: in local mode labenv.load() takes the launcher's file; in Docker (the
    compose file's environment) nothing is overridden."""
    urls = tmp_path / "urls.env"
    urls.write_text("LAB_MODE=local\nTRITON_SERVER_URL=http://127.0.0.1:2222\nOTHER=file\n")
    monkeypatch.setattr(labenv, "URLS_ENV", urls)
    monkeypatch.setenv("TRITON_SERVER_URL", "http://127.0.0.1:1111")
    monkeypatch.setenv("OTHER", "env")
    monkeypatch.setenv("LAB_MODE", "local")
    labenv.load()
    assert os.environ["TRITON_SERVER_URL"] == "http://127.0.0.1:2222"
    assert os.environ["OTHER"] == "env"
    monkeypatch.setenv("LAB_MODE", "docker")
    monkeypatch.setenv("TRITON_SERVER_URL", "http://triton_server:8000")
    labenv.load()
    assert os.environ["TRITON_SERVER_URL"] == "http://triton_server:8000"


def test_a_ray_head_named_by_hand_wins_over_the_labs_cluster(tmp_path, monkeypatch):
    """Notebook 9 on Chameleon: LAB_RAY_HEAD (notebook 2's section 5 prints it) is the cluster to
    use, in local mode too: the lab's own cluster is not started, and the launcher's urls.env (a
    local cluster of an earlier run) does not take RAY_ADDRESS back."""
    urls = tmp_path / "urls.env"
    urls.write_text(
        "LAB_MODE=local\nRAY_ADDRESS=127.0.0.1:6380\nRAY_SERVE_URL=http://127.0.0.1:9\n"
    )
    monkeypatch.setattr(labenv, "URLS_ENV", urls)
    monkeypatch.setenv("LAB_MODE", "local")
    monkeypatch.setenv("LAB_RAY_HEAD", "10.52.3.7:6379")
    for name in ("LAB_RAY_SERVE_URL", "RAY_ADDRESS", "RAY_SERVE_URL"):  # restored after the test
        monkeypatch.delenv(name, raising=False)
    started = []
    monkeypatch.setattr(services, "_machinery", lambda *argv, **kw: started.append(argv))
    assert services.use_ray_cluster() == {
        "RAY_ADDRESS": "10.52.3.7:6379",
        "RAY_SERVE_URL": "http://127.0.0.1:8000",
    }
    labenv.load()
    assert os.environ["RAY_ADDRESS"] == "10.52.3.7:6379" and started == []
    monkeypatch.delenv("LAB_RAY_HEAD")  # without it, local mode reads the launcher's cluster
    labenv.load()
    assert os.environ["RAY_ADDRESS"] == "127.0.0.1:6380"
