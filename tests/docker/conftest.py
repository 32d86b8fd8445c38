"""Fixtures of the Docker tests (make test-docker); the helpers are in compose_stack.py."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from compose_stack import DOCKER_DIR, HOST_RESULTS, KEEP_IMAGES, Settings, read_env_file, say


def pytest_collection_modifyitems(config, items):
    if os.environ.get("LAB_DOCKER_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="needs a Docker engine: run `make test-docker`")
    for item in items:
        if "tests/docker/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def settings() -> Settings:
    init = subprocess.run(["bash", str(DOCKER_DIR / "init_env.sh")], capture_output=True, text=True)
    assert init.returncode == 0, init.stderr
    s = Settings()
    say(f"GPU runtime: {'yes' if s.gpu else 'no (CPU override files)'}; settings: {s.env}")
    if HOST_RESULTS.exists():
        shutil.rmtree(HOST_RESULTS, ignore_errors=True)
    # owned like results/ (init_env.sh gives it Jupyter's user): a test that writes here from the
    # host first (the ensemble's input file) must not leave a folder Jupyter cannot write into
    HOST_RESULTS.mkdir(parents=True)
    owner = HOST_RESULTS.parent.stat()
    os.chown(HOST_RESULTS, owner.st_uid, owner.st_gid)
    yield s
    usage = subprocess.run(["docker", "system", "df"], capture_output=True, text=True).stdout
    say("disk used by Docker at the end of the run:\n" + usage)
    if not KEEP_IMAGES:
        # the lab's images and the stand-ins built here (labelled); real pulled base images stay
        lab = subprocess.run(
            ["docker", "images", "-q", "--filter", "reference=servelab/*"],
            capture_output=True,
            text=True,
        ).stdout.split()
        standins = subprocess.run(
            ["docker", "images", "-q", "--filter", "label=org.servelab.standin"],
            capture_output=True,
            text=True,
        ).stdout.split()
        images = sorted(set(lab + standins))
        if images:
            subprocess.run(["docker", "rmi", "-f", *images], capture_output=True)
        subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True)
        say(
            f"removed {len(lab)} lab images, {len(standins)} stand-ins and the build cache "
            "(LAB_DOCKER_KEEP_IMAGES=1 keeps them)"
        )


@pytest.fixture(scope="session")
def jupyter_token(settings) -> str:
    return read_env_file(DOCKER_DIR / ".env")["JUPYTER_TOKEN"]
