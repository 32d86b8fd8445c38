"""Shared fixtures: real service processes on free loopback ports, stopped after use."""
from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab import artifacts, launcher
from servelab.paths import REPO_ROOT, TEST_IMAGES

PY = sys.executable


@pytest.fixture(scope="session")
def built_artifacts() -> dict:
    """The real artifacts (built once; `make test` builds them before pytest starts)."""
    return artifacts.build()


@pytest.fixture(scope="session")
def test_images(built_artifacts) -> list[Path]:
    return [TEST_IMAGES / name for name in built_artifacts["test_images"]]


@pytest.fixture(scope="session")
def image_b64(test_images) -> str:
    return base64.b64encode(test_images[0].read_bytes()).decode()


class Running:
    """A service started with the launcher's own start(); stop() kills its process group."""

    def __init__(self, service: launcher.Service):
        self.service = service
        self.record = launcher.start(service)
        self.url = launcher._url(self.record["port"])

    def stop(self) -> None:
        launcher._stop(self.record["pid"], self.record["marker"], grace=5)


@pytest.fixture
def start_service():
    started: list[Running] = []

    def _start(service: launcher.Service) -> Running:
        running = Running(service)
        started.append(running)
        return running

    yield _start
    for running in reversed(started):
        running.stop()


@pytest.fixture(scope="module")
def fastapi_servers(built_artifacts):
    """Both FastAPI services (PyTorch and ONNX) running side by side for a test module."""
    servers = {name: Running(launcher.fastapi_service(launcher.free_port(), name)) for name in ("pytorch", "onnx")}
    yield {name: s.url for name, s in servers.items()}
    for s in servers.values():
        s.stop()


def run_launcher(state_dir: Path, *args: str, timeout: float = 600, extra_env: dict | None = None):
    """The launcher CLI in a subprocess with its own state folder (never touches the user's .lab/)."""
    env = {**os.environ, "LAB_STATE_DIR": str(state_dir), **(extra_env or {})}
    return subprocess.run([PY, "-m", "servelab.launcher", *args], cwd=REPO_ROOT, env=env, timeout=timeout,
                          capture_output=True, text=True)
