"""Shared fixtures: real service processes on free loopback ports, stopped after use."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from labstack import artifacts, launcher
from servelab.paths import TEST_IMAGES

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
    servers = {
        name: Running(launcher.fastapi_service(launcher.free_port(), name))
        for name in ("pytorch", "onnx")
    }
    yield {name: s.url for name, s in servers.items()}
    for s in servers.values():
        s.stop()
