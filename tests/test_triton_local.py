"""Local-mode Triton environment: the Python-backend stubs must import a numpy < 2.

(Seen on the CPU machine with a Python 3.12 venv and on the H100: with numpy 2.x the pytriton 0.7.0
stubs load, then corrupt every BYTES input and the stub process dies on the first request.)
"""

import re
from pathlib import Path

import pytest

from labstack import triton_local
from servelab import labenv


def test_the_lab_environment_gives_the_stubs_numpy_1(built_artifacts):
    env = triton_local.server_env()
    assert triton_local.check_stub_numpy(env).startswith("1.")


def test_numpy_2_for_the_stubs_is_refused_with_the_fix(tmp_path, monkeypatch):
    fake = tmp_path / "extra" / "numpy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '2.3.5'\n")
    monkeypatch.setenv("LAB_TRITON_PYTHONPATH", str(fake.parent))
    env = triton_local.server_env(stub_root=tmp_path / "triton")
    # the stubs' own venv first on the server's PATH, the lab's PATH otherwise unchanged
    assert env["PATH"].split(":")[0] == str(tmp_path / "triton" / "stub_python" / "bin")
    with pytest.raises(
        triton_local.TritonNotInstalled, match=r"numpy 2\.3\.5.*numpy < 2.*LAB_TRITON_PYTHONPATH"
    ):
        triton_local.check_stub_numpy(env)


PROBE_CONFIG = """name: "path_probe"
backend: "python"
max_batch_size: 4
input [ { name: "IN", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_STRING, dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""
PROBE_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils
import lab_stub_probe  # only in the LAB_TRITON_PYTHONPATH folder


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0][0]
            answer = f"{lab_stub_probe.VALUE}:{np.__version__}:{len(text)}".encode()
            tensor = pb_utils.Tensor("OUT", np.array([[answer]], dtype=object))
            out.append(pb_utils.InferenceResponse([tensor]))
        return out
"""


@pytest.mark.slow
def test_lab_triton_pythonpath_reaches_the_real_stub(
    tmp_path, monkeypatch, start_service, built_artifacts
):
    """The real tritonserver's stub imports a module that exists only in LAB_TRITON_PYTHONPATH.

    (PYTHONPATH alone does not reach the stubs: that is why the GPU machine's first runs still
    crashed with numpy 1.26 "first on PYTHONPATH".) A BYTES input also makes the round trip intact.
    """
    import requests

    from labstack import launcher

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "lab_stub_probe.py").write_text("VALUE = 'from-extra-folder'\n")
    repo = tmp_path / "repo"
    (repo / "path_probe" / "1").mkdir(parents=True)
    (repo / "path_probe" / "config.pbtxt").write_text(PROBE_CONFIG)
    (repo / "path_probe" / "1" / "model.py").write_text(PROBE_MODEL)
    monkeypatch.setenv("LAB_TRITON_PYTHONPATH", str(extra))
    http, grpc, metrics = (launcher.free_port() for _ in range(3))
    service = triton_local.service(
        repo,
        (http, grpc, metrics),
        tmp_path / "triton_health.json",
        timeout=180,
        backends=tmp_path / "triton" / "backends",
        repair=False,
    )
    assert service.env["PATH"].split(":")[0] == str(tmp_path / "triton" / "stub_python" / "bin")
    server = start_service(service)
    body = {
        "inputs": [{"name": "IN", "datatype": "BYTES", "shape": [1, 1], "data": ["hello stub"]}]
    }
    answer = requests.post(f"{server.url}/v2/models/path_probe/infer", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    value, numpy_version, length = answer.json()["outputs"][0]["data"][0].split(":")
    assert value == "from-extra-folder"
    assert numpy_version.startswith("1.")
    assert length == "10"


@pytest.mark.slow
def test_a_model_that_fails_to_load_leaves_the_server_serving(
    tmp_path, start_service, built_artifacts
):
    """Local mode starts Triton as the Docker stack does: one broken model is UNAVAILABLE with its
    reason, the server is up and serves the other model."""
    import requests

    from labstack import launcher

    repo = tmp_path / "repo"
    echo = PROBE_MODEL.replace(
        "import lab_stub_probe  # only in the LAB_TRITON_PYTHONPATH folder\n", ""
    )
    echo = echo.replace("{lab_stub_probe.VALUE}", "echo")
    for name, model_py in (
        ("path_probe", echo),
        ("broken_probe", "raise RuntimeError('broken on purpose')\n"),
    ):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(PROBE_CONFIG.replace('"path_probe"', f'"{name}"'))
        (repo / name / "1" / "model.py").write_text(model_py)
    http, grpc, metrics = (launcher.free_port() for _ in range(3))
    server = start_service(
        triton_local.service(
            repo,
            (http, grpc, metrics),
            tmp_path / "triton_health.json",
            timeout=180,
            backends=tmp_path / "triton" / "backends",
            repair=False,
        )
    )
    index = requests.post(
        f"{server.url}/v2/repository/index", json={}, headers=labenv.admin_headers(), timeout=10
    )
    index = {m["name"]: m for m in index.json()}
    assert (
        index["broken_probe"]["state"] == "UNAVAILABLE"
        and "broken on purpose" in index["broken_probe"]["reason"]
    )
    assert index["path_probe"]["state"] == "READY"
    assert (
        server.record["pid"]
        and requests.get(f"{server.url}/v2/models/path_probe/ready", timeout=5).status_code == 200
    )


CALL = re.compile(r"\bserver_command\(")


def test_every_part_of_the_lab_starts_tritonserver_one_way():
    """supervised_command() (or service()) is the one way the lab starts tritonserver: the
    launcher, the reliability suite, the tests and the GPU reference. No other file builds its
    command line, so none can leave the admin key on it. (Model Analyzer, notebook 8's search,
    starts a tritonserver of its own, with no restricted API and so no key:
    labstack/model_analyzer.py hands it the binary, tritonserver_binary().)"""
    from servelab.paths import REPO_ROOT

    mine, others = REPO_ROOT / "labstack" / "triton_local.py", []
    for folder in ("labstack", "maintainers", "servelab", "scripts", "tests"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            if path not in (mine, Path(__file__)) and CALL.search(path.read_text()):
                others.append(str(path.relative_to(REPO_ROOT)))
    assert others == [], others


def test_the_one_way_keeps_the_key_off_command_lines_and_out_of_the_servers_environment(
    tmp_path, monkeypatch, built_artifacts
):
    """The key reaches the watchdog through its environment, and nothing else: not the watchdog's
    command line, not tritonserver's (the watchdog adds the flags and masks the key), not the
    environment tritonserver and its stubs start from; the Jupyter token not even the watchdog."""
    monkeypatch.setenv("JUPYTER_TOKEN", "a-jupyter-token-of-this-test")
    service = triton_local.service(
        tmp_path / "repo", (8000, 8001, 8002), tmp_path / "health.json", admin_key="k" * 32
    )
    assert "k" * 32 not in " ".join(service.argv)
    assert service.env["TRITON_ADMIN_KEY"] == "k" * 32
    assert "a-jupyter-token-of-this-test" not in str(service.env)
    assert "--restrict-apis=" + ",".join(labenv.RESTRICTED_APIS) in service.argv
    monkeypatch.setattr("os.environ", {**service.env, "PATH": "/usr/bin"})
    from servelab.serving import triton_watchdog

    assert "TRITON_ADMIN_KEY" not in triton_watchdog.server_env()
