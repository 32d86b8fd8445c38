"""Shared fixtures: real service processes on free loopback ports, stopped after use."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import pytest

# jsonschema (under nbformat, jupytext, Ray) compiles an IRI grammar (rfc3987-syntax, a Jupyter
# dependency) when it is first imported: 2.6 s of CPU for a string format no test validates.
# Without the module, jsonschema leaves that one format unchecked; every test runs the same.
sys.modules.setdefault("rfc3987_syntax", None)  # before anything imports jsonschema

from labstack import artifacts, launcher  # noqa: E402
from servelab.paths import TEST_IMAGES  # noqa: E402
from servelab.serving.runtimes import RUNTIMES  # noqa: E402

PY = sys.executable
# Fixtures that start real servers. A test using one belongs to the slow tier (`-m "not slow"` is
# the fast one); this keeps it so when a new test borrows one of them.
SERVER_FIXTURES = {"start_service", "fastapi_servers", "services", "triton", "flask_url"}
SERVER_FIXTURES |= {"review_venv"}  # builds a virtual environment (minutes): slow too

# The tiers beside `make test` (README, "Tests"), by file name, so that a new file joins its tier
# without a marker to forget: each slow test runs in exactly one of make test, make
# test-chameleon, make test-extended and make test-docker (tests/docker/).
TIERS = {
    # the fake Chameleon's class scenarios (notebooks 1 and 2) and python-chi's contract
    "chameleon": ("test_chameleon_*.py", "test_chi_contract.py"),
    # the optional notebooks 7, 8 and 9 and what only they use (notebook 8's ensemble and Model
    # Analyzer's search), and the reliability suite (make reliability's code: faults, fuzzing,
    # hostile clients, costly uploads, soak): outside make test's 20 minutes and CI's 25, run
    # by maintainers (notebooks 7 and 8 also run in make test-docker's Jupyter container). The
    # security round's tests stay in make test: Ray's token, Triton's crashes, the decode fuzz.
    "extended": (
        "test_notebook_07.py",
        "test_notebook_08.py",
        "test_notebook_09.py",
        "test_ensemble.py",
        "test_model_analyzer.py",
        "test_decode_cost.py",
        "test_faults.py",
        "test_watchdog_faults.py",
        "test_fuzz_*.py",
        "test_hostile_clients.py",
        "test_soak.py",
    ),
}


def tier_of(path: Path) -> str:
    """The tier of a test file's slow tests: 'core' (make test) unless TIERS or tests/docker/
    says otherwise."""
    if path.parent.name == "docker":
        return "docker"
    return next((t for t, names in TIERS.items() if any(path.match(n) for n in names)), "core")


def pytest_addoption(parser):
    parser.addoption(
        "--tier",
        choices=("core", "chameleon", "extended", "docker"),
        help="core (make test): every fast test and the slow tests of no other tier; "
        "chameleon, extended, docker: every test of that tier's files, the others not collected",
    )


def pytest_ignore_collect(collection_path, config):
    """--tier: the files of other tiers are not even imported (make test keeps every file's fast
    tests, so it collects all but tests/docker/)."""
    tier = config.getoption("tier")
    if tier is None:
        return None
    if collection_path.is_dir():  # tests/docker/ (and its conftest) only for its own tier
        return True if collection_path.name == "docker" and tier != "docker" else None
    if not collection_path.name.startswith("test_"):
        return None
    mine = tier_of(collection_path)
    if tier == "core":
        return True if mine == "docker" else None
    return True if mine != tier else None


def pytest_collection_modifyitems(config, items):
    tier, left = config.getoption("tier"), []
    for item in items:
        mine = tier_of(Path(item.fspath))
        if mine != "core":
            item.add_marker(mine)
        if tier == "core" and mine != "core" and item.get_closest_marker("slow"):
            left.append(item)  # runs in its own tier
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [i for i in items if i not in left]


def pytest_runtest_setup(item):
    servers = SERVER_FIXTURES.intersection(item.fixturenames)
    if servers and item.get_closest_marker("slow") is None:
        pytest.fail(f"starts servers ({', '.join(sorted(servers))}): mark it @pytest.mark.slow")


@pytest.fixture(scope="session")
def review_venv() -> Path:
    """The python of a venv made by notebook 0's commands (requirements/review.txt and
    JupyterLab) and nothing else: where the prepare and review passes run (tests/review_venv.py).
    Made once for what it is made from, and reused by the next tier."""
    import review_venv as venvs

    # outside the clone's .lab/ (tests empty it), the same for every tier of a run
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "servelab-tests"
    return venvs.built_once(cache / "review_venv")


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
