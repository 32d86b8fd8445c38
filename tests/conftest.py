"""Shared fixtures: real service processes on free loopback ports, stopped after use."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from labstack import artifacts, launcher
from servelab.paths import TEST_IMAGES
from servelab.serving.runtimes import RUNTIMES

PY = sys.executable
# Fixtures that start real servers. A test using one belongs to the slow tier (`-m "not slow"` is
# the fast one); this keeps it so when a new test borrows one of them.
SERVER_FIXTURES = {"start_service", "fastapi_servers", "services", "triton", "flask_url"}
SERVER_FIXTURES |= {"review_venv"}  # builds a virtual environment (about a minute): slow too


def pytest_runtest_setup(item):
    servers = SERVER_FIXTURES.intersection(item.fixturenames)
    if servers and item.get_closest_marker("slow") is None:
        pytest.fail(f"starts servers ({', '.join(sorted(servers))}): mark it @pytest.mark.slow")


@pytest.fixture(scope="session")
def review_venv(tmp_path_factory) -> Path:
    """The python of a fresh venv with requirements/review.txt only (and Jupyter's kernel and
    runner): where the prepare and review passes run (tests/review_venv.py)."""
    import review_venv as venvs

    return venvs.build(tmp_path_factory.mktemp("review_venv") / "venv")


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
        self.url = launcher.service_url(self.record["port"])

    def stop(self) -> None:
        launcher.stop_process(self.record["pid"], self.record["marker"], grace=5)


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
    """Both FastAPI services side by side for a test module: {runtime name: URL}."""
    servers = {
        name: Running(launcher.fastapi_service(launcher.free_port(), name)) for name in RUNTIMES
    }
    yield {name: s.url for name, s in servers.items()}
    for s in servers.values():
        s.stop()
