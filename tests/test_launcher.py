"""Local mode's launcher as a student uses it: up, switch runtime, crash, up again, down, down."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
import requests
from jupyter_client import BlockingKernelClient
from launcher_cli import run_launcher

from labstack import launcher
from servelab.paths import NOTEBOOKS


def _env(state_dir: Path) -> dict:
    return dict(line.split("=", 1) for line in (state_dir / "urls.env").read_text().splitlines())


def _pids(state_dir: Path) -> dict:
    return {
        n: r["pid"]
        for n, r in json.loads((state_dir / "state.json").read_text())["services"].items()
    }


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return status == "Z"
    except OSError:
        return True


@pytest.mark.slow
def test_up_switch_crash_up_down_down(tmp_path, image_b64, built_artifacts):
    state = tmp_path / "lab"
    started = run_launcher(state, "up", "--no-triton")
    assert started.returncode == 0, started.stdout + started.stderr
    env = _env(state)
    assert env["LAB_MODE"] == "local" and env["FASTAPI_BACKEND"] == "pt"
    fastapi, flask = env["FASTAPI_SERVER_URL"], env["FLASK_SERVER_URL"]
    assert fastapi.startswith("http://127.0.0.1:") and flask.startswith("http://127.0.0.1:")
    assert (state / "logs" / "fastapi.log").exists()
    resp = requests.post(f"{fastapi}/predict", json={"image": image_b64}, timeout=60)
    assert resp.status_code == 200 and resp.json()["prediction"] in built_artifacts["classes"]

    # one setting switches the runtime, on the same URL
    switched = run_launcher(state, "restart", "fastapi", "--set", "FASTAPI_BACKEND=onnx")
    assert switched.returncode == 0, switched.stderr
    assert requests.get(f"{fastapi}/health", timeout=5).json()["runtime"] == "onnx"
    assert _env(state)["FASTAPI_BACKEND"] == "onnx"

    # a crash: the FastAPI process dies; `up` again starts it on its URL, Flask keeps running
    old = _pids(state)
    os.killpg(old["fastapi"], signal.SIGKILL)
    again = run_launcher(state, "up", "--no-triton")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "flask: running and healthy" in again.stdout and "starting fastapi" in again.stdout
    new = _pids(state)
    assert new["flask"] == old["flask"] and new["fastapi"] != old["fastapi"]
    assert _env(state)["FASTAPI_SERVER_URL"] == fastapi
    assert requests.get(f"{fastapi}/health", timeout=5).status_code == 200

    stopped = run_launcher(state, "down")
    assert stopped.returncode == 0 and "fastapi" in stopped.stdout
    deadline = time.time() + 10
    while time.time() < deadline and not all(_gone(p) for p in new.values()):
        time.sleep(0.2)
    assert all(_gone(p) for p in new.values()), "make down left a process behind"
    assert not (state / "urls.env").exists() and not (state / "state.json").exists()
    twice = run_launcher(state, "down")
    assert twice.returncode == 0 and "nothing was running" in twice.stdout


def test_failed_start_reports_the_log(tmp_path):
    state = tmp_path / "lab"
    failed = run_launcher(state, "up", "--no-triton", extra_env={"FASTAPI_BACKEND": "tensorflow"})
    assert failed.returncode != 0 and "FASTAPI_BACKEND must be" in failed.stderr
    assert not (state / "state.json").exists()


def _mode(path: Path) -> str:
    return oct(path.stat().st_mode & 0o777)


@pytest.mark.slow
def test_secrets_stay_private_and_restarts_keep_ports_and_token(tmp_path, built_artifacts):
    """No token on a command line, secret files 0600 in a 0700 folder, no environment dump in the
    state; `down` + `up` and `restart` give the student the same URLs and token back."""
    state = tmp_path / "lab"
    first = run_launcher(state, "up", "--no-triton", "--jupyter")
    assert first.returncode == 0, first.stdout + first.stderr
    try:
        env = _env(state)
        token = env["JUPYTER_URL"].split("token=")[1]
        assert len(token) == 32
        for pid in _pids(state).values():  # every local user can read these
            assert token not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert _mode(state) == "0o700"
        for name in ("secrets.env", "urls.env", "state.json", "ports.json"):
            assert _mode(state / name) == "0o600", name
        saved = (state / "state.json").read_text()
        assert token not in saved and "PATH" not in saved and "LD_LIBRARY_PATH" not in saved
        again = run_launcher(state, "restart", "flask")
        assert again.returncode == 0 and _env(state)["FLASK_SERVER_URL"] == env["FLASK_SERVER_URL"]
        down = run_launcher(state, "down")
        assert down.returncode == 0
        up = run_launcher(state, "up", "--no-triton", "--jupyter")
        assert up.returncode == 0, up.stdout + up.stderr
        after = _env(state)
        for key in ("JUPYTER_URL", "FASTAPI_SERVER_URL", "FLASK_SERVER_URL"):
            assert after[key] == env[key], key
    finally:
        run_launcher(state, "down")


def _page_config(html: str) -> dict:
    """The settings JupyterLab's page hands its frontend (the jupyter-config-data script)."""
    start = html.index('id="jupyter-config-data"')
    body = html[html.index(">", start) + 1 :]
    return json.loads(body[: body.index("</script>")])


def _run_in_kernel(connection_file: Path, code: str) -> str:
    client = BlockingKernelClient()
    client.load_connection_file(str(connection_file))
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        out: list[str] = []

        def keep(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        client.execute_interactive(code, output_hook=keep, timeout=60)
        return "".join(out)
    finally:
        client.stop_channels()


@pytest.mark.slow
def test_jupyterlab_opens_in_the_students_folder_without_the_news_prompt(tmp_path, start_service):
    """make up's JupyterLab: notebooks/ as its root (the sources and the solved edition are out
    of its reach), JupyterLab 4's announcements plugin (the news prompt) off, and a notebook's
    kernel in notebooks/, importing lab_settings there and servelab from the venv."""
    runtime = tmp_path / "runtime"
    isolated = {  # nothing of the user's own Jupyter settings, nothing left in their home
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    token = "t" * 32
    lab = start_service(launcher.jupyter_service(launcher.free_port(), token, isolated))
    auth = {"Authorization": f"token {token}"}

    page = requests.get(f"{lab.url}/lab", headers=auth, timeout=30)
    assert page.status_code == 200
    config = _page_config(page.text)
    assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    assert Path(config["serverRoot"]) == NOTEBOOKS

    listing = requests.get(f"{lab.url}/api/contents", headers=auth, timeout=30).json()
    names = {item["name"] for item in listing["content"]}
    assert "00_how_to_use_this_lab.ipynb" in names and "lab_settings.py" in names
    for outside in ("..%2Fnotebook_sources", "..%2Fdocs%2Fanswer_key.md", "..%2FREADME.md"):
        got = requests.get(f"{lab.url}/api/contents/{outside}", headers=auth, timeout=30)
        assert got.status_code in (403, 404), (outside, got.status_code)

    session = requests.post(
        f"{lab.url}/api/sessions",
        headers=auth,
        json={
            "path": "00_how_to_use_this_lab.ipynb",
            "type": "notebook",
            "name": "",
            "kernel": {"name": "python3"},
        },
        timeout=60,
    ).json()
    try:
        printed = _run_in_kernel(
            runtime / f"kernel-{session['kernel']['id']}.json",
            "import os, lab_settings, servelab.exercises\nprint(os.getcwd())",
        )
        assert printed.strip() == str(NOTEBOOKS), printed
    finally:
        requests.delete(f"{lab.url}/api/sessions/{session['id']}", headers=auth, timeout=30)


def test_status_names_a_dead_triton_and_what_recovers_it_in_red_on_a_terminal(
    tmp_path, monkeypatch, capsys
):
    """A recorded Triton whose watchdog is gone (no process at all here): DOWN, the report's
    reason and `make up`; the word in red only where a terminal shows colour."""
    import io
    import subprocess
    import sys

    from labstack import launcher

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    health = tmp_path / "triton_health.json"
    health.write_text(json.dumps({"time": 0, "failed": "the watchdog gave up: run `make x`"}))
    rec = {
        "pid": gone.pid,
        "marker": "--health-file=nowhere",
        "health": "http://127.0.0.1:9/v2/health/ready",
        "log": "triton.log",
        "port": 9,
        "health_file": str(health),
    }
    launcher.print_status({"services": {"triton": rec}})
    out = capsys.readouterr().out
    assert " DOWN " in out and "FAILED: the watchdog gave up" in out and "`make up`" in out
    assert "\033[" not in out  # captured output is not a terminal

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys, "stdout", Tty())
    assert launcher.red("DOWN") == "\033[1;31mDOWN\033[0m" and launcher.red("healthy") == "healthy"
    monkeypatch.setenv("NO_COLOR", "1")
    assert launcher.red("DOWN") == "DOWN"
